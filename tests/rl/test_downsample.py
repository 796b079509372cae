import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcall_repro.rl import max_reward_subset, max_variance_subset, random_subset, select_subset

values = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(-5, 5, allow_nan=False).map(lambda x: round(x, 2)))


@st.composite
def group_and_m(draw):
    r = draw(st.lists(values, min_size=1, max_size=10))
    m = draw(st.integers(1, len(r)))
    return r, m


@settings(max_examples=300, deadline=None)
@given(group_and_m())
def test_max_variance_reaches_brute_force_maximum(case):
    r, m = case
    chosen = max_variance_subset(r, m)
    assert len(chosen) == m == len(set(chosen)) and chosen == sorted(chosen)
    best = max(np.var([r[j] for j in c]) for c in itertools.combinations(range(len(r)), m))
    assert np.var([r[j] for j in chosen]) == pytest.approx(best, rel=1e-9, abs=1e-12)


@given(group_and_m())
def test_max_variance_is_deterministic_and_order_free_in_value(case):
    r, m = case
    assert max_variance_subset(r, m) == max_variance_subset(list(r), m)
    perm = list(reversed(range(len(r))))
    a = sorted(r[j] for j in max_variance_subset(r, m))
    b = sorted([r[p] for p in perm][j] for j in max_variance_subset([r[p] for p in perm], m))
    assert np.var(a) == pytest.approx(np.var(b), abs=1e-12)


def test_binary_rewards_give_a_balanced_half():
    r = [1, 1, 1, 1, 1, 0, 0, 0]
    chosen = max_variance_subset(r, 4)
    assert sorted(r[j] for j in chosen) == [0, 0, 1, 1]
    # few failures: all of them are kept
    r = [1, 1, 1, 1, 1, 1, 1, 0]
    assert 7 in max_variance_subset(r, 4)


def test_max_reward_and_random():
    r = [0.1, 0.9, 0.5, 0.9]
    assert max_reward_subset(r, 2) == [1, 3]
    a = random_subset(r, 2, np.random.default_rng(3))
    b = random_subset(r, 2, np.random.default_rng(3))
    assert a == b and len(set(a)) == 2
    draws = {tuple(random_subset(r, 2, np.random.default_rng(s))) for s in range(30)}
    assert len(draws) > 1


def test_select_subset_dispatch_and_errors():
    r = [0.0, 1.0, 1.0, 0.0]
    assert select_subset("max_variance", r, 2) == max_variance_subset(r, 2)
    assert select_subset("max_reward", r, 2) == [1, 2]
    assert len(select_subset("random", r, 3, np.random.default_rng(0))) == 3
    with pytest.raises(ValueError, match="selection"):
        select_subset("best", r, 2)
    with pytest.raises(ValueError, match="m must be"):
        max_variance_subset(r, 5)
    with pytest.raises(ValueError, match="m must be"):
        max_variance_subset(r, 0)
    with pytest.raises(TypeError, match="Generator"):
        random_subset(r, 2, None)
