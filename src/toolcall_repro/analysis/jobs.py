"""The analysis jobs: tables, figures and the efficiency report of a run.

With `inputs` (the rule's declared inputs) nothing else under the run directory is read; the figures
take the speedup table as make_tables wrote it instead of building it again.

The rules run `make_tables`, `make_figures` and `report_efficiency` through the job entry (toolcall_repro.job):
the inputs are the rule's own, the output folder that of its `index`, the config the rule's subtree.
"""

from __future__ import annotations

import os

import matplotlib


def _headless() -> None:
    matplotlib.use("Agg")  # headless: no display on cluster nodes


def units(config: dict, run_dir: str) -> dict:
    """The units to read: the rule passes them in its config; a whole pipeline config (a person at the
    command line) gives them through the experiment object."""
    if "scores" in config or "runs" in config:
        return config
    if "run_id" in config:
        from toolcall_repro.experiment import Experiment

        return Experiment(config, run_dir).analysis_units()
    raise ValueError("config: give the pipeline config (config/config.yaml and overlays) or the rule's units")


def _results(run_dir: str, config: dict, inputs: list[str] | None):
    """The run's results and the analysis config: the units (the rule's, or the experiment's for a pipeline
    config) over the config, so that every table takes its studies from the units."""
    from toolcall_repro.analysis import report
    from toolcall_repro.benchmarks import run_benchmarks

    run_benchmarks(config)  # a benchmark from outside the package registers (evaluate.benchmarks.<name>.module)
    found = units(config, run_dir)
    return report.RunResults(run_dir, found, inputs), {**config, **found}


def tables(run_dir: str, out_dir: str, config: dict, inputs: list[str] | None = None) -> list:
    """Every table of the run from its result files (only `inputs` when given); returns what was written."""
    _headless()
    from toolcall_repro.analysis import report

    res, config = _results(run_dir, config, inputs)
    built = report.build_tables(res, config)
    card = report.build_scorecard(res, built, config)
    written = report.write_tables(built, out_dir, card)
    for t in [card, *built]:
        print(report.table_summary_line(t))
    return written


def figures(
    run_dir: str, out_dir: str, config: dict, inputs: list[str] | None = None, speedup: str | None = None
) -> list:
    """Every figure of the run; the speedup table is read from make_tables's CSV when given."""
    _headless()
    import pandas as pd

    from toolcall_repro.analysis import report

    speedups = pd.read_csv(speedup) if speedup else None
    res, config = _results(run_dir, config, inputs)
    return report.write_figures(report.build_figures(res, config, speedups), out_dir)


def efficiency(run_dir: str, out_dir: str, config: dict, inputs: list[str] | None = None) -> list:
    """The efficiency experiment's own report (target `efficiency`); a whole pipeline config gives its
    runs (train.efficiency.runs) through the experiment object."""
    _headless()
    if "run_id" in config:
        from toolcall_repro.experiment import Experiment

        exp = Experiment(config, run_dir)
        config = {
            "efficiency": config["train"].get("efficiency") or {},
            "variants": config["train"]["variants"],
            "runs": [r.unit() for r in exp.efficiency_runs()],
        }
    from toolcall_repro.analysis.efficiency_report import write_report

    return write_report(run_dir, out_dir, config, inputs=inputs)


def _job_paths(j) -> tuple[str, str, list[str] | None]:
    """run_dir, the output folder (that of output.index) and every declared input of an analysis job; a job
    with no input (run by hand) reads the whole run tree."""
    run_dir = j.option("run_dir")
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"no run directory {run_dir}")
    return run_dir, os.path.dirname(j.out("index")), list(j.files.get("input", [])) or None


def make_tables(j) -> None:
    """Every table of a run and the claims scorecard: option run_dir, output.index (its folder gets csv/,
    md/, html/); config the units to read (the rule's) or a whole pipeline config; input.results the
    only files read (none: the whole run tree)."""
    run_dir, out_dir, inputs = _job_paths(j)
    written = tables(run_dir, out_dir, j.config, inputs)
    print(f"wrote {len(written)} files to {out_dir}")


def make_figures(j) -> None:
    """Every figure of a run, as make_tables (output.index's folder gets png/ and pdf/); input.tables_csv,
    make_tables's csv folder, gives the speedup table (without it, the speedups are computed here)."""
    run_dir, out_dir, inputs = _job_paths(j)
    csv = j.paths("tables_csv")
    written = figures(run_dir, out_dir, j.config, inputs, os.path.join(csv[0], "speedup.csv") if csv else None)
    print(f"wrote {len(written)} files to {out_dir}")


def report_efficiency(j) -> None:
    """The efficiency experiment's report (target `efficiency`), as make_tables: config the rule's
    {efficiency, variants, runs} or a whole pipeline config."""
    run_dir, out_dir, inputs = _job_paths(j)
    written = efficiency(run_dir, out_dir, j.config, inputs)
    print(f"wrote {len(written)} files to {out_dir}")
