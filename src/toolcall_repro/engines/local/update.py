"""The policy update of one GRPO step: token-mean clipped loss over the kept rows, then one optimizer step.

Every row is a full prompt + response sequence (verl does the same: the update never shares the
prompt), so its cost grows with prompt length times the number of rows kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from toolcall_repro.engines.local.rollout import left_pad, positions
from toolcall_repro.rl.loss import policy_loss


@dataclass(frozen=True)
class UpdateRow:
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    old_log_probs: tuple[float, ...]
    advantage: float

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


def response_log_probs(
    model: torch.nn.Module, rows: Sequence[UpdateRow], temperature: float, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(response token) under logits / temperature, as (rows, max response) with its mask.

    A single row runs unpadded and without a mask (SDPA's causal kernel: ~2x faster on a CPU).
    """
    scale = temperature if temperature > 0 else 1.0
    if len(rows) == 1:
        r = rows[0]
        ids = torch.tensor([r.prompt_ids + r.response_ids])
        logits = model(input_ids=ids, logits_to_keep=len(r.response_ids) + 1).logits[:, :-1].float() / scale
        resp = torch.tensor([r.response_ids])
        return logits.log_softmax(-1).gather(-1, resp[..., None])[..., 0], torch.ones_like(
            resp, dtype=torch.bool
        )
    prompt_ids, prompt_mask = left_pad([r.prompt_ids for r in rows], pad_id)
    width = max(len(r.response_ids) for r in rows)
    resp = torch.full((len(rows), width), pad_id, dtype=torch.long)
    resp_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        resp[i, : len(r.response_ids)] = torch.tensor(r.response_ids, dtype=torch.long)
        resp_mask[i, : len(r.response_ids)] = 1
    ids = torch.cat([prompt_ids, resp], dim=-1)
    mask = torch.cat([prompt_mask, resp_mask], dim=-1)
    # Only the positions that predict response tokens go through the LM head.
    logits = model(
        input_ids=ids, attention_mask=mask, position_ids=positions(mask), logits_to_keep=width + 1
    ).logits
    logits = logits[:, :-1].float() / scale
    logp = logits.log_softmax(-1).gather(-1, resp[..., None])[..., 0]
    return logp, resp_mask.bool()


def _pad_float(values: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    out = torch.zeros((len(values), width), dtype=torch.float32)
    for i, v in enumerate(values):
        out[i, : len(v)] = torch.tensor(v, dtype=torch.float32)
    return out


def policy_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    rows: Sequence[UpdateRow],
    *,
    temperature: float,
    clip_low: float,
    clip_high: float,
    loss_agg: str,
    micro_batch_size: int,
    grad_clip: float | None,
    pad_id: int,
    mini_batches: int = 1,
) -> dict:
    """Back-propagate `rows` in micro-batches and step the optimizer once per mini-batch.

    With `mini_batches` > 1 (PPO mini-batches, verl's train batch / ppo_mini_batch_size) every mini-batch
    after the first sees weights that already moved, so the ratio to the rollout's log-probs leaves 1 and
    the clip range [1 - clip_low, 1 + clip_high] acts; with one mini-batch the ratio is 1 up to float noise.
    Returns timings (`update_s`: forward + backward, `optimizer_s`: clipping + step), the mean loss,
    the clip fractions (token-weighted over all mini-batches, and over the mini-batches after the first),
    the approximate KL to the rollout policy and `update_tokens` (prompt + response tokens of all rows).
    """
    if not rows:
        raise ValueError("policy_update needs at least one row")
    if micro_batch_size < 1 or mini_batches < 1:
        raise ValueError("micro_batch_size and mini_batches must be >= 1")
    model.train()
    update_s = optimizer_s = update_cpu_s = optimizer_cpu_s = 0.0
    losses, grad_norms = [], []
    # token-weighted sums: [clipped, clipped-lower (dual clip), kl, tokens] over all / later mini-batches
    sums = {"all": [0.0, 0.0, 0.0, 0], "later": [0.0, 0.0, 0.0, 0]}
    size = -(-len(rows) // mini_batches)
    for start in range(0, len(rows), size):
        mini = rows[start : start + size]
        batch_tokens = sum(len(r.response_ids) for r in mini)
        t0, c0 = time.perf_counter(), time.process_time()
        for m0 in range(0, len(mini), micro_batch_size):
            micro = mini[m0 : m0 + micro_batch_size]
            logp, mask = response_log_probs(model, micro, temperature, pad_id)
            old = _pad_float([r.old_log_probs for r in micro], logp.shape[1])
            adv = torch.tensor([r.advantage for r in micro], dtype=torch.float32)[:, None].expand_as(logp)
            loss, metrics = policy_loss(
                old,
                logp,
                adv,
                mask,
                clip_low,
                clip_high,
                loss_agg_mode=loss_agg,
                batch_num_tokens=batch_tokens,
            )
            if loss_agg != "token-mean":
                loss = loss * len(micro) / len(mini)  # per-micro-batch means -> mini-batch mean
            loss.backward()
            losses.append(loss.item())
            tokens = int(mask.sum())
            for key in ("all", "later") if start > 0 else ("all",):
                acc = sums[key]
                acc[0] += metrics["actor/pg_clipfrac"] * tokens
                acc[1] += metrics["actor/pg_clipfrac_lower"] * tokens
                acc[2] += metrics["actor/ppo_kl"] * tokens
                acc[3] += tokens
        t1, c1 = time.perf_counter(), time.process_time()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip else float("inf"))
        grad_norms.append(float(norm))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t2, c2 = time.perf_counter(), time.process_time()
        update_s += t1 - t0
        optimizer_s += t2 - t1
        update_cpu_s += c1 - c0
        optimizer_cpu_s += c2 - c1

    def share(key: str, i: int) -> float | None:
        return sums[key][i] / sums[key][3] if sums[key][3] else None

    return {
        "update_s": update_s,
        "optimizer_s": optimizer_s,
        "update_cpu_s": update_cpu_s,  # CPU seconds of this process (all its threads): resists other load
        "optimizer_cpu_s": optimizer_cpu_s,
        "loss": float(sum(losses)),
        "pg_clipfrac": share("all", 0),
        "pg_clipfrac_lower": share("all", 1),
        "ppo_kl": share("all", 2),
        "pg_clipfrac_later": share("later", 0),  # None with one mini-batch
        "optimizer_steps": len(grad_norms),
        "grad_norm": float(sum(grad_norms) / len(grad_norms)),
        "update_tokens": sum(r.num_tokens for r in rows),
    }
