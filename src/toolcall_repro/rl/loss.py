"""Clipped policy-gradient loss (DAPO clip-higher, dual-clip) and token-mean aggregation.

Same arithmetic as verl's `compute_policy_loss_vanilla` + `agg_loss` (0.9.1), so the local CPU engine
and the verl engine optimise the same objective; no KL and no entropy term (the paper's settings).
"""

from __future__ import annotations

import torch

from toolcall_repro.rl.loss_modes import LOSS_AGG_MODES

__all__ = ["LOSS_AGG_MODES", "agg_loss", "masked_mean", "policy_loss"]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp_min(1e-8)


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    batch_num_tokens: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Aggregate a (rows, tokens) loss; `batch_num_tokens` is the whole batch's token count when
    the loss is accumulated over micro-batches (so the sum of micro losses is the batch token-mean)."""
    mask = loss_mask.to(loss_mat.dtype)
    if loss_agg_mode == "token-mean":
        denom = mask.sum() if batch_num_tokens is None else batch_num_tokens
        return (loss_mat * mask).sum() / denom
    if loss_agg_mode == "seq-mean-token-mean":
        per_seq = mask.sum(-1)
        seq_losses = (loss_mat * mask).sum(-1) / (per_seq + 1e-8)
        seq_mask = (per_seq > 0).to(loss_mat.dtype)
        return (seq_losses * seq_mask).sum() / seq_mask.sum().clamp_min(1.0)
    raise ValueError(f"loss_agg_mode must be one of {LOSS_AGG_MODES}, got {loss_agg_mode!r}")


def policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_ratio_c: float = 3.0,
    loss_agg_mode: str = "token-mean",
    batch_num_tokens: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate with asymmetric clip range [1-clip_low, 1+clip_high] and dual clip.

    All tensors are (rows, response tokens); `advantages` is the row advantage broadcast over tokens.
    Returns (loss, {"actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"}).
    """
    if clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1, got {clip_ratio_c}")
    mask = response_mask.to(log_prob.dtype)
    neg_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(neg_kl)
    losses1 = -advantages * ratio
    losses2 = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped1 = torch.maximum(losses1, losses2)
    losses3 = -advantages * clip_ratio_c
    clipped2 = torch.minimum(losses3, clipped1)
    # Dual clip bounds the loss of negative-advantage tokens whose ratio exploded.
    pg_losses = torch.where(advantages < 0, clipped2, clipped1)
    loss = agg_loss(pg_losses, mask, loss_agg_mode, batch_num_tokens)
    with torch.no_grad():
        metrics = {
            "actor/pg_clipfrac": masked_mean(torch.gt(losses2, losses1).to(mask.dtype), mask).item(),
            "actor/ppo_kl": masked_mean(-neg_kl, mask).item(),
            "actor/pg_clipfrac_lower": masked_mean(
                (torch.gt(clipped1, losses3) & (advantages < 0)).to(mask.dtype), mask
            ).item(),
        }
    return loss, metrics
