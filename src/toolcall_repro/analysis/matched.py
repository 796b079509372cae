"""Time to matched accuracy on monotone curves: the estimator pre-registered for the efficiency evidence.

PODS's time to vanilla's peak (`speedup.peak_speedup`) hinges on one checkpoint's draw: the peak of a
still-rising curve. This one does not:
1. each run's held-out accuracy curve is made monotone (non-decreasing in time) by isotonic regression,
   each checkpoint weighted by the number of held-out prompts scored there;
2. target = a0 + fraction * (F - a0): a0 the pooled accuracy at the first checkpoint and F the pooled
   final value of the monotone curves, pooled (mean) over the baseline runs of the seed pairs;
3. each run's time = the first time its monotone curve reaches the target, linearly interpolated between
   the two checkpoints that bracket it (`speedup.time_to_accuracy`); None when it never gets there;
4. speedup = the baseline's time / the candidate's time, pooled over seed pairs as PODS's is
   (sum of baseline times / sum of candidate times);
5. a run that never reaches the target is *censored* at its budget: its time is its last checkpoint's
   (the compute it was given), flagged. A censored candidate's true time is later, so a pooled ratio with
   one is an upper bound; a censored baseline's, a lower bound. Pre-registered for the equal-compute
   evidence (docs/efficiency.md): the candidate is given the baseline's compute, so a censored candidate
   counts as no faster than the baseline it failed to match, not as 0x (the first evidence run's rule,
   which put an interval's low end at 0 whenever a third of the resamples missed);
6. a percentile bootstrap resamples held-out prompts (one draw for every run and checkpoint) and seed
   pairs, and recomputes 1-5, the target included; the share of resamples with a censored run is
   reported, and a resample whose baselines gain nothing (no accuracy to match) is left out and counted.

A fraction below 1 is what lets every run have a time: at 1 about half of the baseline runs would miss
their own pooled final accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# scikit-learn arrives with the eval extra (lm-eval, sentence-transformers: requirements/main.lock).
from sklearn.isotonic import isotonic_regression

from toolcall_repro.analysis.speedup import Curve, OutcomeCurve, seed_pairs, time_to_accuracy

__all__ = [
    "FLOOR_BOUND",
    "FLOOR_NEAR",
    "MATCHED_FRACTION",
    "MatchedSpeedup",
    "PairTimes",
    "floor_supports_claim",
    "gain_target",
    "matched_speedup",
    "monotone_curve",
    "noise_floor_pairs",
]

# Pre-registered (docs/efficiency.md, "Pre-registration"): the share of vanilla's pooled final gain that
# counts as matched accuracy, and how close to 1x a noise floor must be for its estimator to carry a claim
# (1.5: the low end a "reproduced" speedup's interval must clear; a floor past it is noise on that scale),
# and how far its interval may reach (2: an interval reaching past 2x or below 0.5x is too wide to tell two
# runs of one method apart, so the estimator cannot speak; the second pre-registration's addition).
MATCHED_FRACTION = 0.8
FLOOR_NEAR = 1.5
FLOOR_BOUND = 2.0


def monotone_curve(curve: Curve, weights: Sequence[float] | None = None) -> Curve:
    """The non-decreasing curve closest to `curve` in weighted least squares (isotonic regression).

    `weights[i]` is the number of held-out prompts scored at checkpoint i (equal weights when None).
    """
    w = np.ones(len(curve.times)) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (len(curve.times),) or not np.all(w > 0):
        raise ValueError(f"need one positive weight per checkpoint ({len(curve.times)}), got {list(w)}")
    fitted = isotonic_regression(np.asarray(curve.accuracies, dtype=float), sample_weight=w, increasing=True)
    return Curve(curve.times, tuple(float(a) for a in fitted))


def gain_target(baselines: Sequence[Curve], fraction: float = MATCHED_FRACTION) -> tuple[float, float, float]:
    """(target, a0, gain): a0 = mean first-checkpoint accuracy of the raw curves, gain = mean final value
    of their monotone fits - a0, target = a0 + fraction * gain. `baselines` are raw curves."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if not baselines:
        raise ValueError("no baseline curves")
    a0 = float(np.mean([c.accuracies[0] for c in baselines]))
    final = float(np.mean([monotone_curve(c).accuracies[-1] for c in baselines]))
    return a0 + fraction * (final - a0), a0, final - a0


