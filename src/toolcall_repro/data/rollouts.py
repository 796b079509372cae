"""Filter rollouts through the one generation-backend interface (transformers on CPU, vLLM on GPU).

Prompts are rendered with ``protocol.render`` under ``protocol.training_protocol`` (exactly as training
renders them) with the step's sampling knobs, and each rollout is scored with the reward of the
sample's own setting. The backend is passed in, so tests drive this with a scripted double.

A `ChunkStore` keeps every completed chunk on disk, so a job preempted or killed hours into its rollouts
continues after its last complete chunk when it is retried; each chunk's file is keyed by everything that
makes its rollouts (policy, prompts, sampling, seed), so a changed input never reuses an old chunk.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from toolcall_repro.data.schema import Sample
from toolcall_repro.io import atomic_write_json
from toolcall_repro.progress import Progress
from toolcall_repro.rewards import reward_for_setting


@dataclass(frozen=True)
class Rollouts:
    scores: tuple[float, ...]
    reasons: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: tuple[int, ...]


class ChunkStore:
    """Completed rollout chunks in `folder` (one JSON file each), for the run that `key` identifies."""

    def __init__(self, folder: str | Path, key: str) -> None:
        self.folder, self.key = Path(folder), key
        self.reused: list[int] = []

    def chunk_key(self, index: int, prompts: list[str], sampling: dict) -> str:
        doc = {"run": self.key, "index": index, "prompts": prompts, "sampling": sampling}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def _path(self, index: int) -> Path:
        return self.folder / f"chunk-{index:06d}.json"

    def load(self, index: int, chunk_key: str) -> dict[str, Rollouts] | None:
        try:
            doc = json.loads(self._path(index).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, or cut short by the kill: regenerated
        if doc.get("key") != chunk_key:
            return None
        self.reused.append(index)
        return {
            sid: Rollouts(
                scores=tuple(r["scores"]),
                reasons=tuple(r["reasons"]),
                prompt_tokens=r["prompt_tokens"],
                completion_tokens=tuple(r["completion_tokens"]),
            )
            for sid, r in doc["results"].items()
        }

    def save(self, index: int, chunk_key: str, results: dict[str, Rollouts]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        doc = {"key": chunk_key, "results": {sid: asdict(r) for sid, r in results.items()}}
        atomic_write_json(self._path(index), doc)  # a chunk file is complete or absent


def policy_fingerprint(model_dir: str | Path) -> list:
    """The policy's files by name, size and mtime: a retrained or replaced policy gets a new key, cheaply
    (hashing an 8B model's weights would take a minute per retry)."""
    root = Path(model_dir)
    if not root.is_dir():
        return [str(model_dir)]
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        st = path.stat()
        out.append([path.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns])
    return [os.path.abspath(root), out]


def chunk_seed(seed: int, chunk_index: int) -> int:
    """A distinct, reproducible seed per generate() call (kept below 2**31 for every backend)."""
    return (int(seed) * 1_000_003 + chunk_index) % (2**31 - 1)


def run_rollouts(
    samples: list[Sample],
    backend,
    render: Callable[[Sample], str],
    n: int,
    *,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
    batch_size: int = 16,
    store: ChunkStore | None = None,
    log: Callable[[str], object] | None = None,
    label: str = "rollouts",
) -> dict[str, Rollouts]:
    """n scored rollouts per sample, in fixed chunks so the same inputs and seed give the same calls;
    with a `store`, chunks it already holds are read back instead of generated. `log` gets a progress
    line (samples done, elapsed, estimate left) at most every `progress.EVERY_S` seconds, and the last."""
    results: dict[str, Rollouts] = {}
    progress = Progress(len(samples), label, log, unit="samples")
    for chunk_index, start in enumerate(range(0, len(samples), batch_size)):
        chunk = samples[start : start + batch_size]
        prompts = [render(s) for s in chunk]
        sampling = {
            "n": n,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "seed": seed,
        }
        key = (
            store.chunk_key(
                chunk_index, [f"{s.id}\n{p}" for s, p in zip(chunk, prompts, strict=True)], sampling
            )
            if store
            else ""
        )
        done = store.load(chunk_index, key) if store else None
        if done is not None and set(done) == {s.id for s in chunk}:
            results.update(done)
            progress.skip(len(chunk))  # read back: not in the pace of the chunks generated
            continue
        groups = backend.generate(
            prompts,
            n,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=chunk_seed(seed, chunk_index),
        )
        if len(groups) != len(chunk) or any(len(g) != n for g in groups):
            raise RuntimeError(
                f"backend returned {[len(g) for g in groups]} generations for {len(chunk)} x {n}"
            )
        scored_chunk = {}
        for sample, group in zip(chunk, groups, strict=True):
            reward = reward_for_setting(sample.setting)
            scored = [reward(g.text, sample.ground_truth_list) for g in group]
            scored_chunk[sample.id] = Rollouts(
                scores=tuple(r.score for r in scored),
                reasons=tuple(r.reason for r in scored),
                prompt_tokens=int(group[0].prompt_tokens),
                completion_tokens=tuple(int(g.completion_tokens) for g in group),
            )
        if store:
            store.save(chunk_index, key, scored_chunk)
        results.update(scored_chunk)
        progress.update(len(chunk))
    return results


def rollout_summary(results: dict[str, Rollouts]) -> dict:
    """What the rollouts looked like: reward reasons, correct-per-sample histogram, token means."""
    if not results:
        return {"samples": 0}
    reasons = Counter(r for v in results.values() for r in v.reasons)
    correct = Counter(sum(1 for s in v.scores if s > 0) for v in results.values())
    completions = [c for v in results.values() for c in v.completion_tokens]
    return {
        "samples": len(results),
        "reward_reasons": dict(sorted(reasons.items())),
        "correct_per_sample": {str(k): v for k, v in sorted(correct.items())},
        "mean_prompt_tokens": round(sum(v.prompt_tokens for v in results.values()) / len(results), 2),
        "mean_completion_tokens": round(sum(completions) / len(completions), 2),
    }


# --------------------------------------------------------------------------------------------------------
# production edge: the real backend, tokenizer and protocol
# --------------------------------------------------------------------------------------------------------
def make_protocol(config: dict, seed: int, backend_kind: str):
    """The protocol filter prompts are rendered with: training's, with this step's sampling knobs."""
    from toolcall_repro.protocol import TRAINING_KNOBS, training_protocol

    knobs = dict(config.get("protocol") or {})
    return training_protocol(
        **{k: knobs[k] for k in TRAINING_KNOBS if k in knobs},
        temperature=float(config["temperature"]),
        top_p=float(config["top_p"]),
        max_tokens=int(config["max_new_tokens"]),
        seed=int(seed),
        backend=backend_kind,
        enable_thinking=config.get("enable_thinking"),  # the policy's (model.enable_thinking), as training's
    )


def make_renderer(protocol, tokenizer) -> Callable[[Sample], str]:
    from toolcall_repro.protocol import render

    return lambda s: render(s.messages_list, s.tools_list, protocol, tokenizer)


def load_policy(kind: str, model_dir: str, threads: int):
    """(backend, tokenizer) for the filter policy; torch threads are set by the caller."""
    from transformers import AutoTokenizer

    from toolcall_repro.backends import load_backend

    kwargs = {"threads": threads} if kind == "transformers" else {}
    backend = load_backend(kind, model_dir, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    return backend, tokenizer
