import pytest
import torch

from toolcall_repro.rl.loss import agg_loss, policy_loss


def reference(old, new, adv, mask, lo=0.2, hi=0.28, c=3.0):
    """Element-wise restatement of the PPO dual-clip objective, token by token."""
    total, count = 0.0, 0
    for i in range(old.shape[0]):
        for t in range(old.shape[1]):
            if not mask[i, t]:
                continue
            ratio = float(torch.exp(torch.clamp(new[i, t] - old[i, t], -20, 20)))
            a = float(adv[i, t])
            loss = max(-a * ratio, -a * min(max(ratio, 1 - lo), 1 + hi))
            if a < 0:
                loss = min(loss, -a * c)
            total += loss
            count += 1
    return total / count


def test_policy_loss_matches_token_by_token_reference():
    g = torch.Generator().manual_seed(0)
    old = torch.randn(5, 7, generator=g, dtype=torch.float64)
    new = old + 1.5 * torch.randn(5, 7, generator=g, dtype=torch.float64)
    adv = torch.randn(5, 1, generator=g, dtype=torch.float64).expand(5, 7)
    mask = torch.rand(5, 7, generator=g) > 0.3
    loss, metrics = policy_loss(old, new, adv, mask)
    assert float(loss) == pytest.approx(reference(old, new, adv, mask), rel=1e-10)
    assert 0.0 < metrics["actor/pg_clipfrac"] < 1.0


def test_gradient_is_zero_for_zero_advantage_and_clipped_ratios():
    old = torch.zeros(2, 3, dtype=torch.float64)
    new = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[0.0], [2.0]], dtype=torch.float64).expand(2, 3)
    loss, _ = policy_loss(old, new, adv, torch.ones(2, 3, dtype=torch.bool))
    loss.backward()
    # row 0: zero advantage; row 1: ratio e > 1.28 with positive advantage is clipped
    assert torch.all(new.grad == 0)


def test_micro_batches_sum_to_the_batch_token_mean():
    g = torch.Generator().manual_seed(1)
    loss_mat = torch.randn(6, 4, generator=g)
    mask = torch.rand(6, 4, generator=g) > 0.4
    whole = agg_loss(loss_mat, mask)
    n = mask.sum()
    parts = agg_loss(loss_mat[:2], mask[:2], batch_num_tokens=n) + agg_loss(
        loss_mat[2:], mask[2:], batch_num_tokens=n
    )
    assert float(parts) == pytest.approx(float(whole), rel=1e-6)
    with pytest.raises(ValueError, match="loss_agg_mode"):
        agg_loss(loss_mat, mask, "sum")
