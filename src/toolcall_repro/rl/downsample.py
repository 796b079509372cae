"""Rollout down-sampling: keep m of a group's n rollouts for the policy update (PODS, arXiv 2504.13818).

`max_variance_subset` is the paper's rule; `random_subset` and `max_reward_subset` are baselines.
Every selector returns sorted indices into the group, so the kept rollouts keep their order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from toolcall_repro.rl.advantage import as_rewards


def _check_m(m: int, n: int) -> None:
    if not isinstance(m, (int, np.integer)) or isinstance(m, bool):
        raise TypeError(f"m must be an int, got {m!r}")
    if not 1 <= m <= n:
        raise ValueError(f"m must be in [1, n={n}], got {m}")


def max_variance_subset(rewards: Sequence[float] | np.ndarray, m: int) -> list[int]:
    """Indices of the m rollouts of largest reward variance.

    Sort by reward; among the subsets made of the i highest and m-i lowest (i = 0..m) keep the one
    of largest variance, which is the maximum over all m-subsets. Ties in reward are broken by the
    index (stable sort); ties in variance by the smallest i, so the result is deterministic.
    """
    r = as_rewards(rewards)
    n = r.size
    _check_m(m, n)
    order = np.argsort(r, kind="stable")
    best_i, best_var = 0, -1.0
    for i in range(m + 1):
        chosen = np.concatenate([order[: m - i], order[n - i :]])
        var = float(np.var(r[chosen]))
        # A relative tolerance so that float noise between equal multisets never decides the tie.
        if var > best_var + 1e-12 * max(1.0, abs(best_var)):
            best_i, best_var = i, var
    chosen = np.concatenate([order[: m - best_i], order[n - best_i :]])
    return sorted(int(j) for j in chosen)


def max_reward_subset(rewards: Sequence[float] | np.ndarray, m: int) -> list[int]:
    """Indices of the m highest rewards (ties broken by the smaller index)."""
    r = as_rewards(rewards)
    _check_m(m, r.size)
    order = np.lexsort((np.arange(r.size), -r))
    return sorted(int(j) for j in order[:m])


def random_subset(rewards: Sequence[float] | np.ndarray, m: int, rng: np.random.Generator) -> list[int]:
    """m indices drawn uniformly without replacement with the caller's seeded generator."""
    r = as_rewards(rewards)
    _check_m(m, r.size)
    if not isinstance(rng, np.random.Generator):
        raise TypeError("random_subset needs a numpy Generator (np.random.default_rng(seed))")
    return sorted(int(j) for j in rng.choice(r.size, size=m, replace=False))


# The selections by their config name (train.variants.<v>.downsample.selection): the one list of them. The
# config check (runconfig.run_problems), the engines and the error below read its keys.
SELECTORS: dict[str, Callable[..., list[int]]] = {
    "max_variance": lambda rewards, m, rng: max_variance_subset(rewards, m),
    "random": random_subset,
    "max_reward": lambda rewards, m, rng: max_reward_subset(rewards, m),
}
SELECTIONS = tuple(SELECTORS)


def select_subset(
    selection: str,
    rewards: Sequence[float] | np.ndarray,
    m: int,
    rng: np.random.Generator | None = None,
) -> list[int]:
    """Dispatch by the config name (SELECTORS)."""
    if selection not in SELECTORS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    return SELECTORS[selection](rewards, m, rng)
