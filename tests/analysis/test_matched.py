from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcall_repro.analysis.matched import (
    MatchedSpeedup,
    PairTimes,
    floor_supports_claim,
    gain_target,
    matched_speedup,
    monotone_curve,
    noise_floor_pairs,
)
from toolcall_repro.analysis.speedup import Curve, OutcomeCurve


def c(times, accs) -> Curve:
    return Curve.from_points(times, accs)


def outcomes(times, correct, n=10) -> OutcomeCurve:
    """`correct[k]` of `n` prompts right at checkpoint k (the first ones): 0/1 outcomes."""
    return OutcomeCurve(tuple(times), np.array([[1.0] * k + [0.0] * (n - k) for k in correct]))


def same_everywhere(times, accs, n=10) -> OutcomeCurve:
    """Every prompt scores `accs[k]` at checkpoint k: resampling prompts changes nothing."""
    return OutcomeCurve(tuple(times), np.array([[a] * n for a in accs]))


def test_monotone_curve_pools_a_dip_with_its_neighbour_by_weight():
    curve = c([0, 1, 2, 3], [0.2, 0.5, 0.3, 0.6])
    assert monotone_curve(curve).accuracies == pytest.approx((0.2, 0.4, 0.4, 0.6))
    # 3 prompts at the dip, 1 before it: (0.5 * 1 + 0.3 * 3) / 4 = 0.35
    assert monotone_curve(curve, [1, 1, 3, 1]).accuracies == pytest.approx((0.2, 0.35, 0.35, 0.6))
    assert monotone_curve(curve).times == curve.times
    with pytest.raises(ValueError):
        monotone_curve(curve, [1, 1, 0, 1])


def _brute_isotonic(y, w):
    """Min-max formula of the weighted isotonic fit: max over j <= i of min over k >= i of mean(y[j..k])."""
    n = len(y)

    def mean(j, k):
        return sum(w[i] * y[i] for i in range(j, k + 1)) / sum(w[j : k + 1])

    return [max(min(mean(j, k) for k in range(i, n)) for j in range(i + 1)) for i in range(n)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.integers(1, 50)),
        min_size=1,
        max_size=8,
    )
)
def test_monotone_curve_equals_the_brute_force_fit(points):
    y, w = [p[0] for p in points], [p[1] for p in points]
    fit = monotone_curve(c(list(range(len(y))), y), w).accuracies
    assert fit == pytest.approx(_brute_isotonic(y, w), abs=1e-9)
    assert all(b >= a - 1e-12 for a, b in zip(fit, fit[1:], strict=False))


def test_gain_target_pools_start_and_the_monotone_finals():
    # monotone fits: [0.4, 0.475, 0.475, 0.6] and [0.4, 0.55, 0.55]; finals 0.6 and 0.55
    target, a0, gain = gain_target([c([0, 1, 2, 3], [0.4, 0.5, 0.45, 0.6]), c([0, 1, 2], [0.4, 0.6, 0.5])])
    assert a0 == pytest.approx(0.4) and gain == pytest.approx(0.175)
    assert target == pytest.approx(0.4 + 0.8 * 0.175)
    assert gain_target([c([0, 1], [0.2, 0.7])], fraction=0.5)[0] == pytest.approx(0.45)
    with pytest.raises(ValueError):
        gain_target([c([0, 1], [0.2, 0.7])], fraction=0.0)


def test_the_same_learner_twice_as_fast_is_two_with_a_zero_width_interval():
    # 0.2 -> 0.6 -> 1.0; target 0.2 + 0.8 * 0.8 = 0.84: vanilla at 1 + 0.24 / 0.4 = 1.6, the variant at 0.8
    base = {0: outcomes([0, 1, 2], [2, 6, 10])}
    cand = {0: outcomes([0, 0.5, 1], [2, 6, 10])}
    m = matched_speedup(base, cand, n_bootstrap=300)
    assert m.target == pytest.approx(0.84) and m.start == pytest.approx(0.2) and m.gain == pytest.approx(0.8)
    assert m.per_pair[(0, 0)].baseline_time == pytest.approx(1.6)
    assert m.per_pair[(0, 0)].candidate_time == pytest.approx(0.8)
    assert m.ratio == pytest.approx(2.0)
    assert (m.ci_low, m.ci_high) == pytest.approx((2.0, 2.0))
    assert m.censored_share == 0.0 and not m.censored and not m.no_gain


