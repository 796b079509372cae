"""Intervals and tests for held-out comparisons (pure functions: arrays in, numbers out).

Every interval here is over *prompts* (the held-out items) unless it says otherwise: a comparison of two
runs on the same held-out set is paired, prompt by prompt. Bootstrap draws come from a seeded numpy
Generator, so the same inputs and seed give the same interval.

Written by hand because the pieces are small and the pairing rule (the same resampled prompts for every
run, every checkpoint and every seed) is what matters; scipy.stats.bootstrap resamples each sample
apart unless told `paired=True` and does not know about checkpoints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = [
    "Interval",
    "GainNonInferiority",
    "NonInferiority",
    "bootstrap_indices",
    "gain_non_inferiority",
    "seed_prompt_difference",
    "non_inferiority",
    "paired_bootstrap",
    "wilson_interval",
]


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    confidence: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval of a proportion (filter precision from its probes); NaN with no trials.

    p~ = (x + z^2/2) / (n + z^2), half-width = z sqrt(x (n - x) / n + z^2 / 4) / (n + z^2).
    """
    if trials < 0 or not 0 <= successes <= max(trials, 0):
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return Interval(math.nan, math.nan, math.nan, confidence)
    z = _z(confidence)
    n, x = float(trials), float(successes)
    centre = (x + z * z / 2) / (n + z * z)
    half = z * math.sqrt(x * (n - x) / n + z * z / 4) / (n + z * z)
    return Interval(x / n, max(0.0, centre - half), min(1.0, centre + half), confidence)


def bootstrap_indices(n_items: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """(n_bootstrap, n_items) item indices drawn with replacement: one draw shared by every run compared."""
    if n_items < 1 or n_bootstrap < 1:
        raise ValueError(f"need n_items >= 1 and n_bootstrap >= 1, got {n_items}, {n_bootstrap}")
    return np.random.default_rng(seed).integers(0, n_items, size=(n_bootstrap, n_items))


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def paired_bootstrap(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    *,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Mean of candidate - baseline over prompts, with a percentile bootstrap interval over prompts.

    `baseline[i]` and `candidate[i]` are the same prompt's outcome (0/1, or a seed mean); both are
    resampled with the same indices, so prompt difficulty cancels.
    """
    a, b = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"need two equal-length, non-empty 1-D outcome arrays, got {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("outcomes must be finite")
    diff = b - a
    idx = bootstrap_indices(diff.size, n_bootstrap, seed)
    lo, hi = _percentiles(diff[idx].mean(axis=1), confidence)
    return Interval(float(diff.mean()), lo, hi, confidence)


@dataclass(frozen=True)
class NonInferiority:
    """Candidate final accuracy vs baseline's at margin delta: non-inferior when the interval's low end > -delta."""

    difference: Interval  # candidate - baseline
    margin: float
    non_inferior: bool


def non_inferiority(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    margin: float,
    *,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> NonInferiority:
    """Paired non-inferiority over prompts: H0 "candidate is worse by at least `margin`" is rejected
    when the lower end of the (two-sided `confidence`) paired bootstrap interval lies above -margin."""
    if not margin >= 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    diff = paired_bootstrap(baseline, candidate, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)
    return NonInferiority(diff, float(margin), diff.low > -float(margin))


# --- over seed pairs and prompts together (the efficiency evidence's second pre-registration) ----------


@dataclass(frozen=True)
class GainNonInferiority:
    """Final accuracy candidate - baseline over seed pairs and prompts, against a margin tied to the effect.

    `difference`: mean over pairs of the candidate's final accuracy minus its baseline's; `gain`: the
    baselines' final - start; `margin`: `of_gain` x gain (or the fixed margin); non-inferior when the
    lower end of the interval of difference + margin (one bootstrap draw for all) lies above 0.
    """

    difference: Interval
    gain: Interval
    margin: float
    of_gain: float | None  # None: a fixed margin
    non_inferior: bool


def _seed_prompt_draws(arrays: Sequence[np.ndarray], n_bootstrap: int, seed: int) -> list[np.ndarray]:
    """Bootstrap means of (pairs, prompts) arrays, one draw of pairs and of prompts shared by all."""
    pairs, prompts = arrays[0].shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, pairs, size=(n_bootstrap, pairs))
    cols = rng.integers(0, prompts, size=(n_bootstrap, prompts))
    return [a[rows[:, :, None], cols[:, None, :]].mean(axis=(1, 2)) for a in arrays]


def seed_prompt_difference(
    before: np.ndarray, after: np.ndarray, *, n_bootstrap: int = 2000, seed: int = 0, confidence: float = 0.95
) -> Interval:
    """Mean of after - before over (runs, prompts) arrays, with a percentile bootstrap over runs and prompts
    together (a run's gain over its training, with the seeds' variance in the interval)."""
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if a.shape != b.shape or a.ndim != 2 or 0 in a.shape:
        raise ValueError(f"need two (runs, prompts) arrays of one shape, got {a.shape} and {b.shape}")
    (draws,) = _seed_prompt_draws([b - a], n_bootstrap, seed)
    return Interval(float((b - a).mean()), *_percentiles(draws, confidence), confidence)


def gain_non_inferiority(
    start: np.ndarray,
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    of_gain: float | None = 0.25,
    margin: float | None = None,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> GainNonInferiority:
    """Non-inferiority of the candidates' final accuracy over seed pairs and prompts together.

    `start`, `baseline`, `candidate`: (pairs, prompts) per-prompt outcomes: the baseline's first
    checkpoint, its final one, and the paired candidate's final one (row j of each is seed pair j). The
    percentile bootstrap resamples seed pairs and prompts (the same draw for all three), so the seeds'
    variance is in the interval. The margin is `of_gain` x the baselines' gain, recomputed in every
    resample (so "non-inferior" reads: keeps at least 1 - of_gain of the baseline's gain), or a fixed
    `margin` when `of_gain` is None.
    """
    arrays = [np.asarray(a, dtype=float) for a in (start, baseline, candidate)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 2 or 0 in arrays[0].shape:
        raise ValueError(f"need three (pairs, prompts) arrays of one shape, got {[a.shape for a in arrays]}")
    if (of_gain is None) == (margin is None):
        raise ValueError(f"give exactly one of of_gain and margin, got of_gain={of_gain}, margin={margin}")
    bound = of_gain if of_gain is not None else margin
    if not 0 <= bound <= 1:  # type: ignore[operator]
        raise ValueError(f"{'of_gain' if of_gain is not None else 'margin'} must be in [0, 1], got {bound}")
    s, b, c = arrays
    d_draws, g_draws = _seed_prompt_draws([c - b, b - s], n_bootstrap, seed)
    diff, gain = float((c - b).mean()), float((b - s).mean())
    m_draws = of_gain * g_draws if of_gain is not None else np.full(n_bootstrap, float(margin))  # type: ignore[arg-type]
    low_stat = _percentiles(d_draws + m_draws, confidence)[0]
    return GainNonInferiority(
        difference=Interval(diff, *_percentiles(d_draws, confidence), confidence),
        gain=Interval(gain, *_percentiles(g_draws, confidence), confidence),
        margin=of_gain * gain if of_gain is not None else float(margin),  # type: ignore[arg-type]
        of_gain=of_gain,
        non_inferior=bool(low_stat > 0),
    )
