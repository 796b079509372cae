"""Down-sampling and reward bookkeeping on real verl `DataProto` batches."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

import torch  # noqa: E402
from _verl_helpers import step_batch  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage  # noqa: E402

from toolcall_repro.engines.verl.batch import (  # noqa: E402
    downsample_plan,
    groups_by_uid,
    reason_fractions,
    rewards_by_sample,
    sequence_rewards,
    subset_with_advantages,
    token_counts,
)

GROUPS = {
    "a": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0],  # mixed: 6 right, 2 wrong
    "b": [1.0] * 8,  # all-correct
    "c": [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],  # one success
}


def test_rewards_by_sample_reads_groups_by_uid():
    batch = step_batch(GROUPS)
    assert rewards_by_sample(batch) == GROUPS
    assert list(groups_by_uid(batch)) == ["uid-0", "uid-1", "uid-2"]
    assert reason_fractions(batch)["reward/reason/correct"] == pytest.approx(15 / 24)


def test_max_variance_keeps_half_successes_half_failures():
    batch = step_batch(GROUPS)
    rows, adv = downsample_plan(
        sequence_rewards(batch), groups_by_uid(batch), 4, "max_variance", "group", None
    )
    rewards = sequence_rewards(batch)[rows]
    assert len(rows) == 12 and rows == sorted(rows)
    assert sorted(rewards[:4]) == [0.0, 0.0, 1.0, 1.0]  # group a: 2 + 2
    assert list(rewards[4:8]) == [1.0] * 4  # group b has nothing else
    assert sorted(rewards[8:]) == [0.0, 0.0, 0.0, 1.0]  # group c: its one success + 3 failures
    # scope=group keeps verl's advantages (normalised over all 8) for the kept rows
    row_adv = batch.batch["advantages"].sum(-1) / batch.batch["response_mask"].sum(-1)
    np.testing.assert_allclose(adv, row_adv[rows].numpy(), rtol=1e-5, atol=1e-6)


def test_subset_scope_equals_verl_grpo_on_the_kept_rows():
    batch = step_batch(GROUPS, seed=1)
    rows, adv = downsample_plan(
        sequence_rewards(batch), groups_by_uid(batch), 4, "max_variance", "subset", None
    )
    sub = batch.select_idxs(rows)
    expected, _ = compute_grpo_outcome_advantage(
        sub.batch["token_level_rewards"], sub.batch["response_mask"], sub.non_tensor_batch["uid"]
    )
    out = subset_with_advantages(batch, rows, adv)
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.batch["returns"], expected, rtol=1e-5, atol=1e-6)


def test_subset_has_its_own_meta_info_and_leaves_the_batch_alone():
    batch = step_batch(GROUPS)
    before = batch.batch["advantages"].clone()
    rows, adv = downsample_plan(
        sequence_rewards(batch), groups_by_uid(batch), 2, "max_variance", "subset", None
    )
    sub = subset_with_advantages(batch, rows, adv)
    sub.meta_info["multi_turn"] = False  # what verl's _update_actor does to the batch it gets
    assert "multi_turn" not in batch.meta_info
    assert sub.meta_info["global_token_num"] == [batch.meta_info["global_token_num"][r] for r in rows]
    assert len(batch.meta_info["global_token_num"]) == 24
    torch.testing.assert_close(batch.batch["advantages"], before)
    assert token_counts(sub)["rows"] == 6
    assert token_counts(sub)["total_tokens"] == int(batch.batch["attention_mask"][rows].sum())


def test_random_selection_is_seeded():
    batch = step_batch(GROUPS)
    plan = [
        downsample_plan(
            sequence_rewards(batch), groups_by_uid(batch), 4, "random", "group", np.random.default_rng(s)
        )[0]
        for s in (7, 7, 8)
    ]
    assert plan[0] == plan[1] and plan[0] != plan[2]


def test_errors_name_the_problem():
    batch = step_batch(GROUPS)
    with pytest.raises(ValueError, match="fewer than m=9"):
        downsample_plan(sequence_rewards(batch), groups_by_uid(batch), 9, "max_variance", "group", None)
    batch.non_tensor_batch["extra_info"][3] = {"index": 0}
    with pytest.raises(ValueError, match="exactly one"):
        rewards_by_sample(batch)
    del batch.non_tensor_batch["uid"]
    with pytest.raises(KeyError, match="uid"):
        groups_by_uid(batch)
