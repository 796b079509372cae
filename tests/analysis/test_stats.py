"""The held-out statistics against hand-computed cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from toolcall_repro.analysis.stats import (
    gain_non_inferiority,
    non_inferiority,
    paired_bootstrap,
    wilson_interval,
)


def test_wilson_matches_the_hand_computed_interval():
    # x = 8 of n = 10, z = 1.959964: centre (8 + z^2/2) / (10 + z^2) = 0.71674,
    # half-width z sqrt(8 * 2 / 10 + z^2 / 4) / (10 + z^2) = 0.22657.
    w = wilson_interval(8, 10)
    assert w.estimate == 0.8
    assert (w.low, w.high) == pytest.approx((0.49016, 0.94331), abs=1e-4)
    # 0 of 10: the low end is 0 and the high end z^2 / (n + z^2) = 0.27753 (not the Wald interval's 0).
    zero = wilson_interval(0, 10)
    assert zero.low == 0.0 and zero.high == pytest.approx(0.27753, abs=1e-4)
    assert wilson_interval(10, 10).low == pytest.approx(1 - 0.27753, abs=1e-4)
    # 90%: z = 1.644854
    z = 1.644854
    centre, half = (3 + z * z / 2) / (4 + z * z), z * math.sqrt(3 * 1 / 4 + z * z / 4) / (4 + z * z)
    w90 = wilson_interval(3, 4, confidence=0.9)
    assert (w90.low, w90.high) == pytest.approx((centre - half, centre + half), abs=1e-6)


def test_wilson_without_trials_is_nan_and_bad_counts_fail():
    assert math.isnan(wilson_interval(0, 0).estimate)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(1, 2, confidence=1.0)


def test_paired_bootstrap_of_a_constant_difference_is_that_difference():
    base = np.array([0, 1, 0, 1, 1, 0], dtype=float)
    iv = paired_bootstrap(base, base + 0.25, n_bootstrap=200, seed=3)
    assert (iv.estimate, iv.low, iv.high) == pytest.approx((0.25, 0.25, 0.25))
    assert iv.excludes_zero()


def test_paired_bootstrap_quantiles_match_the_exact_resampling_distribution():
    # Three prompts, differences (1, 0, 0): all 27 equally likely resamples give the exact distribution.
    base, cand = np.array([0.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0])
    diff = cand - base
    means = np.array([diff[list(ix)].mean() for ix in itertools.product(range(3), repeat=3)])
    exact = np.quantile(means, [0.1, 0.9])  # P(mean = 0) = 8/27 > 0.1, P(mean = 1) = 1/27 < 0.1
    assert tuple(exact) == pytest.approx((0.0, 2 / 3))
    iv = paired_bootstrap(base, cand, n_bootstrap=20000, seed=0, confidence=0.8)
    assert iv.estimate == pytest.approx(1 / 3)
    assert (iv.low, iv.high) == pytest.approx(tuple(exact))
    assert not iv.excludes_zero()


def test_paired_bootstrap_pairs_prompts_unlike_an_unpaired_comparison():
    # Hard and easy prompts differ a lot; the candidate adds 1 on 8 of 40 prompts. Paired: the interval
    # only sees the 0/1 differences, so it excludes zero; prompt difficulty cancels.
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, 40).astype(float)
    cand = base.copy()
    flip = np.flatnonzero(base == 0)[:8]
    cand[flip] = 1.0
    iv = paired_bootstrap(base, cand, n_bootstrap=2000, seed=1)
    assert iv.estimate == pytest.approx(8 / 40) and iv.excludes_zero()
    again = paired_bootstrap(base, cand, n_bootstrap=2000, seed=1)
    assert (again.low, again.high) == (iv.low, iv.high)  # seeded


def test_paired_bootstrap_rejects_unpaired_inputs():
    with pytest.raises(ValueError, match="equal-length"):
        paired_bootstrap([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        paired_bootstrap([1.0, math.nan], [1.0, 0.0])


def test_non_inferiority_at_a_stated_margin():
    base = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    worse = base - 0.1  # a constant deficit of 0.1: interval [-0.1, -0.1]
    assert non_inferiority(base, worse, margin=0.15).non_inferior
    assert not non_inferiority(base, worse, margin=0.05).non_inferior
    same = non_inferiority(base, base, margin=0.0)
    assert same.difference.low == 0.0 and not same.non_inferior  # strict: low end must exceed -margin
    assert non_inferiority(base, base, margin=0.01).non_inferior
    with pytest.raises(ValueError):
        non_inferiority(base, base, margin=-0.1)


# --- non-inferiority over seed pairs and prompts, margin tied to the gain ---------------------------


def _flat(values, prompts=20):
    """(pairs, prompts): pair j scores values[j] on every prompt (prompt resampling changes nothing)."""
    return np.array([[v] * prompts for v in values], dtype=float)


def test_gain_non_inferiority_carries_the_seeds_variance():
    # Candidate +0.1 in one pair, -0.1 in the other: the seed-averaged outcomes are equal, so a bootstrap
    # over prompts alone calls it exactly 0 [0, 0]; over pairs too the interval is [-0.1, +0.1], wider than
    # a quarter of the gain (0.05): not non-inferior.
    start, base = _flat([0.3, 0.3]), _flat([0.5, 0.5])
    cand = _flat([0.6, 0.4])
    seed_averaged = non_inferiority(base.mean(axis=0), cand.mean(axis=0), 0.05, n_bootstrap=500)
    assert (seed_averaged.difference.low, seed_averaged.difference.high) == (0.0, 0.0)
    ni = gain_non_inferiority(start, base, cand, of_gain=0.25, n_bootstrap=2000, seed=1)
    assert ni.difference.estimate == pytest.approx(0.0)
    assert (ni.difference.low, ni.difference.high) == pytest.approx((-0.1, 0.1))
    assert ni.gain.estimate == pytest.approx(0.2) and ni.margin == pytest.approx(0.05)
    assert not ni.non_inferior


def test_gain_non_inferiority_margin_is_a_share_of_the_gain():
    # The same 3-point loss is inside a quarter of a 20-point gain and outside a quarter of an 8-point one.
    big = gain_non_inferiority(_flat([0.3]), _flat([0.5]), _flat([0.47]), n_bootstrap=200)
    small = gain_non_inferiority(_flat([0.3]), _flat([0.38]), _flat([0.35]), n_bootstrap=200)
    assert big.difference.estimate == pytest.approx(-0.03) == small.difference.estimate
    assert big.non_inferior and big.margin == pytest.approx(0.05)
    assert not small.non_inferior and small.margin == pytest.approx(0.02)
    fixed = gain_non_inferiority(_flat([0.3]), _flat([0.38]), _flat([0.35]), of_gain=None, margin=0.05)
    assert fixed.non_inferior and fixed.of_gain is None and fixed.margin == 0.05


def test_gain_non_inferiority_resamples_prompts_too():
    # One pair; the candidate loses prompt 0 (of 4) that the baseline solved: -0.25 on average, and a
    # prompt resample can draw prompt 0 up to four times, so the interval reaches -1 or near it.
    start = np.zeros((1, 4))
    base = np.ones((1, 4))
    cand = np.array([[0.0, 1.0, 1.0, 1.0]])
    ni = gain_non_inferiority(start, base, cand, n_bootstrap=2000, seed=0)
    assert ni.difference.estimate == pytest.approx(-0.25) and ni.difference.low <= -0.5
    assert ni.difference.high == 0.0 and not ni.non_inferior


def test_gain_non_inferiority_rejects_bad_shapes_and_margins():
    with pytest.raises(ValueError, match="one shape"):
        gain_non_inferiority(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="exactly one"):
        gain_non_inferiority(_flat([0]), _flat([0]), _flat([0]), of_gain=0.25, margin=0.05)
    with pytest.raises(ValueError, match="of_gain must be in"):
        gain_non_inferiority(_flat([0]), _flat([0]), _flat([0]), of_gain=1.5)
