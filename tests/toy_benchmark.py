"""A small benchmark registered from the test tree (tests/test_benchmarks.py, tests/analysis/test_benchmarks.py,
tests/workflow/test_benchmark_dag.py): this module, its config entry (evaluate.benchmarks.toy: {module:
toy_benchmark, models, protocols}) and its @register line are all it takes for the DAG, the tables and the
scorecard to grow by it.

Its score: whether the model folder holds a file per seed (a stand-in; the point is the wiring).
"""

from __future__ import annotations

import json
import os

import pandas as pd

from toolcall_repro.analysis import claims
from toolcall_repro.analysis.tabular import Table
from toolcall_repro.benchmarks import Benchmark, register

TABLE = "toy_accuracy"


def toy_mean(test, table: Table, scores: pd.DataFrame) -> claims.Evidence:
    """The claim's statistic: the mean accuracy over the table's rows, its range as the interval."""
    values = [float(v) for v in table.frame["accuracy"]]
    return claims.Evidence(
        sum(values) / len(values), min(values), max(values), len(values), "points", "toy accuracy"
    )


@register("toy")
class Toy(Benchmark):
    """One score_toy job a (model, protocol): accuracy over its seeds (the job sheet's score_benchmark row)."""

    stage_module = __name__
    statistics = {"toy_mean": toy_mean}
    claims = (
        {
            "id": "toy_accuracy",
            "finding": "The toy benchmark scores above zero",
            "source": "the test tree",
            "paper": "none (a wiring check)",
            "test": {
                "kind": "threshold",
                "statistic": "toy_mean",
                "above": -1.0,
                "tables": {"paper_scale": TABLE, "pipeline_check": TABLE},
            },
        },
    )

    def tables(self, frames, cfg, pairs) -> list[Table]:
        scores = frames["summary"]
        rows = [
            {"model": r["model"], "protocol": r["protocol"], "accuracy": r["mean"], "source": r["source"],
             "manifest": r["manifest"]}  # fmt: skip
            for _, r in scores[scores["metric"] == "accuracy"].iterrows()
        ]
        frame = pd.DataFrame(rows, columns=["model", "protocol", "accuracy", "source", "manifest"])
        return [Table(TABLE, "Toy benchmark: accuracy", frame, frame[["model", "protocol", "accuracy"]])]


def score_toy(j) -> None:
    """The score_toy job: config {benchmark, protocol, model}, seeds.eval."""
    seeds = list(j.seeds["eval"])
    per_seed = [1.0 if os.path.exists(j.path("model")) else 0.0 for _ in seeds]
    summary = {"card": j.config["protocol"], "seeds": seeds,
               "metrics": {"accuracy": {"mean": sum(per_seed) / len(per_seed), "std": 0.0, "per_seed": per_seed}}}  # fmt: skip
    with open(j.out("summary"), "w") as f:
        json.dump(summary, f)
