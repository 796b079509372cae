"""Where a run's time goes: per rule, the wall and CPU seconds of its jobs, read from the benchmark file
Snakemake writes for every job (any `.tsv` under `results/<run>/benchmarks/`: columns `s` = wall seconds,
`cpu_time` = CPU seconds of the job's processes, `max_rss` = peak resident MB). Each file names its own
job: the workflow profile (`workflow/profiles/default`) sets Snakemake's `benchmark-extended`, whose
columns `rule_name` and `wildcards` say which rule and job measured it; nothing is read from the path.

The workflow prints this table when a run finishes (`onsuccess` in the Snakefile) and keeps it as
`results/<run>/timing.{md,csv}`; `toolcall-repro timing RUN` prints it for any results tree. It covers the
jobs whose outputs the tree holds now (a job not rerun keeps its last benchmark), not the archive step,
whose benchmark sits beside the archive. The CPU seconds are the budget: wall seconds of jobs that ran
side by side on the run's cores overlap, so their sum is more than the run's elapsed time.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import pandas as pd

from toolcall_repro.analysis.tabular import markdown_table
from toolcall_repro.io import atomic_write_text

COLUMNS = ["rule", "jobs", "wall_s", "cpu_s", "cpu_share", "wall_s_per_job", "max_rss_mb"]


EXTENDED = "rule_name"  # a column of Snakemake's extended benchmark format (--benchmark-extended)


def job_times(run_dir: str | Path) -> pd.DataFrame:
    """One row per job: rule and key (the file's `rule_name` and `wildcards`, '' for a job without
    wildcards), wall_s, cpu_s, max_rss_mb. A file that is not a Snakemake benchmark (missing columns), or
    one written without the extended columns, is an error naming it."""
    root = Path(run_dir) / "benchmarks"
    rows = []
    for path in sorted(root.rglob("*.tsv")):
        # the extended columns hold the job's params as text: no quoting, tabs separate
        frame = pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, dtype={"wildcards": str})
        missing = {"s", "cpu_time", "max_rss"} - set(frame.columns)
        if missing or frame.empty:
            raise ValueError(f"{path}: not a Snakemake benchmark file (missing {sorted(missing) or 'rows'})")
        if EXTENDED not in frame.columns:
            raise ValueError(
                f"{path}: a benchmark without the column {EXTENDED!r} (written without Snakemake's "
                "benchmark-extended, which the workflow profile workflow/profiles/default sets: was the run "
                "started with --workflow-profile none?)"
            )
        last = frame.iloc[-1]  # `benchmark` repeats: the last row is the job's latest measurement
        wildcards = str(last.get("wildcards", ""))
        rows.append({
            "rule": str(last[EXTENDED]), "key": "" if wildcards in ("{}", "-", "nan") else wildcards,
            "wall_s": float(last["s"]), "cpu_s": float(last["cpu_time"]), "max_rss_mb": float(last["max_rss"]),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["rule", "key", "wall_s", "cpu_s", "max_rss_mb"])


def rule_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per rule, most CPU first: jobs, summed wall and CPU seconds, the rule's share of all CPU seconds,
    mean wall seconds per job, peak RSS; then a `total` row."""
    if jobs.empty:
        return pd.DataFrame(columns=COLUMNS)
    g = jobs.groupby("rule", sort=False)
    table = pd.DataFrame({
        "jobs": g.size(), "wall_s": g["wall_s"].sum(), "cpu_s": g["cpu_s"].sum(), "max_rss_mb": g["max_rss_mb"].max(),
    }).reset_index()  # fmt: skip
    total_cpu = float(table["cpu_s"].sum())
    table["cpu_share"] = table["cpu_s"] / total_cpu if total_cpu > 0 else 0.0
    table["wall_s_per_job"] = table["wall_s"] / table["jobs"]
    table = table.sort_values(["cpu_s", "rule"], ascending=[False, True], kind="stable")
    total = {
        "rule": "total", "jobs": int(table["jobs"].sum()), "wall_s": float(table["wall_s"].sum()),
        "cpu_s": total_cpu, "cpu_share": 1.0 if total_cpu > 0 else 0.0,
        "wall_s_per_job": float(table["wall_s"].sum()) / max(int(table["jobs"].sum()), 1),
        "max_rss_mb": float(table["max_rss_mb"].max()),
    }  # fmt: skip
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)[COLUMNS]


def to_markdown(table: pd.DataFrame, run_dir: str | Path) -> str:
    shown = table.assign(
        wall_s=table["wall_s"].map(lambda v: f"{v:.0f}"),
        cpu_s=table["cpu_s"].map(lambda v: f"{v:.0f}"),
        cpu_share=table["cpu_share"].map(lambda v: f"{100 * v:.1f}%"),
        wall_s_per_job=table["wall_s_per_job"].map(lambda v: f"{v:.1f}"),
        max_rss_mb=table["max_rss_mb"].map(lambda v: f"{v:.0f}"),
    )
    head = (
        f"Where the time of {run_dir} goes (per rule, from its jobs' benchmark files; wall seconds of jobs "
        "that ran side by side overlap, CPU seconds are the budget):"
    )
    return head + "\n\n" + markdown_table(shown) + "\n"


def write_timing(run_dir: str | Path) -> str:
    """Write `timing.csv` and `timing.md` into the run's tree; return the Markdown."""
    run_dir = Path(run_dir)
    table = rule_table(job_times(run_dir))
    text = to_markdown(table, run_dir)
    atomic_write_text(run_dir / "timing.csv", table.to_csv(index=False, float_format="%.3f"))
    atomic_write_text(run_dir / "timing.md", text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="toolcall-repro timing", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="results/<run_id>")
    p.add_argument("--write", action="store_true", help="also write timing.{md,csv} into the run's tree")
    args = p.parse_args(argv)
    if not (Path(args.run_dir) / "benchmarks").is_dir():
        print(f"timing: {args.run_dir} has no benchmarks/ (not a results tree, or no job has run)", file=sys.stderr)
        return 2
    try:
        text = write_timing(args.run_dir) if args.write else to_markdown(rule_table(job_times(args.run_dir)), args.run_dir)
    except ValueError as e:
        print(f"timing: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
