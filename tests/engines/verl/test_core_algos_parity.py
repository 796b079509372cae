"""Our RL core computes what verl's `core_algos` computes, on the same tensors.

GRPO advantages (`compute_grpo_outcome_advantage`: unbiased std, +1e-6, zero-variance groups give 0
and still count in the token-mean), the clipped loss with clip-higher and dual clip
(`compute_policy_loss_vanilla`) and its token-mean aggregation as the FSDP workers run it: per
micro-batch and per data-parallel rank, normalised by the global mini-batch token count.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

import torch  # noqa: E402
from _verl_helpers import run_config  # noqa: E402
from verl.trainer.ppo.core_algos import (  # noqa: E402
    agg_loss,
    compute_grpo_outcome_advantage,
    compute_policy_loss_vanilla,
)
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

from toolcall_repro.engines.verl import hydra  # noqa: E402
from toolcall_repro.engines.verl.main import compose_config  # noqa: E402
from toolcall_repro.rl import group_advantages  # noqa: E402
from toolcall_repro.rl.loss import agg_loss as our_agg_loss  # noqa: E402
from toolcall_repro.rl.loss import policy_loss  # noqa: E402


def grpo_inputs(seed, groups=6, n=8, length=10):
    rng = np.random.default_rng(seed)
    rewards = rng.choice([0.0, 0.5, 1.0], size=(groups, n))
    rewards[0] = 1.0  # an all-correct group
    rewards[1] = 0.0  # an all-wrong group
    lengths = rng.integers(1, length + 1, size=groups * n)
    mask = torch.tensor(np.arange(length)[None, :] < lengths[:, None], dtype=torch.float32)
    token_rewards = torch.zeros(groups * n, length)
    token_rewards[torch.arange(groups * n), torch.tensor(lengths - 1)] = torch.tensor(
        rewards.ravel(), dtype=torch.float32
    )
    index = np.repeat([f"u{g}" for g in range(groups)], n).astype(object)
    return rewards, token_rewards, mask, index


@pytest.mark.parametrize("seed", range(5))
def test_group_advantages_equal_verl_grpo(seed):
    rewards, token_rewards, mask, index = grpo_inputs(seed)
    verl_adv, _ = compute_grpo_outcome_advantage(token_rewards, mask, index)
    ours = np.concatenate([group_advantages(r)[0] for r in rewards])
    expected = torch.tensor(ours, dtype=torch.float32)[:, None] * mask
    torch.testing.assert_close(verl_adv, expected, rtol=1e-5, atol=1e-6)
    assert torch.all(verl_adv[: 2 * rewards.shape[1]] == 0)  # zero-variance groups: exactly 0


@pytest.fixture(scope="module")
def actor_config(tmp_path_factory):
    paths = hydra.RunPaths.under(str(tmp_path_factory.mktemp("run")), "/unused")
    cfg = compose_config(hydra.build_overrides(run_config(), {"gpus_per_node": 4}, paths, seed=0))
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.2, 0.28, 3.0)
    return actor


def loss_inputs(seed, rows=16, length=12):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, length, generator=g) * 3
    # ratios from ~0.2 to ~5: inside and outside both clip ranges and beyond the dual clip at 3
    log_prob = (old + torch.empty(rows, length).uniform_(-1.6, 1.6, generator=g)).requires_grad_(True)
    adv = torch.randn(rows, 1, generator=g).expand(rows, length).contiguous()
    adv[:3] = 0.0  # zero-variance rows still count in the token-mean denominator
    lengths = torch.randint(1, length + 1, (rows,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    return old, log_prob, adv, mask


@pytest.mark.parametrize("seed", range(4))
def test_policy_loss_equals_verl_vanilla_with_clip_higher(actor_config, seed):
    old, log_prob, adv, mask = loss_inputs(seed)
    actor_config.global_batch_info.clear()
    theirs, their_metrics = compute_policy_loss_vanilla(
        old, log_prob, adv, mask, "token-mean", config=actor_config
    )
    (their_grad,) = torch.autograd.grad(theirs, log_prob)
    ours, our_metrics = policy_loss(old, log_prob, adv, mask, clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0)
    (our_grad,) = torch.autograd.grad(ours, log_prob)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(our_grad, their_grad, rtol=1e-6, atol=1e-8)
    for key in ("actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"):
        assert our_metrics[key] == pytest.approx(their_metrics[key], rel=1e-5, abs=1e-7)
    assert their_metrics["actor/pg_clipfrac_lower"] > 0  # the dual clip was exercised


@pytest.mark.parametrize("dp_size", [1, 2])
def test_token_mean_over_micro_batches_and_ranks_is_the_batch_token_mean(actor_config, dp_size):
    old, log_prob, adv, mask = loss_inputs(11)
    total_tokens = mask.sum()
    whole, _ = policy_loss(old, log_prob, adv, mask)
    # verl: each rank's micro-batch loss is sum / global tokens * dp_size; DDP then averages the ranks
    parts = torch.arange(16).chunk(2 * dp_size)
    actor_config.global_batch_info.update(
        {"dp_size": dp_size, "batch_num_tokens": total_tokens, "global_batch_size": 16}
    )
    theirs = (
        sum(
            compute_policy_loss_vanilla(
                old[p], log_prob[p], adv[p], mask[p], "token-mean", config=actor_config
            )[0]
            for p in parts
        )
        / dp_size
    )
    actor_config.global_batch_info.clear()
    ours = sum(
        policy_loss(old[p], log_prob[p], adv[p], mask[p], batch_num_tokens=total_tokens)[0] for p in parts
    )
    torch.testing.assert_close(theirs, whole, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(ours, whole, rtol=1e-6, atol=1e-7)


def test_seq_mean_token_mean_aggregation_matches():
    _, _, _, mask = loss_inputs(3)
    losses = torch.randn(mask.shape, generator=torch.Generator().manual_seed(4))
    for mode in ("token-mean", "seq-mean-token-mean"):
        torch.testing.assert_close(
            our_agg_loss(losses, mask, mode), agg_loss(losses, mask, mode), rtol=1e-6, atol=1e-7
        )
