"""A held-out benchmark where a tiny model has skill: reserved samples, scored with the training reward.

On the embedded default the tiny model has no skill on BFCL's tools (every BFCL table is a pipeline
check there), so every protocol study also runs here. The prompts are the *reserve*
(`data/split.py`): normalised samples in the sources' real schemas whose conversations the warm start
never saw, minus any conversation that a training set holds (GRPO and format-study models train on
filter survivors, some of them reserved). Each prompt is rendered by `protocol.render` under the protocol
being studied (system prompt, output format, template, thinking), sampled once per seed, and scored with
the multi-turn training reward (`rewards.multi_turn_reward`: calls as exact multisets, no format term) in
the protocol's output format, so one number means the same thing under every protocol.

The score_heldout job (`toolcall-repro stage score_heldout --describe` says what it reads).

One job per (model, protocol): the prompts are chosen and rendered once and sampled once per seed (a tiny
model's job is mostly start-up), then `seeds.json` (one score document per seed), `summary.json` (the
evaluation seeds) and `variance.json` (the seed-variance study's seeds) are written, summarised as BFCL's
seed files are (`eval.seeds.summarise_seeds`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from toolcall_repro.configarg import load_config_arg
from toolcall_repro.data.schema import Sample, read_samples
from toolcall_repro.data.split import conversation_key, is_reserved, reserve_score
from toolcall_repro.eval.seeds import summarise_seeds
from toolcall_repro.io import atomic_write_json
from toolcall_repro.progress import Progress, print_line
from toolcall_repro.protocol import protocol_card, render
from toolcall_repro.rewards import SETTINGS, multi_turn_reward

BENCHMARK = "heldout-reserve"
FORMULA = {
    "single_turn": "mean reward over the reserved single-turn prompts",
    "multi_turn": "mean reward over the reserved multi-turn prompts",
    "avg": "(single_turn + multi_turn) / 2",
    "reward": "rewards.multi_turn_reward(output, ground_truth, fmt=protocol.output_format): exact multiset "
    "of (name, canonical JSON arguments), no format term; 'no call' matches 'no call'",
}


def select_prompts(
    samples: Sequence[Sample], exclude: Sequence[Sample], fraction: float, seed: int, per_setting: int
) -> dict[str, list[Sample]]:
    """Reserved samples whose conversation no excluded (training) sample shares, `per_setting` each.

    Order: by reserve score then id (a seeded, stable order), so a smaller cap is a prefix of a larger one.
    """
    if per_setting < 1:
        raise ValueError(f"per_setting must be >= 1, got {per_setting}")
    trained = {conversation_key(s) for s in exclude}
    out: dict[str, list[Sample]] = {}
    for setting in SETTINGS:
        pool = [
            s
            for s in samples
            if s.setting == setting and is_reserved(s, fraction, seed) and conversation_key(s) not in trained
        ]
        pool.sort(key=lambda s: (reserve_score(conversation_key(s), seed), s.id))
        if not pool:
            raise ValueError(f"no reserved {setting} samples outside the training sets")
        out[setting] = pool[:per_setting]
    return out


def score_outputs(prompts: dict[str, list[Sample]], outputs: dict[str, list], fmt: str) -> dict:
    """Score documents' `categories` and `summary` from the generations of each setting."""
    categories = {}
    for setting, samples in prompts.items():
        entries, tokens = [], []
        for sample, gen in zip(samples, outputs[setting], strict=True):
            reward = multi_turn_reward(gen.text, sample.ground_truth, fmt=fmt)
            entries.append({"id": sample.id, "valid": reward.score == 1.0, "reason": reward.reason})
            tokens.append(gen.prompt_tokens)
        correct = sum(e["valid"] for e in entries)
        categories[setting] = {
            "accuracy": correct / len(entries),
            "correct": correct,
            "total": len(entries),
            "mean_input_tokens": sum(tokens) / len(tokens),
            "entries": entries,
        }
    single, multi = categories["single_turn"]["accuracy"], categories["multi_turn"]["accuracy"]
    all_tokens = [c["mean_input_tokens"] * c["total"] for c in categories.values()]
    summary = {
        "single_turn": single,
        "multi_turn": multi,
        "avg": (single + multi) / 2,
        "mean_input_tokens": sum(all_tokens) / sum(c["total"] for c in categories.values()),
    }
    return {"categories": categories, "summary": summary}


