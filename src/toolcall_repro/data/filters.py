"""The paper's filter chains (section 4), as pure steps over samples: data in, data out.

Single-turn (xLAM + ToolACE pooled): drop exact duplicates; 2 rollouts per sample from the filter policy;
drop the sample when both are right or both wrong (it teaches GRPO nothing at that policy); carve the
held-out split; sample to the target size.

Multi-turn (LoopTool): keep samples with ``min_turns <= turns <= max_turns``; drop samples whose answer
needs several calls in one output; 8 rollouts from a stronger model, keep when at least ``min_correct``
are right; carve the held-out split; sample to the target size. The cheap rules run before the rollouts
(each rule looks at one sample only, so the order does not change which samples survive).

How a turn is counted. ``num_turns`` is the number of *user requests* in the history up to and including
the one being answered; tool results are ``tool`` messages and never count. The paper's "2-6 turns" does
not say which count it used: LoopTool's raw ``input`` writes each tool result as a *user* chat block, and
its card counts *tool calls in the history*. ``TURN_DEFINITIONS`` computes all three, the report records
how many samples each puts in range, and ``turn_definition`` in config picks the one that filters.

Every step is logged with its in/out counts and, for each dropped sample, the reason.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from toolcall_repro.data.rollouts import rollout_summary
from toolcall_repro.data.schema import Sample
from toolcall_repro.data.split import conversation_key, is_reserved, partition

# Where a chain's held-out split and its training candidates come from (filter.<setting>.heldout_from /
# train_from). survivors / all: the held-out split is carved from reserved survivors of the rollout filter
# and GRPO trains on every other survivor, seen by the warm start or not. reserve: the held-out split is a
# seeded draw of reserved samples *before* the rollouts (unfiltered: it measures the policy on the
# distribution, not on what one policy found mixed), and / or GRPO's candidates are reserved conversations
# only (prompts the warm start never saw, so what GRPO teaches has to generalise to show on held-out).
HELDOUT_FROM = ("survivors", "reserve")
TRAIN_FROM = ("all", "reserve")


# --------------------------------------------------------------------------------------------------------
# turn counting
# --------------------------------------------------------------------------------------------------------
def _user_requests(messages: list[dict]) -> int:
    return sum(1 for m in messages if m["role"] == "user")


def _user_blocks(messages: list[dict]) -> int:
    """User chat blocks as LoopTool's raw `input` writes them: consecutive tool results share one block."""
    count, previous = 0, None
    for m in messages:
        if m["role"] == "user" or (m["role"] == "tool" and previous != "tool"):
            count += 1
        previous = m["role"]
    return count


def _history_calls(messages: list[dict]) -> int:
    return sum(len(m.get("tool_calls", [])) for m in messages if m["role"] == "assistant")


TURN_DEFINITIONS: dict[str, Callable[[list[dict]], int]] = {
    "user_requests": _user_requests,
    "user_blocks_incl_tool_results": _user_blocks,
    "history_tool_calls": _history_calls,
}


def turn_count(sample: Sample, definition: str = "user_requests") -> int:
    if definition not in TURN_DEFINITIONS:
        raise ValueError(
            f"unknown turn definition {definition!r}; expected one of {sorted(TURN_DEFINITIONS)}"
        )
    return TURN_DEFINITIONS[definition](sample.messages_list)


def turn_count_table(samples: list[Sample], min_turns: int, max_turns: int) -> dict:
    """For each definition: the histogram and how many samples it puts in [min_turns, max_turns]."""
    table = {}
    for name, count in TURN_DEFINITIONS.items():
        hist = Counter(count(s.messages_list) for s in samples)
        table[name] = {
            "in_range": sum(v for k, v in hist.items() if min_turns <= k <= max_turns),
            "histogram": {str(k): v for k, v in sorted(hist.items())},
        }
    return table


# --------------------------------------------------------------------------------------------------------
# per-sample rules: each returns the drop reason, or None to keep
# --------------------------------------------------------------------------------------------------------
def mixed_rollouts_rule(scores: list[float]) -> str | None:
    """Single-turn: keep only samples where the policy is sometimes right and sometimes wrong."""
    correct = sum(1 for s in scores if s > 0)
    if correct == len(scores):
        return "all_correct"
    if correct == 0:
        return "all_wrong"
    return None


def not_all_correct_rule(scores: list[float]) -> str | None:
    """Single-turn, `keep: not_all_correct`: drop only what the policy always solves (nothing to learn)."""
    return "all_correct" if all(s > 0 for s in scores) else None


