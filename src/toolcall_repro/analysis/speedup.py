"""Speedup at matched accuracy: the one definition every table and figure uses.

A run is a learning curve: held-out accuracy at checkpoints against cumulative (device) time.
The target accuracy is the baseline's peak held-out accuracy (PODS, arXiv 2504.13818: the time the
baseline needs to reach its peak, against the time the candidate needs to reach the same accuracy)
unless a target is configured. Each run's time to target is the first time the curve reaches it,
linearly interpolated between the two checkpoints that bracket it. The speedup of a candidate over a
baseline is baseline time / candidate time. A candidate that never reaches the target has no time
(None): "not reached", and no ratio is made from it.

With per-prompt outcomes at every checkpoint (`OutcomeCurve`) the estimate gets a bootstrap interval
over prompts and seeds (`peak_speedup`): the same resampled prompts for every run and checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from toolcall_repro.rl.metrics import predicted_speedup

__all__ = [
    "Curve",
    "SeedSpeedup",
    "Speedup",
    "OutcomeCurve",
    "PeakSpeedup",
    "matched_target",
    "peak_speedup",
    "speedup_at_matched_accuracy",
    "predicted_speedup",
    "speedup_over_seeds",
    "time_to_accuracy",
]


@dataclass(frozen=True)
class Curve:
    """Accuracy at checkpoints against cumulative time, sorted by time."""

    times: tuple[float, ...]
    accuracies: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.times) != len(self.accuracies):
            raise ValueError(f"{len(self.times)} times but {len(self.accuracies)} accuracies")
        if not self.times:
            raise ValueError("a curve needs at least one checkpoint")
        values = [*self.times, *self.accuracies]
        if any(not math.isfinite(v) for v in values):
            raise ValueError("a curve holds a NaN or infinite time or accuracy")
        if any(b < a for a, b in zip(self.times, self.times[1:], strict=False)):
            raise ValueError("curve times must not decrease")

    @classmethod
    def from_points(cls, times: Sequence[float], accuracies: Sequence[float]) -> Curve:
        """Build a curve from unsorted checkpoints (stable sort by time)."""
        order = sorted(range(len(times)), key=lambda i: float(times[i]))
        return cls(tuple(float(times[i]) for i in order), tuple(float(accuracies[i]) for i in order))

    @property
    def best(self) -> float:
        return max(self.accuracies)


def time_to_accuracy(curve: Curve, target: float) -> float | None:
    """First time the curve reaches `target`, interpolated between checkpoints; None if never."""
    t, a = curve.times, curve.accuracies
    for i, acc in enumerate(a):
        if acc >= target:
            if i == 0 or a[i - 1] >= target:
                return t[i]
            frac = (target - a[i - 1]) / (acc - a[i - 1])
            return t[i - 1] + frac * (t[i] - t[i - 1])
    return None


def matched_target(baseline: Curve, target: float | None = None) -> float:
    """The configured target, else the baseline's peak held-out accuracy (PODS: time to the baseline's peak).

    Never the lower of the two runs' bests: a weaker candidate would then set the bar for itself.
    """
    return float(target) if target is not None else baseline.best


def _ratio(baseline_time: float | None, candidate_time: float | None) -> float | None:
    # A candidate at the target at time 0 (initial checkpoint) has no finite speedup.
    if baseline_time is None or candidate_time is None or candidate_time <= 0:
        return None
    return baseline_time / candidate_time


@dataclass(frozen=True)
class Speedup:
    target: float
    baseline_time: float | None
    candidate_time: float | None
    ratio: float | None  # baseline_time / candidate_time; None when the candidate never reached the target

    @property
    def at_start(self) -> bool:
        """The target is met at the first checkpoint by both runs: training never beat the start."""
        return self.baseline_time == 0 and self.candidate_time == 0


def speedup_at_matched_accuracy(baseline: Curve, candidate: Curve, target: float | None = None) -> Speedup:
    """Time for the baseline to reach its peak over time for the candidate to reach the same accuracy."""
    tgt = matched_target(baseline, target)
    tb, tc = time_to_accuracy(baseline, tgt), time_to_accuracy(candidate, tgt)
    return Speedup(tgt, tb, tc, _ratio(tb, tc))


@dataclass(frozen=True)
class SeedSpeedup:
    """Speedup over paired seeds: one common target, a ratio per seed, and its spread."""

    target: float  # the configured target, else the mean over seeds of each baseline's peak
    per_seed: dict[int, Speedup]
    mean: float | None
    std: float | None  # sample std (ddof=1) over seeds with a ratio; None with fewer than two
    ci_low: float | None  # percentile bootstrap over seeds; None with fewer than two
    ci_high: float | None
    not_reached: list[int] = field(default_factory=list)  # seeds where either run missed the target


def speedup_over_seeds(
    baseline: Mapping[int, Curve],
    candidate: Mapping[int, Curve],
    target: float | None = None,
    *,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> SeedSpeedup:
    """Pair runs by seed; each pair's target is its baseline's peak unless a target is configured."""
    seeds = sorted(set(baseline) & set(candidate))
    unpaired = sorted(set(baseline) ^ set(candidate))
    if unpaired:
        raise ValueError(f"seeds {unpaired} have a run on one side only")
    if not seeds:
        raise ValueError("no seeds to compare")
    per_seed = {s: speedup_at_matched_accuracy(baseline[s], candidate[s], target) for s in seeds}
    tgt = float(np.mean([r.target for r in per_seed.values()]))
    ratios = np.array([r.ratio for r in per_seed.values() if r.ratio is not None], dtype=float)
    missed = [s for s, r in per_seed.items() if r.ratio is None]
    mean = float(ratios.mean()) if ratios.size else None
    std = float(ratios.std(ddof=1)) if ratios.size >= 2 else None
    lo = hi = None
    if ratios.size >= 2:
        rng = np.random.default_rng(seed)
        means = rng.choice(ratios, size=(n_bootstrap, ratios.size), replace=True).mean(axis=1)
        alpha = (1.0 - confidence) / 2
        lo, hi = (float(x) for x in np.quantile(means, [alpha, 1.0 - alpha]))
    return SeedSpeedup(tgt, per_seed, mean, std, lo, hi, missed)


# --- per-prompt outcomes: the same estimator with a bootstrap interval over prompts and seeds -------------
@dataclass(frozen=True)
class OutcomeCurve:
    """Per-prompt held-out outcomes at each checkpoint: `outcomes[c, i]` is prompt i's score at checkpoint c."""

    times: tuple[float, ...]
    outcomes: np.ndarray

    def __post_init__(self) -> None:
        o = np.asarray(self.outcomes, dtype=float)
        if o.ndim != 2 or o.shape[0] != len(self.times) or o.shape[1] == 0:
            raise ValueError(f"outcomes must be (checkpoints={len(self.times)}, prompts>0), got {o.shape}")
        object.__setattr__(self, "outcomes", o)
        Curve(tuple(self.times), tuple(o.mean(axis=1)))  # same checks as a curve

    def curve(self, prompts: np.ndarray | None = None) -> Curve:
        o = self.outcomes if prompts is None else self.outcomes[:, prompts]
        return Curve(tuple(self.times), tuple(float(a) for a in o.mean(axis=1)))