def run(
    *,
    samples: Sequence[str],
    exclude: Sequence[str],
    reserve_fraction: float,
    reserve_seed: int,
    per_setting: int,
    model: str,
    protocol: str | dict,
    seeds: Sequence[int],
    backend: str | None = None,
    threads: int = 1,
    log: Callable[[str], object] | None = print_line,
) -> list[dict]:
    """One score document per seed (prompts chosen and rendered once, sampled once per seed).

    samples, exclude: normalised sample parquets; protocol: the workflow's spec (a dict, or inline JSON /
    a file as `--protocol` takes it; an `id` key is kept); log: a progress line per (seed, setting).
    """
    import torch

    torch.set_num_threads(max(1, threads))
    from toolcall_repro.backends import load_backend
    from toolcall_repro.eval.acebench.runner import protocol_from_spec
    from toolcall_repro.provenance import model_sha256

    spec = dict(protocol) if isinstance(protocol, dict) else load_config_arg(protocol)
    protocol, protocol_id = protocol_from_spec(spec, seeds[0])
    pool = [s for p in samples for s in read_samples(p)]
    excluded = [s for p in exclude for s in read_samples(p)]
    prompts = select_prompts(pool, excluded, reserve_fraction, reserve_seed, per_setting)
    backend = load_backend(backend or protocol.backend, model, threads=threads)
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    texts = {
        k: [render(s.messages_list, s.tools_list, protocol, tokenizer) for s in v] for k, v in prompts.items()
    }
    prompt_record = {
        "reserve_fraction": reserve_fraction,
        "reserve_seed": reserve_seed,
        "per_setting": per_setting,
        "ids": {k: [s.id for s in v] for k, v in prompts.items()},
        "excluded_training_conversations": len({conversation_key(s) for s in excluded}),
    }
    model_record = {"path": str(model), "sha256": model_sha256(model)}
    docs = []
    total = len(seeds) * sum(len(chosen) for chosen in texts.values())
    progress = Progress(total, "held-out generation", log, unit="prompts", every=1)
    for seed in seeds:
        protocol, _ = protocol_from_spec(spec, seed)
        outputs = {}
        for setting, chosen in texts.items():
            groups = backend.generate(
                chosen, 1, temperature=protocol.temperature, top_p=protocol.top_p,
                max_tokens=protocol.max_tokens, seed=protocol.seed,
            )  # fmt: skip
            outputs[setting] = [g[0] for g in groups]
            progress.update(len(chosen), seed=seed, setting=setting)
        card = protocol_card(
            protocol, tokenizer, benchmark=BENCHMARK, protocol_id=protocol_id, model=model_record,
            prompts=prompt_record, aggregation=FORMULA,
        )  # fmt: skip
        docs.append({"card": card, **score_outputs(prompts, outputs, protocol.output_format)})
    return docs


def evaluate(
    *,
    seeds: Sequence[int],
    variance_seeds: Sequence[int] | None,
    seeds_out: str | Path,
    summary_out: str | Path,
    variance_out: str | Path,
    **run_args,
) -> None:
    """Sample every seed once (evaluation and variance seeds), then write seeds.json (one document per
    seed), summary.json (the evaluation seeds) and variance.json (the variance seeds, default: the same)."""
    evaluation, variance = list(seeds), list(variance_seeds or seeds)
    docs = run(seeds=list(dict.fromkeys([*evaluation, *variance])), **run_args)  # each seed sampled once
    by_seed = {d["card"]["seed"]: d for d in docs}
    atomic_write_json(seeds_out, docs)
    atomic_write_json(summary_out, summarise_seeds([by_seed[s] for s in evaluation]))
    atomic_write_json(variance_out, summarise_seeds([by_seed[s] for s in variance]))
    print(json.dumps({d["card"]["seed"]: d["summary"] for d in docs}))


def score_heldout(j) -> int | None:
    """The score_heldout job (toolcall_repro.job): one (model, protocol), every seed.

    config: {heldout: evaluate.heldout, reserve: {fraction, seed}, protocol: its spec (backend included),
    seeds: {eval, variance}, model: {tag, ...}}.
    """
    cfg = j.config
    try:
        evaluate(
            samples=j.paths("samples"),
            exclude=j.paths("exclude"),
            reserve_fraction=float(cfg["reserve"]["fraction"]),
            reserve_seed=int(cfg["reserve"]["seed"]),
            per_setting=int((cfg["heldout"] or {}).get("per_setting", 0)),
            model=j.path("model"),
            protocol=cfg["protocol"],
            seeds=cfg["seeds"]["eval"],
            variance_seeds=cfg["seeds"]["variance"],
            backend=cfg["protocol"]["backend"],
            threads=int(j.option("threads")),
            seeds_out=j.out("seeds"),
            summary_out=j.out("summary"),
            variance_out=j.out("variance"),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return None


