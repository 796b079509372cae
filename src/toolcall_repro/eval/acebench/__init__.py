"""ACEBench (English, all 17 categories): data, scoring as ACEBench defines it, agent worlds, runner.

Public API: `load_category`, `score_category`, `summarise`, `ground_truth_outputs`, `CategoryScore`;
the jobs (download, synthesize, score, summarise) are in jobs.py.
"""

from toolcall_repro.eval.acebench.data import (
    CATEGORIES,
    GROUPS,
    default_data_dir,
    load_category,
    resolve_categories,
)
from toolcall_repro.eval.acebench.scoring import (
    CategoryScore,
    ground_truth_outputs,
    score_category,
    summarise,
)

__all__ = [
    "CATEGORIES",
    "GROUPS",
    "CategoryScore",
    "default_data_dir",
    "ground_truth_outputs",
    "load_category",
    "resolve_categories",
    "score_category",
    "summarise",
]