def test_a_dip_does_not_decide_the_time():
    # vanilla 0.2, 0.6, 0.5, 0.7: monotone 0.2, 0.55, 0.55, 0.7; target 0.2 + 0.8 * 0.5 = 0.6, crossed at
    # 2 + 0.05 / 0.15 = 7/3 (the raw curve touches 0.6 at t = 1, one checkpoint's draw); variant at t = 2.
    base = {0: outcomes([0, 1, 2, 3], [2, 6, 5, 7])}
    cand = {0: outcomes([0, 1, 2, 3], [2, 4, 6, 7])}
    m = matched_speedup(base, cand, n_bootstrap=200)
    assert m.target == pytest.approx(0.6)
    assert m.per_pair[(0, 0)].baseline_time == pytest.approx(7 / 3)
    assert m.per_pair[(0, 0)].candidate_time == pytest.approx(2.0)
    assert m.ratio == pytest.approx(7 / 6)
    assert m.ci_low <= m.ratio <= m.ci_high


def test_times_pool_over_seed_pairs():
    # vanilla seeds at 1.6 and 3.2, variants at 0.8 and 0.8: (1.6 + 3.2) / (0.8 + 0.8) = 3
    base = {0: outcomes([0, 1, 2], [2, 6, 10]), 1: outcomes([0, 2, 4], [2, 6, 10])}
    cand = {0: outcomes([0, 0.5, 1], [2, 6, 10]), 1: outcomes([0, 0.5, 1], [2, 6, 10])}
    m = matched_speedup(base, cand, n_bootstrap=200)
    assert m.ratio == pytest.approx(3.0)
    assert {p: t.ratio for p, t in m.per_pair.items()} == pytest.approx({(0, 0): 2.0, (1, 1): 4.0})


def test_a_variant_that_misses_is_censored_at_its_budget_not_counted_as_zero():
    # vanilla crosses the target 0.6 at t = 2; the variant never does and stops at t = 3: censored there,
    # so the pair's ratio is at most 2 / 3 (its true time is later), not 0.
    base = {0: same_everywhere([0, 1, 2, 3], [0.2, 0.4, 0.6, 0.7])}
    cand = {0: same_everywhere([0, 1, 2, 3], [0.2, 0.3, 0.4, 0.5])}  # best 0.5 < target 0.6
    m = matched_speedup(base, cand, n_bootstrap=200)
    assert m.target == pytest.approx(0.6)
    assert m.per_pair[(0, 0)] == PairTimes(pytest.approx(2.0), 3.0, False, True)
    assert m.censored == m.candidate_censored == [(0, 0)]
    assert m.ratio == pytest.approx(2 / 3)
    assert m.censored_share == 1.0 and (m.ci_low, m.ci_high) == pytest.approx((2 / 3, 2 / 3))


def test_a_longer_budget_lets_a_slow_variant_cross():
    # The same variant given twice the compute crosses the target at t = 5: a time, not a censored budget.
    base = {0: same_everywhere([0, 1, 2, 3], [0.2, 0.4, 0.6, 0.7])}
    cand = {0: same_everywhere([0, 1, 2, 3, 4, 5, 6], [0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.62])}
    m = matched_speedup(base, cand, n_bootstrap=100)
    assert m.per_pair[(0, 0)] == PairTimes(pytest.approx(2.0), pytest.approx(5.0), False, False)
    assert m.ratio == pytest.approx(0.4) and m.censored_share == 0.0


def test_the_share_of_censored_resamples_is_reported_and_they_stay_in():
    # Prompt resampling is a no-op here (every prompt scores the same); pair 1's variant misses and is
    # censored at t = 2 (vanilla: 0.8): a resample has a censored run unless both draws of 2 are pair 0.
    base = {s: same_everywhere([0, 1, 2], [0.2, 0.6, 1.0]) for s in (0, 1)}
    cand = {0: same_everywhere([0, 0.5, 1], [0.2, 0.6, 1.0]), 1: same_everywhere([0, 1, 2], [0.2, 0.5, 0.6])}
    m = matched_speedup(base, cand, n_bootstrap=4000, seed=3)
    assert m.censored == [(1, 1)]
    assert m.ratio == pytest.approx((1.6 + 1.6) / (0.8 + 2.0))
    assert m.censored_share == pytest.approx(0.75, abs=0.03)
    assert m.ci_low == pytest.approx(1.6 / 2.0) and m.ci_high == pytest.approx(2.0)


