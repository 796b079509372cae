"""Rollouts on the CPU: each prompt is processed once and its KV cache shared by its n samples.

This is what vLLM's prefix caching does for GRPO groups, and it is the mechanism behind the paper's
cost split: generation pays for a prompt once, the policy update pays for it on every one of n rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Rollout:
    """One sampled response; `old_log_probs` are log pi(token) under logits / temperature."""

    response_ids: tuple[int, ...]
    old_log_probs: tuple[float, ...]
    finished: bool  # ended with eos (else cut at max_new_tokens)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention_mask), rows aligned on the right so every prompt ends at the same column."""
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("every prompt needs at least one token")
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(list(r), dtype=torch.long)
        mask[i, width - len(r) :] = 1
    return ids, mask


def positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp_min(0)


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Mask logits outside the smallest set of tokens whose probability reaches top_p."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    drop = cumulative - sorted_logits.softmax(-1) >= top_p  # keeps the token that crosses top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


@torch.no_grad()
def _sample_group(
    model: torch.nn.Module,
    prompt: Sequence[int],
    n: int,
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    eos_id: int,
    generator: torch.Generator | None,
    share_prefix: bool,
) -> list[Rollout]:
    # One prompt at a time: its n rows have equal length, so no attention mask is needed and SDPA's
    # fast kernel runs (a padded batch needs a mask and is 2-3x slower on a CPU at ~1k-token prompts).
    ids = torch.tensor([list(prompt)], dtype=torch.long)
    if not share_prefix:
        ids = ids.repeat(n, 1)
    out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    cache, logits = out.cache, out.logits[:, -1]
    if share_prefix:
        cache.batch_repeat_interleave(n)
        logits = logits.repeat_interleave(n, 0)
    position = torch.full((n, 1), len(prompt), dtype=torch.long)
    tokens: list[list[int]] = [[] for _ in range(n)]
    logps: list[list[float]] = [[] for _ in range(n)]
    done = torch.zeros(n, dtype=torch.bool)
    for _ in range(max_new_tokens):
        logits = logits.float()
        if temperature == 0:
            token = logits.argmax(-1)
            logp = logits.log_softmax(-1).gather(-1, token[:, None])[:, 0]
        else:
            scaled = logits / temperature
            probs = top_p_filter(scaled, top_p).softmax(-1)
            token = torch.multinomial(probs, 1, generator=generator)[:, 0]
            # verl's old log-prob: the full tempered distribution, not the top-p truncated one
            logp = scaled.log_softmax(-1).gather(-1, token[:, None])[:, 0]
        for i in torch.nonzero(~done)[:, 0].tolist():
            tokens[i].append(int(token[i]))
            logps[i].append(float(logp[i]))
        done |= token == eos_id
        if bool(done.all()):
            break
        # Finished rows keep decoding (their tokens are dropped above): cheaper than reshaping the cache.
        out = model(input_ids=token[:, None], position_ids=position, cache=cache, use_cache=True)
        cache, logits, position = out.cache, out.logits[:, -1], position + 1
    return [
        Rollout(tuple(t), tuple(lp), bool(t and t[-1] == eos_id)) for t, lp in zip(tokens, logps, strict=True)
    ]


def sample_groups(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    n: int,
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int | None = None,
    generator: torch.Generator | None = None,
    share_prefix: bool = True,
) -> list[list[Rollout]]:
    """n responses per prompt; temperature 0 is greedy. `share_prefix=False` prefills every row.

    `pad_id` is accepted for symmetry with the update path; sampling never pads.
    """
    if n < 1 or max_new_tokens < 1:
        raise ValueError(f"need n >= 1 and max_new_tokens >= 1, got n={n}, max_new_tokens={max_new_tokens}")
    if temperature < 0 or not 0 < top_p <= 1:
        raise ValueError(f"need temperature >= 0 and 0 < top_p <= 1, got {temperature}, {top_p}")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    was_training = model.training
    model.eval()
    try:
        return [
            _sample_group(
                model,
                p,
                n,
                temperature=temperature,
                top_p=top_p,
                max_new_tokens=max_new_tokens,
                eos_id=eos_id,
                generator=generator,
                share_prefix=share_prefix,
            )
            for p in prompts
        ]
    finally:
        model.train(was_training)
