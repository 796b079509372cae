"""The reserve: a seeded, per-conversation decision shared by the warm start and the filters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolcall_repro.data.schema import Sample
from toolcall_repro.data.split import conversation_key, is_reserved, partition, reserve_score

from .test_data_filters import TOOLS, sample


def test_fraction_is_respected_on_many_samples():
    samples = [sample(i) for i in range(4000)]
    share = sum(is_reserved(s, 0.25, 0) for s in samples) / len(samples)
    assert 0.22 < share < 0.28
    assert not any(is_reserved(s, 0.0, 0) for s in samples[:500])


def test_seed_changes_the_reserve_and_a_larger_fraction_only_adds():
    samples = [sample(i, "multi_turn", turns=2) for i in range(400)]
    a = {s.id for s in samples if is_reserved(s, 0.3, 0)}
    assert a == {s.id for s in samples if is_reserved(s, 0.3, 0)}
    assert a != {s.id for s in samples if is_reserved(s, 0.3, 1)}
    assert a <= {s.id for s in samples if is_reserved(s, 0.5, 0)}


def test_prefixes_of_one_conversation_fall_on_the_same_side():
    # ToolACE-style: answer k of a dialogue is in the history of answer k+1
    history = [{"role": "user", "content": "book a table and then a taxi"}]
    first = Sample.build(
        id="toolace:7:0",
        source="toolace",
        setting="single_turn",
        tools=TOOLS,
        messages=history,
        ground_truth=[{"name": "a", "arguments": {}}],
    )
    history = [*history, {"role": "assistant", "content": "", "tool_calls": [{"name": "a", "arguments": {}}]}]
    second = Sample.build(
        id="toolace:7:1",
        source="toolace",
        setting="single_turn",
        tools=TOOLS,
        messages=[*history, {"role": "tool", "content": "ok"}],
        ground_truth=[{"name": "b", "arguments": {}}],
    )
    assert conversation_key(first) == conversation_key(second)
    for seed in range(20):
        assert is_reserved(first, 0.5, seed) == is_reserved(second, 0.5, seed)
    assert conversation_key(sample(1)) != conversation_key(sample(2))


def test_golden_score_pins_the_hash():
    # changing the hash would silently move samples between the warm start and the held-out splits
    assert round(reserve_score("xlam:0", 0), 12) == 0.631545446867
    assert reserve_score("xlam:0", 1) != reserve_score("xlam:0", 0)


@given(st.lists(st.integers(0, 10_000), unique=True, max_size=40), st.floats(0.0, 0.99), st.integers(0, 5))
def test_partition_is_a_split_in_input_order(nums, fraction, seed):
    samples = [sample(n) for n in nums]
    open_, reserved = partition(samples, fraction, seed)
    assert sorted(s.id for s in open_ + reserved) == sorted(s.id for s in samples)
    assert all(is_reserved(s, fraction, seed) for s in reserved)
    assert not any(is_reserved(s, fraction, seed) for s in open_)
    order = {s.id: k for k, s in enumerate(samples)}
    assert [order[s.id] for s in reserved] == sorted(order[s.id] for s in reserved)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2.0])
def test_fraction_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="reserve fraction"):
        is_reserved(sample(0), bad, 0)
