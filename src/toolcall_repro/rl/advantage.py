"""GRPO group advantages and group types (all-correct / all-wrong / mixed).

A_j = (r_j - mean(r)) / (std(r) + eps) with the unbiased std, as verl's
`compute_grpo_outcome_advantage`; a zero-variance group gives exactly 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

SCOPES = ("group", "subset")
GROUP_TYPES = ("all_correct", "all_wrong", "mixed")


def as_rewards(rewards: Sequence[float] | np.ndarray) -> np.ndarray:
    """Validate one group's rewards: a non-empty, finite 1-D float array."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"rewards must be a non-empty 1-D sequence, got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError(f"rewards must be finite, got {r.tolist()}")
    return r


def _as_kept(kept: Iterable[int] | None, n: int) -> np.ndarray | None:
    if kept is None:
        return None
    idx = np.asarray(list(kept), dtype=np.int64)
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError("kept must be a non-empty list of indices")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"kept indices {idx.tolist()} out of range for a group of {n}")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"kept indices must be distinct, got {idx.tolist()}")
    return idx


def group_advantages(
    rewards: Sequence[float] | np.ndarray,
    scope: str = "group",
    kept: Iterable[int] | None = None,
    eps: float = 1e-6,
) -> tuple[np.ndarray, bool]:
    """Advantages for one group of n rollouts of the same prompt.

    scope="group": mean and std over all n rewards (verl's GRPO).
    scope="subset": mean and std over rewards[kept] only (the down-sampled m; needs `kept`).
    When `kept` is given, positions outside it get advantage 0 (they are not back-propagated).
    Returns (advantages[n], zero_variance), zero_variance being True when the statistics set has a
    single value (or one element), in which case every advantage is exactly 0.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    r = as_rewards(rewards)
    idx = _as_kept(kept, r.size)
    if scope == "subset" and idx is None:
        raise ValueError("scope='subset' needs the kept indices")
    stats = r[idx] if scope == "subset" else r
    adv = np.zeros_like(r)
    # One element or all equal: no signal; the exact 0 avoids (r - mean) rounding noise / eps.
    if stats.size < 2 or np.all(stats == stats[0]):
        return adv, True
    adv = (r - stats.mean()) / (stats.std(ddof=1) + eps)
    if idx is not None:
        mask = np.zeros(r.size, dtype=bool)
        mask[idx] = True
        adv[~mask] = 0.0
    return adv, False


def group_type(rewards: Sequence[float] | np.ndarray, correct: float = 1.0) -> str:
    """`all_correct` if every reward reaches `correct`, `all_wrong` if none does, else `mixed`."""
    r = as_rewards(rewards)
    hits = r >= correct
    if hits.all():
        return "all_correct"
    if not hits.any():
        return "all_wrong"
    return "mixed"


def group_type_fractions(groups: Iterable[Sequence[float]], correct: float = 1.0) -> dict[str, float]:
    """Fractions of all-correct / all-wrong / mixed groups; NaN for an empty batch (nothing observed)."""
    counts = dict.fromkeys(GROUP_TYPES, 0)
    for rewards in groups:
        counts[group_type(rewards, correct)] += 1
    total = sum(counts.values())
    if total == 0:
        return dict.fromkeys(GROUP_TYPES, float("nan"))
    return {t: counts[t] / total for t in GROUP_TYPES}
