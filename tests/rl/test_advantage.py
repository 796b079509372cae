import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from toolcall_repro.rl import group_advantages, group_type, group_type_fractions, max_variance_subset

rewards_st = st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=16)


def verl_formula(r, eps=1e-6):
    """verl's GRPO advantage for one group of >= 2, written against torch as verl does."""
    t = torch.tensor(r, dtype=torch.float64)
    return ((t - t.mean()) / (torch.std(t) + eps)).numpy()


def test_known_group():
    adv, zero = group_advantages([1.0, 0.0, 0.0, 1.0])
    assert not zero
    std = np.std([1, 0, 0, 1], ddof=1)
    np.testing.assert_allclose(adv, np.array([0.5, -0.5, -0.5, 0.5]) / (std + 1e-6))


@given(rewards_st)
def test_matches_verl_formula_or_is_zero(r):
    adv, zero = group_advantages(r)
    if len(set(r)) < 2:
        assert zero and np.all(adv == 0.0)
    else:
        assert not zero
        np.testing.assert_allclose(adv, verl_formula(r), rtol=1e-12, atol=1e-12)


def test_single_rollout_group_is_zero():
    adv, zero = group_advantages([1.0])
    assert zero and adv.tolist() == [0.0]


@given(rewards_st.filter(lambda r: len(r) >= 2), st.data())
def test_subset_scope_normalises_over_kept(r, data):
    kept = data.draw(st.lists(st.integers(0, len(r) - 1), min_size=1, unique=True))
    adv, zero = group_advantages(r, scope="subset", kept=kept)
    outside = [j for j in range(len(r)) if j not in kept]
    assert np.all(adv[outside] == 0.0)
    sub = [r[j] for j in kept]
    if len(set(sub)) < 2:
        assert zero and np.all(adv == 0.0)
    else:
        np.testing.assert_allclose(adv[kept], verl_formula(sub), rtol=1e-12)
        assert abs(adv[kept].sum()) < 1e-9


def test_group_scope_with_kept_masks_but_keeps_group_stats():
    r = [1.0, 1.0, 1.0, 0.0]
    full, _ = group_advantages(r)
    masked, zero = group_advantages(r, scope="group", kept=[2, 3])
    assert not zero
    assert masked[0] == 0.0 and masked[1] == 0.0
    np.testing.assert_allclose(masked[2:], full[2:])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rewards": []}, "non-empty"),
        ({"rewards": [1.0, float("nan")]}, "finite"),
        ({"rewards": [[1.0, 0.0]]}, "1-D"),
        ({"rewards": [1.0, 0.0], "scope": "batch"}, "scope"),
        ({"rewards": [1.0, 0.0], "scope": "subset"}, "kept"),
        ({"rewards": [1.0, 0.0], "kept": [2]}, "out of range"),
        ({"rewards": [1.0, 0.0], "kept": [1, 1]}, "distinct"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        group_advantages(**kwargs)


def test_group_types_and_fractions():
    assert group_type([1, 1]) == "all_correct"
    assert group_type([0, 0]) == "all_wrong"
    assert group_type([0, 1]) == "mixed"
    f = group_type_fractions([[1, 1], [0, 0], [0, 1], [1, 0]])
    assert f == {"all_correct": 0.25, "all_wrong": 0.25, "mixed": 0.5}
    assert all(np.isnan(v) for v in group_type_fractions([]).values())


@pytest.mark.parametrize(
    "successes, group_sum",
    [(1, math.sqrt(2)), (2, 2.160247), (3, 0.966092), (4, 0.0), (6, -2.160247), (7, -math.sqrt(2))],
)
def test_downsampled_advantages_sum_to_zero_only_with_subset_scope(successes, group_sum):
    # n = 8, m = 4, max-variance subset. With scope "group" the kept advantages are normalised by all 8
    # rewards and do not sum to 0: 1 success keeps rewards (1, 0, 0, 0); mean 1/8, unbiased std
    # sqrt(1/8) = 0.35355; kept sum (7/8 - 3 * 1/8) / 0.35355 = sqrt(2): a net push on the kept rows'
    # likelihood that vanilla GRPO (sum over all n = 0) does not have. Scope "subset" sums to 0.
    rewards = [1.0] * successes + [0.0] * (8 - successes)
    kept = max_variance_subset(rewards, 4)
    group, _ = group_advantages(rewards, "group", kept)
    subset, _ = group_advantages(rewards, "subset", kept)
    assert group.sum() == pytest.approx(group_sum, abs=1e-5)
    assert subset.sum() == pytest.approx(0.0, abs=1e-9)
    assert group_advantages(rewards, "group")[0].sum() == pytest.approx(0.0, abs=1e-9)  # vanilla