# filter.single_turn.keep: which rollout outcomes a single-turn sample survives with
SINGLE_TURN_KEEP: dict[str, Callable[[list[float]], str | None]] = {
    "mixed": mixed_rollouts_rule,  # the paper's: sometimes right, sometimes wrong
    # a policy that solves almost nothing yet (the CPU toy of the paper config, .test/paper-cpu.yaml):
    # the mixed rule would keep a handful of prompts, this keeps the ones it fails too
    "not_all_correct": not_all_correct_rule,
}


def min_correct_rule(scores: list[float], min_correct: int) -> str | None:
    """Multi-turn: keep samples the stronger model can solve at least ``min_correct`` times."""
    return None if sum(1 for s in scores if s > 0) >= min_correct else "too_few_correct"


def turn_range_rule(sample: Sample, min_turns: int, max_turns: int, definition: str) -> str | None:
    n = turn_count(sample, definition)
    if n < min_turns:
        return "too_few_turns"
    if n > max_turns:
        return "too_many_turns"
    return None


def single_call_rule(sample: Sample) -> str | None:
    """Drop labels with several calls in one output (the paper's multi-turn rule)."""
    return "several_calls_in_answer" if len(sample.ground_truth_list) > 1 else None


# --------------------------------------------------------------------------------------------------------
# the chain: applies steps and keeps the books
# --------------------------------------------------------------------------------------------------------
@dataclass
class Chain:
    samples: list[Sample]
    steps: list[dict] = field(default_factory=list)
    drops: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.steps.append({"step": "input", "in": len(self.samples), "out": len(self.samples), "dropped": {}})

    def apply(self, step: str, rule: Callable[[Sample], str | None], note: str = "") -> None:
        kept, reasons = [], Counter()
        for s in self.samples:
            reason = rule(s)
            if reason is None:
                kept.append(s)
            else:
                reasons[reason] += 1
                self.drops.append({"id": s.id, "step": step, "reason": reason})
        self._log(step, len(self.samples), kept, reasons, note)
        self.samples = kept

    def split(self, step: str, taken: list[Sample], reason: str, note: str = "") -> None:
        """Move ``taken`` out of the chain (held-out split, target-size sampling), recording why."""
        taken_ids = {s.id for s in taken}
        kept = [s for s in self.samples if s.id not in taken_ids]
        self.drops.extend({"id": s.id, "step": step, "reason": reason} for s in taken)
        self._log(step, len(self.samples), kept, Counter({reason: len(taken)}) if taken else Counter(), note)
        self.samples = kept

    def _log(self, step: str, n_in: int, kept: list[Sample], reasons: Counter, note: str) -> None:
        entry = {"step": step, "in": n_in, "out": len(kept), "dropped": dict(sorted(reasons.items()))}
        if note:
            entry["note"] = note
        self.steps.append(entry)


def duplicate_rule() -> Callable[[Sample], str | None]:
    """Exact duplicates (same tools, history and answer) would leak across the held-out split."""
    seen: set[tuple[str, str, str]] = set()

    def rule(s: Sample) -> str | None:
        key = (s.tools, s.messages, s.ground_truth)
        if key in seen:
            return "duplicate"
        seen.add(key)
        return None

    return rule


def choose(samples: list[Sample], k: int, seed: int, salt: str) -> list[Sample]:
    """k samples drawn without replacement, returned in input order; same (ids, k, seed, salt) -> same."""
    k = max(0, min(k, len(samples)))
    rng = random.Random(f"{salt}:{seed}")
    picked = set(rng.sample(range(len(samples)), k))
    return [s for i, s in enumerate(samples) if i in picked]


def heldout_count(n: int, config: dict) -> int:
    if config.get("heldout_size") is not None:
        return min(int(config["heldout_size"]), n)
    return min(n, round(float(config.get("heldout_fraction", 0.0)) * n))


def _reserve_fraction(config: dict, key: str) -> float:
    fraction = float(config.get("reserve_fraction", 0.0))
    if fraction <= 0:
        raise ValueError(f"{key}: reserve needs reserve_fraction > 0, got {fraction}")
    return fraction


def _choice(config: dict, key: str, allowed: tuple[str, ...]) -> str:
    value = config.get(key, allowed[0])
    if value not in allowed:
        raise ValueError(f"{key}: {value!r} is not one of {list(allowed)}")
    return value