@dataclass(frozen=True)
class PairTimes:
    """The two runs' times to the target; a censored time is the run's budget (it never got there)."""

    baseline_time: float
    candidate_time: float
    baseline_censored: bool = False
    candidate_censored: bool = False

    @property
    def censored(self) -> bool:
        return self.baseline_censored or self.candidate_censored

    @property
    def ratio(self) -> float | None:
        return self.baseline_time / self.candidate_time if self.candidate_time > 0 else None


@dataclass(frozen=True)
class MatchedSpeedup:
    """Time to `fraction` of vanilla's pooled gain, over seed pairs, with a bootstrap interval.

    `ratio` is None only when the baselines gained nothing (`gain` <= 0: no accuracy to match) or the
    candidates are at the target from their first checkpoint; with a censored run it is a bound
    (`censored` names the pairs). `censored_share`: the resamples with a censored run; `no_gain_share`:
    the resamples left out because their baselines gained nothing.
    """

    fraction: float
    target: float
    start: float
    gain: float
    per_pair: dict[tuple[int, int], PairTimes]
    ratio: float | None
    ci_low: float
    ci_high: float
    censored_share: float
    no_gain_share: float
    confidence: float

    @property
    def censored(self) -> list[tuple[int, int]]:
        return [p for p, t in self.per_pair.items() if t.censored]

    @property
    def candidate_censored(self) -> list[tuple[int, int]]:
        return [p for p, t in self.per_pair.items() if t.candidate_censored]

    @property
    def no_gain(self) -> bool:
        return not self.gain > 0 or (self.ratio is None and not self.per_pair)


def _time(curve: Curve, target: float) -> tuple[float, bool]:
    """(time to the target, censored): a run that never gets there is censored at its last checkpoint."""
    t = time_to_accuracy(curve, target)
    return (curve.times[-1], True) if t is None else (t, False)


def _pooled(times: Sequence[PairTimes]) -> float:
    """Sum of the baselines' times / sum of the candidates' (censored times in); inf when the candidates'
    sum is 0 (at the target from the start)."""
    tc = sum(t.candidate_time for t in times)
    return sum(t.baseline_time for t in times) / tc if tc > 0 else math.inf


def _estimate(
    baseline: Mapping[int, OutcomeCurve],
    candidate: Mapping[int, OutcomeCurve],
    pairs: Sequence[tuple[int, int]],
    fraction: float,
    prompts: np.ndarray | None = None,
    own_target: bool = False,
) -> tuple[float, float, float, list[PairTimes]]:
    raw_b = {b: baseline[b].curve(prompts) for b, _ in pairs}
    raw_c = {c: candidate[c].curve(prompts) for _, c in pairs}
    # Every checkpoint of a run is scored on the same held-out prompts: equal weights (= their count).
    n = baseline[pairs[0][0]].outcomes.shape[1] if prompts is None else len(prompts)
    mono_b = {b: monotone_curve(c, [n] * len(c.times)) for b, c in raw_b.items()}
    mono_c = {k: monotone_curve(c, [n] * len(c.times)) for k, c in raw_c.items()}
    if own_target:
        return _estimate_own(raw_b, raw_c, mono_b, mono_c, pairs, fraction)
    target, a0, gain = gain_target([raw_b[b] for b, _ in pairs], fraction)
    if not gain > 0:
        return target, a0, gain, []
    times = []
    for b, c in pairs:
        (tb, cb), (tc, cc) = _time(mono_b[b], target), _time(mono_c[c], target)
        times.append(PairTimes(tb, tc, cb, cc))
    return target, a0, gain, times