def test_a_baseline_that_misses_is_censored_too():
    # vanilla seed 1 ends at 0.6 < target 0.2 + 0.8 * 0.6 = 0.68 (finals 1.0 and 0.6 pool to 0.8): censored
    # at its last checkpoint, t = 2, a lower bound on its time (so on the pooled ratio)
    base = {0: same_everywhere([0, 1, 2], [0.2, 0.6, 1.0]), 1: same_everywhere([0, 1, 2], [0.2, 0.4, 0.6])}
    cand = {s: same_everywhere([0, 1, 2], [0.2, 0.6, 1.0]) for s in (0, 1)}
    m = matched_speedup(base, cand, n_bootstrap=400)
    assert m.target == pytest.approx(0.68)
    assert m.per_pair[(1, 1)] == PairTimes(2.0, pytest.approx(1.2), True, False)
    assert m.censored == [(1, 1)] and not m.candidate_censored
    assert m.ratio == pytest.approx((1.2 + 2.0) / 2.4) and math.isfinite(m.ci_high)


def test_no_gain_means_no_accuracy_to_match():
    base = {0: outcomes([0, 1], [5, 4])}
    cand = {0: outcomes([0, 1], [5, 6])}
    m = matched_speedup(base, cand, n_bootstrap=100)
    assert m.no_gain and m.ratio is None and not m.per_pair
    assert m.no_gain_share == 1.0 and math.isnan(m.ci_low)


def test_pairs_must_name_runs_and_share_the_held_out_set():
    base = {0: outcomes([0, 1], [2, 6])}
    with pytest.raises(ValueError, match="one side only"):
        matched_speedup(base, {1: outcomes([0, 1], [2, 6])})
    with pytest.raises(ValueError, match="without a run"):
        matched_speedup(base, base, pairs=[(0, 3)])
    with pytest.raises(ValueError, match="different held-out sets"):
        matched_speedup(base, {0: outcomes([0, 1], [2, 6], n=20)})


def test_noise_floor_is_the_last_seed_against_the_others_because_a_rotation_is_always_one():
    assert noise_floor_pairs([2, 0, 1]) == [(0, 2), (1, 2)]
    assert noise_floor_pairs([0, 1]) == [(0, 1)]
    runs = {
        0: outcomes([0, 1, 2], [2, 6, 10]),
        1: outcomes([0, 3, 5], [2, 7, 10]),
        2: outcomes([0, 1, 4], [2, 5, 9]),
    }
    rotation = matched_speedup(runs, runs, pairs=[(0, 1), (1, 2), (2, 0)], n_bootstrap=50)
    assert rotation.ratio == pytest.approx(1.0)  # sum(t_s) / sum(t_s), whatever the curves
    floor = matched_speedup(runs, runs, pairs=noise_floor_pairs(runs), n_bootstrap=50)
    t = {s: floor.per_pair[(s, 2)] for s in (0, 1)}
    assert floor.ratio == pytest.approx((t[0].baseline_time + t[1].baseline_time) / (2 * t[0].candidate_time))
    assert floor.ratio != pytest.approx(1.0)


def _floor(ratio, lo, hi) -> MatchedSpeedup:
    return MatchedSpeedup(0.8, 0.5, 0.2, 0.3, {}, ratio, lo, hi, 0.0, 0.0, 0.95)