def reserve_heldout(chain: Chain, config: dict, seed: int, setting: str) -> list[Sample]:
    """``heldout_from: reserve``: the held-out split drawn from reserved samples before any rollout.

    Its size is ``heldout_size`` (else ``heldout_fraction`` of the samples in the chain), capped by the
    reserve (the note says when it falls short). Every other sample of a held-out conversation leaves the
    chain too (``shares_heldout_conversation``): a ToolACE or LoopTool prefix of it holds a held-out
    answer in its history, so training on it would leak that answer.
    """
    fraction = _reserve_fraction(config, "heldout_from")
    count = heldout_count(len(chain.samples), config)
    _, reserved = partition(chain.samples, fraction, seed)
    note = f"drawn from {len(reserved)} reserved samples before the rollouts (reserve_fraction {fraction})"
    if len(reserved) < count:
        note += f"; {count} wanted"
    heldout = choose(reserved, count, seed, f"heldout:{setting}")
    chain.split("heldout_split", heldout, "heldout", note=note)
    keys = {conversation_key(s) for s in heldout}
    chain.apply(
        "heldout_conversations",
        lambda s: "shares_heldout_conversation" if conversation_key(s) in keys else None,
    )
    return heldout


def _candidates(chain: Chain, config: dict, seed: int, setting: str) -> list[Sample] | None:
    """The split steps before the rollouts: the reserve held-out split and the training side, if asked."""
    heldout = None
    if _choice(config, "heldout_from", HELDOUT_FROM) == "reserve":
        heldout = reserve_heldout(chain, config, seed, setting)
    if _choice(config, "train_from", TRAIN_FROM) == "reserve":
        fraction = _reserve_fraction(config, "train_from")
        chain.apply(
            "train_from_reserve",
            lambda s: None if is_reserved(s, fraction, seed) else "seen_by_warm_start",
            note="GRPO candidates only from conversations the warm start never saw",
        )
    return heldout


def finish(
    chain: Chain, config: dict, seed: int, setting: str, heldout: list[Sample] | None = None
) -> tuple[list[Sample], list[Sample]]:
    """Carve the held-out split from what survived the filters, then sample the rest to the target size.

    With ``reserve_fraction`` > 0 the held-out split is drawn only from reserved survivors
    (`data.split`: never seen by the tiny model's warm start); its size is still a fraction of all
    survivors, capped by how many reserved survivors there are (the note says when it falls short).
    A ``heldout`` already carved before the rollouts (`reserve_heldout`) is kept as it is.
    """
    if heldout is not None:
        return _to_target(chain, config, seed, setting), heldout
    count = heldout_count(len(chain.samples), config)
    fraction = float(config.get("reserve_fraction", 0.0))
    if fraction > 0:
        _, candidates = partition(chain.samples, fraction, seed)
        note = f"drawn from {len(candidates)} reserved survivors (reserve_fraction {fraction})"
        if len(candidates) < count:
            note += f"; {count} wanted"
    else:
        candidates, note = chain.samples, "drawn from all survivors (no reserve)"
    heldout = choose(candidates, count, seed, f"heldout:{setting}")
    chain.split("heldout_split", heldout, "heldout", note=f"{note}; carved before target-size sampling")
    return _to_target(chain, config, seed, setting), heldout


def _to_target(chain: Chain, config: dict, seed: int, setting: str) -> list[Sample]:
    target = config.get("target_size")
    if target is not None and len(chain.samples) > int(target):
        keep = choose(chain.samples, int(target), seed, f"target:{setting}")
        keep_ids = {s.id for s in keep}
        chain.split("target_size", [s for s in chain.samples if s.id not in keep_ids], "over_target")
    else:
        chain.split("target_size", [], "over_target", note=f"target {target} not reached" if target else "")
    return chain.samples


def source_counts(samples: Iterable[Sample]) -> dict[str, int]:
    return dict(sorted(Counter(s.source for s in samples).items()))


def format_subsets(
    single: list[Sample], multi: list[Sample], size: int, seed: int
) -> tuple[list, list, dict]:
    """The training-data-format study's matched pair: the same number of single- and multi-turn samples."""
    n = min(int(size), len(single), len(multi))
    a = choose(single, n, seed, "format:single_turn")
    b = choose(multi, n, seed, "format:multi_turn")
    report = {
        "requested": int(size),
        "size": n,
        "reached": n == int(size),
        "single_turn": {"available": len(single), "sources": source_counts(a), "mean_turns": _mean_turns(a)},
        "multi_turn": {"available": len(multi), "sources": source_counts(b), "mean_turns": _mean_turns(b)},
    }
    return a, b, report


def _mean_turns(samples: list[Sample]) -> float | None:
    return round(sum(s.num_turns for s in samples) / len(samples), 3) if samples else None


def ids_digest(samples: list[Sample]) -> str:
    return hashlib.sha256(json.dumps([s.id for s in samples]).encode()).hexdigest()


# --------------------------------------------------------------------------------------------------------
# the two chains; `score` runs the rollouts (injected: the real backend in production, a double in tests)
# --------------------------------------------------------------------------------------------------------
ScoreFn = Callable[[list[Sample]], dict]  # samples -> {id: Rollouts}
LengthFn = Callable[[Sample], int]  # sample -> rendered prompt tokens


