"""Per-step training metrics: one dict a step, the same keys for the local and the verl engine.

Token counts (per step, all rows of the batch):
  perf/gen_tokens       response tokens generated (n rows per active prompt);
  perf/update_tokens    prompt + response tokens of the rows that go through the policy update
                        (all n rows in vanilla GRPO, m after down-sampling);
  perf/total_num_tokens prompt + response tokens of all generated rows (verl's definition).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from toolcall_repro.rl.advantage import GROUP_TYPES, as_rewards, group_type_fractions

TIMING_KEYS = (
    "timing_s/gen",
    "timing_s/update_actor",
    "timing_s/optimizer",
    "timing_s/step",
    "time/cumulative_s",
    "time/cumulative_device_s",
)
STEP_KEYS = (
    "step",
    "epoch",
    "group/all_correct_frac",
    "group/all_wrong_frac",
    "group/mixed_frac",
    "filter/skipped",
    "filter/active",
    "filter/coverage",
    "filter/probed",
    "filter/probe_still_correct",
    "filter/precision",
    "filter/all_correct_streak_ge_k",
    "filter/all_wrong_streak_ge_k",
    "perf/gen_tokens",
    "perf/update_tokens",
    "perf/total_num_tokens",
    "perf/update_rows",
    "perf/gen_rows",
    "perf/prompts",
    *TIMING_KEYS[:4],
    "reward/active_mean",
    "reward/full_mean",
    *TIMING_KEYS[4:],
)
TRANSITION_KEYS = tuple(f"transition/{a}_to_{b}" for a in GROUP_TYPES for b in GROUP_TYPES)
CURVE_KEYS = ("step", "epoch", "heldout_accuracy", "time/cumulative_s", "time/cumulative_device_s")


def full_set_reward(active_mean: float, coverage: float, skipped_mean: float | None) -> float | None:
    """Reward over the full set: skipped prompts count at their last observed mean reward.

    None when prompts are skipped but none has an observed reward (the full-set value is unknown).
    """
    if coverage >= 1.0:
        return active_mean
    if skipped_mean is None:
        return None
    return coverage * active_mean + (1.0 - coverage) * skipped_mean


def step_metrics(
    *,
    step: int,
    epoch: int,
    groups: Sequence[Sequence[float]],
    filter_stats: Mapping | None,
    skipped_reward_mean: float | None,
    gen_tokens: int,
    update_tokens: int,
    total_num_tokens: int,
    gen_rows: int,
    update_rows: int,
    timings: Mapping[str, float],
    cumulative_s: float,
    cumulative_device_s: float,
    correct: float = 1.0,
) -> dict:
    """Assemble one step's metrics line from the step's reward groups and the filter's stats.

    `timings` holds gen / update_actor / optimizer / step seconds. `filter_stats` is
    `StreakFilter.stats()` (None when no filter object exists: nothing skipped).
    """
    missing = {"gen", "update_actor", "optimizer", "step"} - set(timings)
    if missing:
        raise ValueError(f"timings lacks {sorted(missing)}")
    groups = [as_rewards(g) for g in groups]
    if not groups:
        raise ValueError("a step needs at least one group")
    fractions = group_type_fractions(groups, correct)
    active_mean = float(np.mean([g.mean() for g in groups]))
    fs = dict(filter_stats) if filter_stats is not None else {}
    coverage = float(fs.get("coverage", 1.0))
    if math.isnan(coverage):
        coverage = 1.0
    out = {
        "step": int(step),
        "epoch": int(epoch),
        "group/all_correct_frac": fractions["all_correct"],
        "group/all_wrong_frac": fractions["all_wrong"],
        "group/mixed_frac": fractions["mixed"],
        "filter/skipped": int(fs.get("skipped", 0)),
        "filter/active": int(fs.get("active", 0)),
        "filter/coverage": coverage,
        "filter/probed": int(fs.get("probed", 0)),
        "filter/probe_still_correct": int(fs.get("probe_still_correct", 0)),
        "filter/precision": fs.get("precision"),
        # prompts whose current streak is >= k (k = the filter's, 1 without a filter); all-wrong prompts are
        # tracked though never skipped unless all_wrong_k is set
        "filter/all_correct_streak_ge_k": int(fs.get("all_correct_streak_ge_k", 0)),
        "filter/all_wrong_streak_ge_k": int(fs.get("all_wrong_streak_ge_k", 0)),
        "perf/gen_tokens": int(gen_tokens),
        "perf/update_tokens": int(update_tokens),
        "perf/total_num_tokens": int(total_num_tokens),
        "perf/update_rows": int(update_rows),
        "perf/gen_rows": int(gen_rows),
        "perf/prompts": len(groups),
        "timing_s/gen": float(timings["gen"]),
        "timing_s/update_actor": float(timings["update_actor"]),
        "timing_s/optimizer": float(timings["optimizer"]),
        "timing_s/step": float(timings["step"]),
        "reward/active_mean": active_mean,
        "reward/full_mean": full_set_reward(active_mean, coverage, skipped_reward_mean),
        "time/cumulative_s": float(cumulative_s),
        "time/cumulative_device_s": float(cumulative_device_s),
    }
    transitions = fs.get("transitions") or {}
    for a in GROUP_TYPES:
        for b in GROUP_TYPES:
            out[f"transition/{a}_to_{b}"] = int(transitions.get(a, {}).get(b, 0))
    return out


def without_timings(metrics: Mapping) -> dict:
    """The metrics a fixed seed must reproduce exactly (timings removed, wall and CPU)."""
    return {k: v for k, v in metrics.items() if k not in TIMING_KEYS and not k.startswith("timing_cpu_s/")}


def predicted_speedup(filter_rate: float, update_share: float, m: int, n: int) -> float:
    """Predicted step-time speedup from measured f, u and kept fraction: 1 / ((1-f)(1-u) + (1-f) u m/n).

    f = fraction of prompts skipped, u = share of vanilla step time spent in the update,
    m/n = fraction of rollouts kept for the update (1 without down-sampling).
    A prediction, not a bound: it assumes generation time scales with the prompts generated for and
    update time with the rows kept; a run can beat it (skipped prompts longer than average, fewer
    optimizer calls, machine load) or miss it (fixed per-step costs).
    """
    if not 1 <= m <= n:
        raise ValueError(f"need 1 <= m <= n, got m={m}, n={n}")
    return predicted_step_ratio(filter_rate, update_share, m / n)


def predicted_step_ratio(filter_rate: float, update_share: float, kept: float, n_ratio: float = 1.0) -> float:
    """1 / (r ((1-f)(1-u) + (1-f) u kept)): `predicted_speedup` with the kept fraction as measured and
    r = the variant's n / the baseline's n (n = 16 with m = 8 generates twice n = 8's rollouts and
    back-propagates as many)."""
    if not (0.0 <= filter_rate < 1.0 and 0.0 <= update_share <= 1.0):
        raise ValueError(f"need 0 <= f < 1 and 0 <= u <= 1, got f={filter_rate}, u={update_share}")
    if not (0.0 < kept <= 1.0 and n_ratio > 0):
        raise ValueError(f"need 0 < kept <= 1 and n ratio > 0, got kept={kept}, n ratio={n_ratio}")
    keep = 1.0 - filter_rate
    return 1.0 / (n_ratio * (keep * (1.0 - update_share) + keep * update_share * kept))


def epoch_report(lines: Sequence[Mapping]) -> list[dict]:
    """Per epoch, from a run's step metrics: the group-type fractions over all groups generated in it
    (each step weighted by its groups, `perf/prompts`), the filter's counts (held on every step of the
    epoch: its last step's), active-set coverage, streak counts and the transitions from the previous epoch."""
    out: dict[int, dict] = {}
    for line in lines:
        e = int(line["epoch"])
        groups = float(line.get("perf/prompts", 1))
        rec = out.setdefault(e, {"epoch": e, "steps": 0, "groups": 0.0, **dict.fromkeys(GROUP_TYPES, 0.0)})
        rec["steps"] += 1
        rec["groups"] += groups
        for t in GROUP_TYPES:
            rec[t] += groups * float(line[f"group/{t}_frac"])
        for key in EPOCH_FILTER_KEYS:
            if key in line:
                rec[key.split("/", 1)[1]] = line[key]
        rec["transitions"] = {
            a: {b: int(line.get(f"transition/{a}_to_{b}", 0)) for b in GROUP_TYPES} for a in GROUP_TYPES
        }
    report = []
    for e in sorted(out):
        rec = out[e]
        total = rec["groups"]
        rec["groups"] = int(round(total))
        for t in GROUP_TYPES:
            rec[f"{t}_frac"] = rec.pop(t) / total if total else math.nan
        report.append(rec)
    return report


EPOCH_FILTER_KEYS = (
    "filter/skipped",
    "filter/active",
    "filter/coverage",
    "filter/probed",
    "filter/probe_still_correct",
    "filter/all_correct_streak_ge_k",
    "filter/all_wrong_streak_ge_k",
)