@dataclass(frozen=True)
class PeakSpeedup:
    """Time to reach the baseline's peak, over paired seeds, with a bootstrap interval.

    `ratio` = sum over seeds of the baseline's time to its peak / sum of the candidate's time to the
    same accuracy (each seed pair has its own target: its baseline's peak); None when the candidate
    misses the target in any seed ("not reached"). The interval resamples prompts (one draw for every run
    and checkpoint) and seed pairs; a resample in which the candidate misses counts as ratio 0, so
    `not_reached_share` of the resamples pull the low end down instead of vanishing from it.
    """

    per_seed: dict[int, Speedup]
    ratio: float | None
    ci_low: float
    ci_high: float
    not_reached_share: float
    confidence: float

    @property
    def not_reached(self) -> list[int]:
        return [s for s, r in self.per_seed.items() if r.candidate_time is None]

    @property
    def at_start(self) -> bool:
        return all(r.at_start for r in self.per_seed.values())


def _pooled_ratio(results: Sequence[Speedup]) -> float | None:
    if any(r.candidate_time is None or r.baseline_time is None for r in results):
        return None
    tb = sum(r.baseline_time for r in results)  # type: ignore[misc]
    tc = sum(r.candidate_time for r in results)  # type: ignore[misc]
    return tb / tc if tc > 0 else None


def seed_pairs(
    baseline: Mapping[int, OutcomeCurve],
    candidate: Mapping[int, OutcomeCurve],
    pairs: Sequence[tuple[int, int]] | None = None,
) -> tuple[list[tuple[int, int]], int]:
    """The (baseline seed, candidate seed) pairs to compare (same seeds when `pairs` is None) and the
    held-out prompt count they share; a seed without a run or runs on different held-out sets are errors."""
    if pairs is None:
        unpaired = sorted(set(baseline) ^ set(candidate))
        if unpaired:
            raise ValueError(f"seeds {unpaired} have a run on one side only")
        pairs = [(s, s) for s in sorted(baseline)]
    pairs = list(pairs)
    if not pairs:
        raise ValueError("no seed pairs to compare")
    missing = [p for p in pairs if p[0] not in baseline or p[1] not in candidate]
    if missing:
        raise ValueError(f"pairs {missing} name a seed without a run")
    widths = {c.outcomes.shape[1] for c in [*baseline.values(), *candidate.values()]}
    if len(widths) != 1:
        raise ValueError(f"runs were scored on different held-out sets (prompt counts {sorted(widths)})")
    return pairs, widths.pop()


def peak_speedup(
    baseline: Mapping[int, OutcomeCurve],
    candidate: Mapping[int, OutcomeCurve],
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PeakSpeedup:
    """PODS time-to-peak speedup of candidate over baseline, paired by seed (or by explicit `pairs`,
    e.g. vanilla seed s against vanilla seed s+1 for the estimator's noise floor)."""
    pairs, n_prompts = seed_pairs(baseline, candidate, pairs)
    per_seed = {b: speedup_at_matched_accuracy(baseline[b].curve(), candidate[c].curve()) for b, c in pairs}
    ratio = _pooled_ratio(list(per_seed.values()))
    rng = np.random.default_rng(seed)
    draws = np.empty(n_bootstrap)
    missed = 0
    for k in range(n_bootstrap):
        prompts = rng.integers(0, n_prompts, size=n_prompts)
        chosen = rng.integers(0, len(pairs), size=len(pairs))
        res = [
            speedup_at_matched_accuracy(
                baseline[pairs[j][0]].curve(prompts), candidate[pairs[j][1]].curve(prompts)
            )
            for j in chosen
        ]
        r = _pooled_ratio(res)
        if r is None:
            missed += 1
        draws[k] = 0.0 if r is None else r
    alpha = (1.0 - confidence) / 2
    lo, hi = (float(x) for x in np.quantile(draws, [alpha, 1.0 - alpha]))
    return PeakSpeedup(per_seed, ratio, lo, hi, missed / n_bootstrap, confidence)
