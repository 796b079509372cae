"""Build the tiny base model from nothing: a BPE tokenizer trained on the data, a small Qwen2 model
from a config, and a short supervised warm start so that GRPO groups start mixed (not all-wrong).

The supervised targets are each sample's labelled answer plus the assistant messages of its history,
so multi-turn samples teach several calls per forward pass. Measured on the embedded default's data
(hidden 128, 4 layers, vocab 1024, batch 16, lr 3e-3): groups of 8 at the GRPO temperatures are
~40% mixed after 600 steps and ~55% after 800 (single-turn reward 0 before ~400 steps), measured
on all samples before the reserve existed; after the filters, GRPO's first epoch is 64-70% mixed.

The warmstart_base_model job (`toolcall-repro stage warmstart_base_model --describe` says what it reads).

Reserved conversations (`toolcall_repro.data.split`) are left out of the tokenizer and the supervised
steps: the filters draw their held-out splits from them, so held-out accuracy is on prompts the model
never saw.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import DynamicCache

from toolcall_repro.data.filters import ids_digest
from toolcall_repro.data.schema import Sample
from toolcall_repro.data.split import partition
from toolcall_repro.engines.local.model import build_model, save_hf_dir, set_threads, tiny_config
from toolcall_repro.engines.local.prompts import answer_text, load_samples, render_prompt
from toolcall_repro.engines.local.tokenizer import provisional_tokenizer, train_tokenizer
from toolcall_repro.progress import Progress, duration
from toolcall_repro.protocol import training_protocol

SFT_KEYS = ("vocab_size", "sft_steps", "sft_batch_size", "sft_lr")


# An earlier assistant message in the rendered history: its content and closing marker are targets too.
_ASSISTANT = re.compile(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>)", re.DOTALL)


@dataclass(frozen=True)
class Example:
    ids: list[int]
    targets: list[int]  # positions whose token is supervised (predicted from the position before)


def history_targets(text: str, offsets: Sequence[tuple[int, int]]) -> list[int]:
    """Token positions inside the assistant messages of a rendered history (standard chat SFT).

    Each message's first token is left out: history messages have their thinking dropped, while the
    labelled answer starts with <think>; supervising both openings would teach the model to skip it.
    """
    targets = []
    for m in _ASSISTANT.finditer(text):
        lo, hi = m.span(1)
        inside = [t for t, (a, b) in enumerate(offsets) if lo <= a and b <= hi and b > a]
        targets += inside[1:]
    return targets


def supervised_examples(samples: Sequence[Sample], tokenizer, max_tokens: int) -> tuple[list[Example], dict]:
    """Prompt + answer + eos per sample; the targets are the answer, its eos and every assistant message
    of the history (multi-turn samples carry several supervised calls at the cost of one forward pass).
    Overlong samples are dropped and counted."""
    protocol = training_protocol()
    examples, dropped = [], 0
    for s in samples:
        text = render_prompt(s, tokenizer, protocol)
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        prompt = enc["input_ids"]
        answer = tokenizer(answer_text(s.ground_truth_list), add_special_tokens=False)["input_ids"]
        ids = prompt + answer + [tokenizer.eos_token_id]
        if len(ids) > max_tokens:
            dropped += 1
            continue
        targets = [t for t in history_targets(text, enc["offset_mapping"]) if t > 0]
        examples.append(Example(ids, targets + list(range(len(prompt), len(ids)))))
    return examples, {"overlong": dropped}


def target_loss_sum(model, example: Example, prefix: list | None = None) -> torch.Tensor:
    """Summed cross-entropy of one example's target tokens.

    One unpadded sequence at a time: on a CPU this is ~2x faster than a padded batch, because the
    attention needs no mask (SDPA's causal kernel) and no padding is computed. ``prefix`` is the
    (keys, values) per layer of the batch's shared leading tokens (see ``shared_prefix``): only the
    rest of the sequence is run, attending to it, which is the same computation as the full sequence.
    """
    start = 0 if prefix is None else prefix[0][0].shape[-2]
    first = example.targets[0]
    if first - 1 < start:
        raise ValueError("a target lies inside the shared prefix")
    keep = len(example.ids) - first + 1  # logits from position first-1 on
    cache = None if prefix is None else DynamicCache(ddp_cache_data=prefix, config=model.config)
    logits = model(input_ids=torch.tensor([example.ids[start:]]), cache=cache, logits_to_keep=keep).logits[0]
    rows = torch.tensor(example.targets) - first
    labels = torch.tensor([example.ids[t] for t in example.targets])
    return torch.nn.functional.cross_entropy(logits[rows].float(), labels, reduction="sum")


def shared_prefix(model, batch: Sequence[Example]) -> list | None:
    """Run the batch's common leading tokens (the training system prompt) once, with gradients.

    Every sample's prompt opens with the same system prompt text: computing it once per batch instead of
    once per sequence is the prefix sharing that vLLM does at generation time, applied to the SFT step.
    """
    n = min(min(len(ex.ids) for ex in batch), min(ex.targets[0] for ex in batch) - 1)
    first = batch[0].ids
    common = 0
    while common < n and all(ex.ids[common] == first[common] for ex in batch):
        common += 1
    if common < 2 or len(batch) < 2:
        return None
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.tensor([first[:common]]), cache=cache, use_cache=True)
    return [(layer.keys, layer.values) for layer in cache.layers]


def lr_at(step: int, total: int, peak: float) -> float:
    """Linear warm-up over 5% of the steps, then cosine decay to 10% of the peak."""
    warm = max(1, total // 20)
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def warm_start(samples: Sequence[Sample], tiny: Mapping, seed: int, log=print, on_step=None):
    """Train tokenizer + model; returns (model, tokenizer, report dict).

    ``on_step(steps_done, model, tokenizer)`` is called after every optimizer step (snapshots).
    """
    from toolcall_repro.protocol import load_chat_template

    missing = [k for k in SFT_KEYS if k not in tiny]
    if missing:
        raise ValueError(f"model.tiny config lacks {missing}")
    if not samples:
        raise ValueError("no training samples for the warm start")
    t0 = time.perf_counter()
    template = load_chat_template()
    draft = provisional_tokenizer(template)
    protocol = training_protocol()
    corpus = [render_prompt(s, draft, protocol) + answer_text(s.ground_truth_list) for s in samples]
    tokenizer = train_tokenizer(corpus, int(tiny["vocab_size"]), template)
    config = tiny_config(tiny, len(tokenizer), tokenizer)
    examples, dropped = supervised_examples(samples, tokenizer, config.max_position_embeddings)
    if not examples:
        raise ValueError("every sample is longer than max_position_embeddings")
    model = build_model(config, seed)
    model.train()
    steps, batch_size, peak = int(tiny["sft_steps"]), int(tiny["sft_batch_size"]), float(tiny["sft_lr"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    order: list[int] = []
    losses = []
    log(
        f"warm start: tokenizer ({len(tokenizer)} tokens) and {len(examples)} examples ready, "
        f"{duration(time.perf_counter() - t0)}; {steps} steps, batch {batch_size}"
    )
    # a line at the first step, every 50 and the last, with the time the steps left will take
    progress = Progress(steps, "warm start", log, unit="steps", every=50)
    for step in range(steps):
        if len(order) < batch_size:
            order += rng.permutation(len(examples)).tolist()
        batch, order = [examples[i] for i in order[:batch_size]], order[batch_size:]
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, steps, peak)
        target_tokens = sum(len(ex.targets) for ex in batch)
        prefix = shared_prefix(model, batch)
        # token-mean over the batch; one backward through the shared prefix and every sequence
        loss = sum(target_loss_sum(model, ex, prefix) for ex in batch) / target_tokens
        loss.backward()
        total = loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
        if on_step is not None:
            on_step(step + 1, model, tokenizer)
        progress.update(loss=f"{total:.4f}", force=step == 0)
    lengths = [len(ex.ids) for ex in examples]
    report = {
        "samples": len(samples),
        "examples": len(examples),
        "dropped": dropped,
        "vocab_size": len(tokenizer),
        "parameters": sum(p.numel() for p in model.parameters()),
        "sft_steps": steps,
        "first_loss": losses[0],
        "final_loss_mean_last_20": float(np.mean(losses[-20:])),
        "tokens_per_example": {"mean": float(np.mean(lengths)), "max": int(max(lengths))},
        "targets_per_example": float(np.mean([len(ex.targets) for ex in examples])),
        "seed": seed,
        "wall_s": time.perf_counter() - t0,
    }
    return model, tokenizer, report


def build_base_model(
    *,
    train: list[str],
    out: str,
    tiny: dict,
    seed: int,
    reserve_fraction: float,
    reserve_seed: int,
    threads: int,
    early_out: str | None = None,
) -> dict:
    """Build the tiny model and warm-start it on the samples outside the reserve; save it to `out`
    (and the same run's weights after `tiny["early_step"]` steps to `early_out`, when given)."""
    set_threads(threads)
    samples, reserved = partition(load_samples(train), reserve_fraction, reserve_seed)
    print(f"reserve: {len(reserved)} of {len(samples) + len(reserved)} samples kept out", flush=True)
    early_step = tiny.get("early_step")
    if early_out and not early_step:
        raise ValueError("--early-out needs model.tiny.early_step")
    if early_step and not 1 <= int(early_step) <= int(tiny["sft_steps"]):
        raise ValueError(f"model.tiny.early_step must be in [1, sft_steps], got {early_step}")

    def snapshot(done: int, model, tokenizer) -> None:
        # The same run's earlier weights: a policy that is weaker than the RL start, as the paper's
        # filter policy is (its filters see ~20% mixed groups at the RL start, not the ~70% of self-filtering).
        if early_out and done == int(early_step):
            note = json.dumps({"sft_steps_done": done, "of": int(tiny["sft_steps"])})
            save_hf_dir(model, tokenizer, Path(early_out), extra_files={"early_step.json": note})

    model, tokenizer, report = warm_start(
        samples, tiny, seed, log=lambda m: print(m, flush=True), on_step=snapshot
    )
    report["reserve"] = {
        "fraction": reserve_fraction,
        "seed": reserve_seed,
        "excluded": len(reserved),
        "excluded_ids_sha256": ids_digest(reserved),
    }
    # The model folder holds what the seed and data decide, nothing timed: every score card names the
    # model by one sha256 over this folder (provenance.model_sha256), so a wall-clock figure
    # here made every base-model score file differ from run to run. The time goes to the log (and the
    # manifest records the job's).
    kept = {k: v for k, v in report.items() if k != "wall_s"}
    extra = {"warmstart_report.json": json.dumps(kept, indent=2, sort_keys=True)}
    save_hf_dir(model, tokenizer, Path(out), extra_files=extra)
    print(json.dumps(report, sort_keys=True))
    return report


def warmstart_base_model(j) -> None:
    """The warmstart_base_model job (toolcall_repro.job). config: {"model.tiny", "filter.reserve_fraction",
    "engines.warmstart_threads"}; seeds: {"model", "reserve"}; outputs model (and early)."""
    build_base_model(
        train=j.paths("samples"),
        out=j.out("model"),
        tiny=j.config["model.tiny"],
        seed=j.seed("model"),
        reserve_fraction=float(j.config["filter.reserve_fraction"]),
        reserve_seed=j.seed("reserve"),
        threads=int(j.config["engines.warmstart_threads"]),
        early_out=j.output.get("early"),
    )