def _length_step(chain: Chain, config: dict, prompt_tokens: LengthFn | None) -> None:
    limit = config.get("max_prompt_tokens")
    if limit is not None and prompt_tokens is not None:
        chain.apply("prompt_length", lambda s: "prompt_too_long" if prompt_tokens(s) > int(limit) else None)


def _rollout_step(chain: Chain, step: str, score: ScoreFn, rule: Callable[[list[float]], str | None]) -> dict:
    results = score(chain.samples)
    chain.apply(step, lambda s: rule(list(results[s.id].scores)))
    return results


def filter_single_turn(
    samples: list[Sample], config: dict, seed: int, score: ScoreFn, prompt_tokens: LengthFn | None = None
) -> tuple[list[Sample], list[Sample], dict]:
    chain = Chain(list(samples))
    if config.get("dedupe", True):
        chain.apply("dedupe", duplicate_rule())
    _length_step(chain, config, prompt_tokens)
    heldout = _candidates(chain, config, seed, "single_turn")
    keep = _choice(config, "keep", tuple(SINGLE_TURN_KEEP))
    results = _rollout_step(chain, f"rollouts_{keep}", score, SINGLE_TURN_KEEP[keep])
    train, heldout = finish(chain, config, seed, "single_turn", heldout)
    return train, heldout, _report("single_turn", samples, chain, results, train, heldout, config)


def filter_multi_turn(
    samples: list[Sample], config: dict, seed: int, score: ScoreFn, prompt_tokens: LengthFn | None = None
) -> tuple[list[Sample], list[Sample], dict]:
    lo, hi = int(config["min_turns"]), int(config["max_turns"])
    definition = config.get("turn_definition", "user_requests")
    chain = Chain(list(samples))
    turns = turn_count_table(chain.samples, lo, hi)
    if config.get("dedupe", True):
        chain.apply("dedupe", duplicate_rule())
    chain.apply(
        "turn_range", lambda s: turn_range_rule(s, lo, hi, definition), note=f"{lo}-{hi} {definition}"
    )
    if config.get("drop_parallel", True):
        chain.apply("single_call_answer", single_call_rule)
    _length_step(chain, config, prompt_tokens)
    heldout = _candidates(chain, config, seed, "multi_turn")
    min_correct = int(config.get("min_correct", 1))
    results = _rollout_step(
        chain, "rollouts_min_correct", score, lambda sc: min_correct_rule(sc, min_correct)
    )
    train, heldout = finish(chain, config, seed, "multi_turn", heldout)
    report = _report("multi_turn", samples, chain, results, train, heldout, config)
    report["turn_counting"] = {"definition": definition, "range": [lo, hi], "definitions": turns}
    return train, heldout, report


def _calls_histogram(samples: list[Sample]) -> dict[str, int]:
    """Labelled calls per sample (0 = a plain-text answer)."""
    return {str(k): v for k, v in sorted(Counter(len(s.ground_truth_list) for s in samples).items())}


def _report(setting, samples, chain, results, train, heldout, config) -> dict:
    return {
        "setting": setting,
        "input": {"samples": len(samples), "sources": source_counts(samples)},
        "steps": chain.steps,
        "rollouts": rollout_summary(results),
        "heldout": {
            "size": len(heldout),
            "reserve_fraction": float(config.get("reserve_fraction", 0.0)),
            "from": config.get("heldout_from", HELDOUT_FROM[0]),
            "sources": source_counts(heldout),
            "ids_sha256": ids_digest(heldout),
        },
        "train": {
            "size": len(train),
            "target": config.get("target_size"),
            "reached": config.get("target_size") is None or len(train) == int(config["target_size"]),
            "from": config.get("train_from", TRAIN_FROM[0]),
            "sources": source_counts(train),
            "ground_truth_calls": _calls_histogram(train),
            "ids_sha256": ids_digest(train),
            # the filter policy's correct rollouts on each training sample: with GRPO's first-epoch
            # groups it says how a stricter keep rule (min_correct) would shift the RL start's regime
            "filter_correct": {s.id: sum(1 for x in results[s.id].scores if x > 0) for s in train if s.id in results},
        },
        "drops": chain.drops,
    }


def pool_samples(samples: list[Sample], config: dict, seed: int) -> tuple[list[Sample], list[Sample], dict]:
    """Unfiltered pool with a held-out split (the filter policy's own training data)."""
    chain = Chain(list(samples))
    if config.get("dedupe", True):
        chain.apply("dedupe", duplicate_rule())
    train, heldout = finish(chain, {k: v for k, v in config.items() if k != "target_size"}, seed, "pool")
    return train, heldout, _report("pool", samples, chain, {}, train, heldout, config)
