from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolcall_repro.analysis.speedup import (
    Curve,
    OutcomeCurve,
    matched_target,
    peak_speedup,
    predicted_speedup,
    speedup_at_matched_accuracy,
    speedup_over_seeds,
    time_to_accuracy,
)


def c(times, accs) -> Curve:
    return Curve.from_points(times, accs)


def test_time_to_accuracy_interpolates_between_bracketing_checkpoints():
    curve = c([0, 10, 20], [0.2, 0.4, 0.8])
    assert time_to_accuracy(curve, 0.6) == pytest.approx(15.0)
    assert time_to_accuracy(curve, 0.4) == 10.0  # exactly at a checkpoint
    assert time_to_accuracy(curve, 0.1) == 0.0  # already there at the first checkpoint
    assert time_to_accuracy(curve, 0.81) is None  # never reached: no number


def test_first_crossing_counts_even_if_accuracy_drops_later():
    curve = c([0, 1, 2, 3], [0.0, 0.6, 0.3, 0.9])
    assert time_to_accuracy(curve, 0.5) == pytest.approx(5 / 6)


def test_target_is_the_baseline_peak_unless_configured():
    slow, fast = c([0, 4, 8], [0.1, 0.5, 0.55]), c([0, 2, 4], [0.1, 0.5, 0.7])
    assert matched_target(slow) == 0.55
    s = speedup_at_matched_accuracy(slow, fast)
    assert s.target == 0.55 and s.baseline_time == 8.0
    assert s.candidate_time == pytest.approx(2 + 2 * 0.05 / 0.2)
    assert s.ratio == pytest.approx(8.0 / 2.5)
    configured = speedup_at_matched_accuracy(slow, fast, target=0.5)
    assert configured.ratio == pytest.approx(2.0)


def test_a_weaker_candidate_does_not_set_the_bar():
    # PODS: the candidate must reach the baseline's peak (0.867); its own best (0.833) is not the target.
    vanilla = c([0, 1, 2, 3], [0.7, 0.8, 0.867, 0.85])
    efficient = c([0, 0.5, 1.0, 1.5], [0.7, 0.8, 0.833, 0.833])
    s = speedup_at_matched_accuracy(vanilla, efficient)
    assert s.target == 0.867 and s.baseline_time == 2.0
    assert s.candidate_time is None and s.ratio is None and not s.at_start
    # A baseline that peaks at its first checkpoint: training never beat the start.
    flat = speedup_at_matched_accuracy(c([0, 1], [0.7, 0.6]), c([0, 1], [0.7, 0.7]))
    assert flat.at_start and flat.ratio is None


def test_not_reached_gives_none_not_a_number():
    s = speedup_at_matched_accuracy(c([0, 1], [0.1, 0.5]), c([0, 1], [0.1, 0.3]), target=0.5)
    assert s.baseline_time == 1.0 and s.candidate_time is None and s.ratio is None


def test_bad_curves_are_rejected():
    with pytest.raises(ValueError):
        Curve((), ())
    with pytest.raises(ValueError):
        Curve((0.0, 1.0), (0.5,))
    with pytest.raises(ValueError):
        Curve((1.0, 0.0), (0.1, 0.2))
    with pytest.raises(ValueError):
        Curve((0.0, 1.0), (0.1, math.nan))


def test_over_seeds_common_target_spread_and_bootstrap():
    base = {s: c([0, 2, 4], [0.0, 0.5, 1.0]) for s in range(3)}
    cand = {s: c([0, f, 2 * f], [0.0, 0.5, 1.0]) for s, f in enumerate([1.0, 2.0, 0.5])}
    r = speedup_over_seeds(base, cand, n_bootstrap=500, seed=1)
    assert r.target == 1.0
    assert [r.per_seed[s].ratio for s in range(3)] == pytest.approx([2.0, 1.0, 4.0])
    assert r.mean == pytest.approx(7 / 3) and r.std == pytest.approx(1.5275, abs=1e-3)
    assert r.ci_low <= r.mean <= r.ci_high and 1.0 <= r.ci_low and r.ci_high <= 4.0
    assert r.not_reached == []
    again = speedup_over_seeds(base, cand, n_bootstrap=500, seed=1)
    assert (again.ci_low, again.ci_high) == (r.ci_low, r.ci_high)


def test_over_seeds_counts_seeds_that_miss_the_target():
    base = {0: c([0, 1], [0.0, 1.0]), 1: c([0, 1], [0.0, 1.0])}
    cand = {0: c([0, 1], [0.0, 1.0]), 1: c([0, 1], [0.0, 0.4])}
    r = speedup_over_seeds(base, cand, target=0.8)
    assert r.not_reached == [1] and r.mean == pytest.approx(1.0) and r.std is None
    peak = speedup_over_seeds(base, cand)
    assert peak.target == 1.0 and peak.not_reached == [1]
    with pytest.raises(ValueError, match="one side"):
        speedup_over_seeds(base, {0: cand[0]})