def test_floor_rule_near_one_and_covering_one():
    assert floor_supports_claim(_floor(1.1, 0.7, 1.6))
    assert floor_supports_claim(_floor(0.7, 0.55, 1.2))  # within 1.5x of 1 (0.67 .. 1.5), covering 1
    assert not floor_supports_claim(_floor(1.6, 0.9, 2.6))  # covers 1 but is further than 1.5x from it
    assert not floor_supports_claim(_floor(1.3, 1.02, 1.6))  # near, but the interval excludes 1
    assert not floor_supports_claim(_floor(1.2, 1.05, 1.4))  # near, but the interval excludes 1
    assert not floor_supports_claim(_floor(None, 0.0, 1.4))  # not reached
    assert not floor_supports_claim(None)


def test_floor_rule_wants_a_bounded_interval():
    """The first evidence run's single-turn floor, 1.12 [0.00, inf], passed the old rule; an interval that
    wide cannot tell two runs of one method apart, so the estimator may not carry a claim."""
    assert not floor_supports_claim(_floor(1.12, 0.0, math.inf))
    assert not floor_supports_claim(_floor(0.81, 0.0, 1.82))  # multi-turn's: its low end is 0
    assert not floor_supports_claim(_floor(1.1, 0.7, 2.3))  # reaches past 2x
    assert not floor_supports_claim(_floor(1.0, 0.45, 1.3))  # reaches below 0.5x
    assert floor_supports_claim(_floor(1.0, 0.5, 2.0))  # the bounds themselves pass


def test_own_targets_measure_each_pair_from_its_own_start():
    """Pre-registration 3: pair 0 starts at 0.2 and gains 0.5 (target 0.2 + 0.8 * 0.5 = 0.6), pair 1 starts
    at 0.5 and gains 0.25 (target 0.7); vanilla crosses at t = 8 and 4 by hand, efficient twice as fast in
    both. A pooled target (0.65) measures pair 0 nearer its end and pair 1 nearer its start."""
    base = {0: same_everywhere([0, 5, 10], [0.2, 0.45, 0.7]), 1: same_everywhere([0, 5, 10], [0.5, 0.75, 0.75])}
    cand = {0: same_everywhere([0, 2.5, 5], [0.2, 0.45, 0.7]), 1: same_everywhere([0, 2.5, 5], [0.5, 0.75, 0.75])}
    own = matched_speedup(base, cand, own_target=True, n_bootstrap=50)
    assert own.per_pair[(0, 0)] == PairTimes(pytest.approx(8.0), pytest.approx(4.0))
    assert own.per_pair[(1, 1)] == PairTimes(pytest.approx(4.0), pytest.approx(2.0))
    assert own.ratio == pytest.approx(2.0) and own.ci_low == pytest.approx(2.0) == own.ci_high
    assert (own.target, own.start, own.gain) == (pytest.approx(0.65), pytest.approx(0.35), pytest.approx(0.375))
    assert own.censored == [] and not own.no_gain
    pooled = matched_speedup(base, cand, n_bootstrap=50)
    assert pooled.target == pytest.approx(0.65)
    assert pooled.per_pair[(0, 0)].baseline_time == pytest.approx(9.0)
    assert pooled.per_pair[(1, 1)].baseline_time == pytest.approx(3.0)


def test_own_targets_let_a_floor_compare_runs_from_two_starts():
    """Two vanilla runs of one recipe from two warm starts (0.2 and 0.5), both gaining 0.5 at the same pace:
    each is measured from its own start, so the floor is 1x; a level target (0.6) would call one 4x faster."""
    base = {0: same_everywhere([0, 5, 10], [0.2, 0.45, 0.7])}
    other = {1: same_everywhere([0, 5, 10], [0.5, 0.75, 1.0])}
    assert matched_speedup(base, other, pairs=[(0, 1)], own_target=True, n_bootstrap=20).ratio == pytest.approx(1.0)
    assert matched_speedup(base, other, pairs=[(0, 1)], n_bootstrap=20).ratio == pytest.approx(8 / 2)


def test_own_targets_give_no_ratio_when_a_pair_gains_nothing():
    base = {0: same_everywhere([0, 5], [0.5, 0.7]), 1: same_everywhere([0, 5], [0.5, 0.4])}
    cand = {0: same_everywhere([0, 5], [0.5, 0.7]), 1: same_everywhere([0, 5], [0.5, 0.7])}
    m = matched_speedup(base, cand, own_target=True, n_bootstrap=50)
    assert m.ratio is None and m.no_gain and m.per_pair == {}