def _estimate_own(raw_b, raw_c, mono_b, mono_c, pairs, fraction) -> tuple[float, float, float, list[PairTimes]]:
    """Each pair's own target (pre-registration 3): the baseline's gain G = its monotone final - its first
    checkpoint; each run's time is the first crossing of fraction * G above its *own* first checkpoint (the
    two runs of a pair start from one model, so one level; two vanilla runs of the noise floor may not).
    Returns the mean target, start and gain over the pairs, and no times when a pair gained nothing."""
    levels, starts, gains, times = [], [], [], []
    for b, c in pairs:
        a0 = raw_b[b].accuracies[0]
        gain = mono_b[b].accuracies[-1] - a0
        starts.append(a0)
        gains.append(gain)
        levels.append(a0 + fraction * gain)
        if not gain > 0:
            continue
        (tb, cb) = _time(mono_b[b], a0 + fraction * gain)
        (tc, cc) = _time(mono_c[c], raw_c[c].accuracies[0] + fraction * gain)
        times.append(PairTimes(tb, tc, cb, cc))
    mean = (float(np.mean(levels)), float(np.mean(starts)), float(np.mean(gains)))
    return (*mean, times if len(times) == len(pairs) else [])


def matched_speedup(
    baseline: Mapping[int, OutcomeCurve],
    candidate: Mapping[int, OutcomeCurve],
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    fraction: float = MATCHED_FRACTION,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    own_target: bool = False,
) -> MatchedSpeedup:
    """Speedup of candidate over baseline at `fraction` of the baselines' pooled gain, paired by seed (or by
    explicit `pairs`, e.g. `noise_floor_pairs`); the target pools the baselines of the pairs, or with
    `own_target` is each pair's own (`_estimate_own`: pre-registration 3's seed-pair units, whose pairs may
    come from machines with different warm starts; `target`, `start` and `gain` are then means over pairs,
    and `no_gain` says a pair gained nothing)."""
    pairs, n_prompts = seed_pairs(baseline, candidate, pairs)
    target, a0, gain, times = _estimate(baseline, candidate, pairs, fraction, own_target=own_target)
    ratio = _pooled(times) if times else None
    rng = np.random.default_rng(seed)
    draws, censored, no_gain = [], 0, 0
    for _ in range(n_bootstrap):
        prompts = rng.integers(0, n_prompts, size=n_prompts)
        chosen = [pairs[j] for j in rng.integers(0, len(pairs), size=len(pairs))]
        *_, t = _estimate(baseline, candidate, chosen, fraction, prompts, own_target)
        if not t:
            no_gain += 1
            continue
        draws.append(_pooled(t))
        censored += any(x.censored for x in t)
    alpha = (1.0 - confidence) / 2
    # inverted_cdf returns one of the draws: no interpolation towards an infinite one.
    lo, hi = (
        (float(x) for x in np.quantile(draws, [alpha, 1.0 - alpha], method="inverted_cdf"))
        if draws
        else (math.nan, math.nan)
    )
    return MatchedSpeedup(
        fraction=fraction,
        target=target,
        start=a0,
        gain=gain,
        per_pair=dict(zip(pairs, times, strict=True)) if times else {},
        ratio=None if ratio is None or not math.isfinite(ratio) else ratio,
        ci_low=lo,
        ci_high=hi,
        censored_share=censored / n_bootstrap,
        no_gain_share=no_gain / n_bootstrap,
        confidence=confidence,
    )


def noise_floor_pairs(seeds: Sequence[int]) -> list[tuple[int, int]]:
    """Vanilla's last seed as the "variant" against each of the others: [(s, last) for s before last].

    Not seed s against s+1 all round (PODS's floor): with one target for every pair, a rotation's pooled
    ratio is sum(t_s) / sum(t_s) = 1 whatever the runs do.
    """
    ordered = sorted(seeds)
    return [(s, ordered[-1]) for s in ordered[:-1]]


def floor_supports_claim(floor, near: float = FLOOR_NEAR, bound: float = FLOOR_BOUND) -> bool:
    """The pre-registered rule: an estimator may carry a claim only if its vanilla-vs-vanilla ratio lies
    within a factor `near` of 1 and its interval covers 1 and stays within a factor `bound` of 1 (a floor
    whose interval is unbounded or wide says the estimator cannot tell two runs of one method apart).
    `floor`: a `MatchedSpeedup` or a `speedup.PeakSpeedup` (anything with ratio, ci_low, ci_high), or
    None (no floor)."""
    if floor is None or floor.ratio is None:
        return False
    lo, hi = floor.ci_low, floor.ci_high
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    return 1 / near <= floor.ratio <= near and 1 / bound <= lo <= 1 <= hi <= bound
