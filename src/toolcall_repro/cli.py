"""`toolcall-repro` command: the user-facing entry points that are not Snakemake jobs."""

from __future__ import annotations

import argparse
import importlib
import sys

from toolcall_repro import archive, compare

# Subcommands that parse their own arguments (add_help=False above): the module and function each runs.
PASS_THROUGH = {
    "plan": ("toolcall_repro.plan", "main"),
    "digests": ("toolcall_repro.digests", "main"),
    "stage": ("toolcall_repro.stage", "stage_main"),
    "evidence-unit": ("toolcall_repro.analysis.evidence_units", "main"),
    "lock-hub": ("toolcall_repro.hub_lock", "main"),
    "leases": ("toolcall_repro.lease", "main"),
    "timing": ("toolcall_repro.timing", "main"),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="toolcall-repro")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser(
        "verify", help="re-check every checksum in a results archive; names any file that differs"
    )
    v.add_argument("archive")
    sub.add_parser(
        "plan",
        help="the paper DAG's GPU jobs: resources, steps, rollouts and rows per step (a dry-run)",
        add_help=False,
    )
    sub.add_parser(
        "digests",
        help="science digests of a results tree (timing dropped): --check a reference (first differing "
        "stage in DAG order, and why) or --write one",
        add_help=False,
    )
    sub.add_parser(
        "stage",
        help="run one stage by hand, as its rule runs it (the same function): NAME --in/--out NAME=PATH "
        "--config ... --seed NAME=INT --option NAME=VALUE; NAME --describe says what it reads",
        add_help=False,
    )
    sub.add_parser(
        "timing",
        help="where a run's time goes: per rule, wall and CPU seconds of its jobs (from the benchmark files)",
        add_help=False,
    )
    e = sub.add_parser(
        "evidence-rebuild",
        help="rebuild the efficiency report (tables, figures, index.md) from its analysis inputs alone: "
        "results/<run>/efficiency/inputs or the committed docs/evidence/inputs",
    )
    e.add_argument(
        "inputs",
        help="a folder with runs.json, metrics.jsonl.gz, curves.jsonl.gz, or one with units/ (docs/evidence: "
        "the seed-pair units, pre-registration 3)",
    )
    e.add_argument("out", help="the folder to write tables/, figures/ and index.md into")
    e.add_argument(
        "--configfile",
        default="config/evidence.yaml",
        help="with units/: the config whose train.efficiency plans the units (interim until all are in)",
    )
    sub.add_parser(
        "evidence-unit",
        help="the efficiency evidence's seed-pair units: next (the first pre-registered one not committed), "
        "finish (check one and put it under docs/evidence/units), check (make evidence-unit runs them)",
        add_help=False,
    )
    sub.add_parser(
        "lock-hub",
        help="resolve every hub revision a config names to a commit sha (network) and write "
        "<config>.hub-lock.yaml beside it, the overlay the paper run takes after its config",
        add_help=False,
    )
    sub.add_parser(
        "leases",
        help="the jobs that still write under results/ (one line each; exit 1 while any does); --wait SECONDS "
        "polls until none does",
        add_help=False,
    )
    c = sub.add_parser(
        "compare",
        help="compare run A (old) with run B (new), each a results tree or an archive: config changes, "
        "rerun jobs, changed table cells with their protocol cards (Markdown)",
    )
    c.add_argument("a", help="results/<run_id> or an archive (.tar.gz)")
    c.add_argument("b", help="results/<run_id> or an archive (.tar.gz)")
    c.add_argument("--out", help="also write the Markdown report to this file")
    args, rest = p.parse_known_args(argv)
    if args.cmd in PASS_THROUGH:  # subcommands with their own argument parser: module, function
        module, function = PASS_THROUGH[args.cmd]
        return getattr(importlib.import_module(module), function)(rest)
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.cmd == "verify":
        return archive.main(["verify", args.archive])
    if args.cmd == "evidence-rebuild":
        from pathlib import Path

        from toolcall_repro.analysis import evidence_units
        from toolcall_repro.analysis.efficiency_report import rebuild

        try:
            if (Path(args.inputs) / "units").is_dir():
                config = evidence_units.load_config([args.configfile])
                plan = evidence_units.planned(config["train"].get("efficiency") or {})
                written = evidence_units.rebuild_units(args.inputs, args.out, plan)
            else:
                written = rebuild(args.inputs, args.out)
        except (FileNotFoundError, ValueError) as err:
            print(err, file=sys.stderr)
            return 2
        print(f"{len(written)} files under {args.out}")
        return 0
    if args.cmd == "compare":
        try:
            text = compare.write_comparison(args.a, args.b, args.out)
        except (FileNotFoundError, ValueError) as e:
            print(e, file=sys.stderr)
            return 2
        sys.stdout.write(text)
        return 0
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
