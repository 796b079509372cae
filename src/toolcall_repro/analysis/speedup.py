"""Speedup at matched accuracy: the one definition every table and figure uses.

A run is a learning curve: held-out accuracy at checkpoints against cumulative (device) time.
The target accuracy is the lowest of the compared runs' best accuracies (so the slower run reaches it
at its best) unless a target is configured. Each run's time to target is the first time the curve
reaches it, linearly interpolated between the two checkpoints that bracket it. The speedup of a
candidate over a baseline is baseline time / candidate time. A run that never reaches the target has
no time (None), and no ratio is made from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from toolcall_repro.rl.metrics import speedup_limit

__all__ = [
    "Curve",
    "SeedSpeedup",
    "Speedup",
    "matched_target",
    "speedup_at_matched_accuracy",
    "speedup_limit",
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


def matched_target(curves: Sequence[Curve], target: float | None = None) -> float:
    """The configured target, else the lowest best accuracy among the curves."""
    if target is not None:
        return float(target)
    if not curves:
        raise ValueError("no curves to match")
    return min(c.best for c in curves)


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
    ratio: float | None  # baseline_time / candidate_time; None when either never reached the target


def speedup_at_matched_accuracy(baseline: Curve, candidate: Curve, target: float | None = None) -> Speedup:
    tgt = matched_target([baseline, candidate], target)
    tb, tc = time_to_accuracy(baseline, tgt), time_to_accuracy(candidate, tgt)
    return Speedup(tgt, tb, tc, _ratio(tb, tc))


@dataclass(frozen=True)
class SeedSpeedup:
    """Speedup over paired seeds: one common target, a ratio per seed, and its spread."""

    target: float
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
    """Pair runs by seed; the target is common to all runs (lowest best accuracy unless configured)."""
    seeds = sorted(set(baseline) & set(candidate))
    unpaired = sorted(set(baseline) ^ set(candidate))
    if unpaired:
        raise ValueError(f"seeds {unpaired} have a run on one side only")
    if not seeds:
        raise ValueError("no seeds to compare")
    tgt = matched_target([*(baseline[s] for s in seeds), *(candidate[s] for s in seeds)], target)
    per_seed = {s: speedup_at_matched_accuracy(baseline[s], candidate[s], tgt) for s in seeds}
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
