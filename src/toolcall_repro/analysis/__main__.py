"""CLI: `python -m toolcall_repro.analysis {tables,figures,efficiency} --run-dir results/<run> --out-dir DIR
[--inputs FILE ...] [--speedup tables/csv/speedup.csv] [--config JSON|FILE]`.

With `--inputs` (the rule's declared inputs) nothing else under the run directory is read; the figures
take the speedup table as make_tables wrote it (`--speedup`) instead of building it again."""

from __future__ import annotations

import argparse
import sys

import matplotlib

from toolcall_repro.configarg import load_config_arg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.analysis")
    p.add_argument("what", choices=["tables", "figures", "efficiency"])
    p.add_argument("--run-dir", required=True, help="results/<run_id>")
    p.add_argument("--out-dir", required=True, help="where the CSV/MD or PNG/PDF files and index.md go")
    p.add_argument(
        "--inputs", nargs="*", default=None, help="the only files to read (a rule's declared inputs)"
    )
    p.add_argument("--speedup", default=None, help="figures: the speedup table's CSV (make_tables's output)")
    p.add_argument(
        "--config", default="{}", help="the analysis config subtree: inline JSON or a JSON/YAML file"
    )
    args = p.parse_args(argv)
    matplotlib.use("Agg")  # headless: no display on cluster nodes
    from toolcall_repro.analysis import report

    cfg = load_config_arg(args.config)
    if args.what == "efficiency":  # the efficiency experiment's own report (target `efficiency`)
        from toolcall_repro.analysis.efficiency_report import write_report

        written = write_report(args.run_dir, args.out_dir, cfg, inputs=args.inputs)
        print(f"wrote {len(written)} files to {args.out_dir}")
        return 0
    res = report.RunResults(args.run_dir, args.inputs)
    if args.what == "tables":
        built = report.build_tables(res, cfg)
        written = report.write_tables(built, args.out_dir)
        for t in built:
            print(report.table_summary_line(t))
    else:
        import pandas as pd

        speedups = pd.read_csv(args.speedup) if args.speedup else None
        written = report.write_figures(report.build_figures(res, cfg, speedups), args.out_dir)
    print(f"wrote {len(written)} files to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