@given(
    accs=st.lists(st.floats(0, 1), min_size=2, max_size=8),
    gaps=st.lists(st.floats(0.01, 10), min_size=8, max_size=8),
    factor=st.floats(0.1, 10),
)
def test_a_run_that_is_the_same_curve_k_times_faster_has_speedup_k(accs, gaps, factor):
    times = [sum(gaps[:i]) for i in range(len(accs))]
    base = c(times, accs)
    fast = c([t / factor for t in times], accs)
    s = speedup_at_matched_accuracy(base, fast)
    if s.candidate_time == 0:
        assert s.ratio is None  # reached at the initial checkpoint: no finite ratio
    else:
        assert s.ratio == pytest.approx(factor, rel=1e-6)


@given(accs=st.lists(st.floats(0, 1), min_size=1, max_size=8), target=st.floats(0, 1))
def test_time_to_target_lies_within_the_bracketing_checkpoints(accs, target):
    curve = c(list(range(len(accs))), accs)
    t = time_to_accuracy(curve, target)
    if t is None:
        assert max(accs) < target
    else:
        i = next(i for i, a in enumerate(accs) if a >= target)
        assert max(0, i - 1) <= t <= i


def test_predicted_speedup_formula():
    assert predicted_speedup(0.0, 0.5, 8, 8) == pytest.approx(1.0)
    assert predicted_speedup(0.5, 0.0, 4, 8) == pytest.approx(2.0)
    assert predicted_speedup(0.0, 1.0, 4, 16) == pytest.approx(4.0)
    assert predicted_speedup(0.2, 0.75, 4, 8) == pytest.approx(1 / (0.8 * 0.25 + 0.8 * 0.75 * 0.5))


def oc(times, outcomes) -> OutcomeCurve:
    return OutcomeCurve(tuple(float(t) for t in times), np.asarray(outcomes, dtype=float))


def test_peak_speedup_of_the_same_learner_twice_as_fast_is_two_with_a_zero_width_interval():
    outcomes = [[0, 0, 1, 0], [1, 0, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    base = {s: oc([0, 2, 4, 6], outcomes) for s in range(3)}
    cand = {s: oc([0, 1, 2, 3], outcomes) for s in range(3)}
    r = peak_speedup(base, cand, n_bootstrap=300, seed=0)
    assert r.ratio == pytest.approx(2.0) and r.not_reached == []
    # Any resample of prompts keeps both curves identical up to the time scale: ratio 2 or "at start"
    # (a resample of prompts solved from the start), never anything else.
    assert r.ci_high == pytest.approx(2.0) and r.ci_low in (0.0, pytest.approx(2.0))


def test_peak_speedup_hand_case_and_not_reached():
    # Vanilla peaks at 0.75 at t = 4 (3 of 4 prompts); the candidate reaches 0.75 at t = 1: ratio 4.
    base = {0: oc([0, 2, 4, 6], [[0, 0, 0, 1], [0, 0, 1, 1], [1, 0, 1, 1], [0, 0, 1, 1]])}
    cand = {0: oc([0, 1, 2], [[0, 0, 0, 1], [1, 0, 1, 1], [1, 0, 1, 1]])}
    r = peak_speedup(base, cand, n_bootstrap=200, seed=1)
    assert r.per_seed[0].target == 0.75 and r.per_seed[0].baseline_time == 4.0
    assert r.per_seed[0].candidate_time == 1.0 and r.ratio == pytest.approx(4.0)
    never = {0: oc([0, 1, 2], [[0, 0, 0, 1], [0, 0, 1, 1], [0, 0, 1, 1]])}  # best 0.5 < 0.75
    miss = peak_speedup(base, never, n_bootstrap=200, seed=1)
    assert miss.ratio is None and miss.not_reached == [0]
    assert miss.not_reached_share > 0.5 and miss.ci_low == 0.0


def test_peak_speedup_pools_times_over_seeds_and_takes_explicit_pairs():
    base = {0: oc([0, 2], [[0, 0], [1, 1]]), 1: oc([0, 6], [[0, 0], [1, 1]])}
    cand = {0: oc([0, 1], [[0, 0], [1, 1]]), 1: oc([0, 1], [[0, 0], [1, 1]])}
    r = peak_speedup(base, cand, n_bootstrap=50, seed=0)
    assert r.ratio == pytest.approx((2 + 6) / (1 + 1))  # pooled times, not the mean of 2x and 6x
    floor = peak_speedup(base, base, pairs=[(0, 1), (1, 0)], n_bootstrap=50, seed=0)
    assert floor.per_seed[0].ratio == pytest.approx(2 / 6) and floor.per_seed[1].ratio == pytest.approx(3.0)
    with pytest.raises(ValueError, match="one side"):
        peak_speedup(base, {0: cand[0]})
    with pytest.raises(ValueError, match="held-out sets"):
        peak_speedup(base, {0: oc([0, 1], [[0], [1]]), 1: cand[1]})
