"""RL core shared by the local CPU engine and the verl engine: pure functions over numpy / torch."""

from toolcall_repro.rl.advantage import (
    GROUP_TYPES,
    SCOPES,
    group_advantages,
    group_type,
    group_type_fractions,
)
from toolcall_repro.rl.downsample import (
    SELECTIONS,
    SELECTORS,
    max_reward_subset,
    max_variance_subset,
    random_subset,
    select_subset,
)
from toolcall_repro.rl.loss_modes import LOSS_AGG_MODES
from toolcall_repro.rl.metrics import (
    CURVE_KEYS,
    STEP_KEYS,
    TIMING_KEYS,
    TRANSITION_KEYS,
    full_set_reward,
    predicted_speedup,
    predicted_step_ratio,
    step_metrics,
    without_timings,
)
from toolcall_repro.rl.prefilter import SEMANTICS, StreakFilter, filter_problems

__all__ = [
    "CURVE_KEYS",
    "GROUP_TYPES",
    "LOSS_AGG_MODES",
    "SCOPES",
    "SELECTIONS",
    "SELECTORS",
    "SEMANTICS",
    "STEP_KEYS",
    "TIMING_KEYS",
    "TRANSITION_KEYS",
    "StreakFilter",
    "filter_problems",
    "full_set_reward",
    "group_advantages",
    "group_type",
    "group_type_fractions",
    "max_reward_subset",
    "max_variance_subset",
    "random_subset",
    "select_subset",
    "predicted_speedup",
    "predicted_step_ratio",
    "step_metrics",
    "without_timings",
]
