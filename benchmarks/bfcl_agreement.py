"""BFCL harness check at full size: ground truth scores 100% (quirks named), and the official CLI agrees.

    python benchmarks/bfcl_agreement.py --work /tmp/bfcl_agree --out bfcl_agreement.json
    python benchmarks/bfcl_agreement.py --categories multi_turn_base --limit 50 --results RESULT_DIR ...

1. Self-check: every entry's ground truth, written as model output in each format, is scored by our
   harness; anything below 100% that is not a dataset quirk (`GroundTruthQuirk`) is a harness bug.
2. Agreement: a corpus of ground truth plus systematic mistakes is scored by our harness and by
   `bfcl evaluate` in a separate process and project root; every per-entry verdict must match. Edge
   shapes (bare call, code fence, positional arguments, bare names, nested calls, tuples, `9+1`, `<think>` in
   the result, `<tool_call>` without newlines, ...) are scored too;
   the deliberate differences (decode.KNOWN_DIVERGENCES) are listed, any other one fails.
3. Optional: folders written by the generate_bfcl stage (real model outputs: a run's raw/seed<k>) are
   scored both ways too.

Exit status 1 when any check fails. Threads: one (set torch threads to 1; this script uses no torch).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if "BFCL_PROJECT_ROOT" not in os.environ:  # bfcl-eval creates folders there on import
    os.environ["BFCL_PROJECT_ROOT"] = tempfile.mkdtemp(prefix="bfcl_root_agreement_")
    atexit.register(shutil.rmtree, os.environ["BFCL_PROJECT_ROOT"], ignore_errors=True)

# the agreement harness is a test helper (tests/eval/bfcl/agreement_harness.py), not part of the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "eval" / "bfcl"))
import agreement_harness as agreement  # noqa: E402

from toolcall_repro.eval.bfcl import groundtruth  # noqa: E402
from toolcall_repro.eval.bfcl.generate import CARD_FILE  # noqa: E402
from toolcall_repro.eval.bfcl.handler import build_handler, register  # noqa: E402
from toolcall_repro.eval.bfcl.score import load_category, read_results, score_category  # noqa: E402

GT_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)


def self_check(categories: list[str], limit: int, fmt: str) -> dict:
    register("toolcallrepro-selfcheck", "toolcall-repro/selfcheck")
    handler = build_handler("toolcallrepro-selfcheck").bind(output_format=fmt)
    report = {}
    for category in categories:
        prompts, truths = load_category(category)
        n = min(limit, len(prompts)) if limit else len(prompts)
        rows, quirks = [], []
        for i in range(n):
            truth = None if truths is None else truths[i]
            try:
                rows.append(
                    {
                        "id": prompts[i]["id"],
                        "result": groundtruth.ground_truth_output(category, prompts[i], truth, fmt),
                    }
                )
            except groundtruth.GroundTruthQuirk as e:
                quirks.append({"id": prompts[i]["id"], "reason": str(e)})
        scored = score_category(handler, category, rows)
        report[category] = {
            "entries": n,
            "scored": scored["total"],
            "correct": scored["correct"],
            "accuracy_with_quirks": scored["correct"] / n,
            "quirks": quirks,
            "harness_failures": [
                {"id": e["id"], "error_type": e["error_type"], "error": e["error"]}
                for e in scored["entries"]
                if not e["valid"]
            ],
        }
    return report


def generated_agreement(result_dir: Path, work: Path) -> dict:
    card = json.loads((result_dir / CARD_FILE).read_text())
    fmt = card["system_prompt"]["output_format"]
    registry_dir = card["model"]["bfcl_registry_name"].replace("/", "_")
    results = read_results(result_dir / registry_dir)
    ours = agreement.harness_verdicts(results, fmt)
    official = agreement.official_verdicts({fmt: results}, work)
    return {
        "results": str(result_dir),
        "format": fmt,
        "entries": sum(len(r) for r in results.values()),
        "disagreements": agreement.disagreements(ours, official[fmt], results),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--categories", default=",".join(GT_CATEGORIES))
    p.add_argument("--limit", type=int, default=0, help="first N entries per category (0 = all)")
    p.add_argument("--formats", default="python,xml_json")
    p.add_argument("--results", nargs="*", default=[], help="folders written by `... bfcl generate`")
    p.add_argument("--work", required=True, help="scratch folder for the official CLI runs")
    p.add_argument("--out", required=True, help="report JSON")
    args = p.parse_args(argv)
    categories = [c for c in args.categories.split(",") if c]
    formats = [f for f in args.formats.split(",") if f]
    work = Path(args.work)
    report: dict = {"categories": categories, "limit": args.limit or None, "self_check": {}, "agreement": {}}

    start = time.perf_counter()
    for fmt in formats:
        report["self_check"][fmt] = self_check(categories, args.limit, fmt)
    report["timing_s"] = {"self_check": time.perf_counter() - start}

    start = time.perf_counter()
    corpora, quirks = {}, {}
    for fmt in formats:
        corpora[fmt], quirks[fmt] = agreement.corpus(categories, args.limit or None, fmt)
    ours = {fmt: agreement.harness_verdicts(corpora[fmt], fmt) for fmt in formats}
    official = agreement.official_verdicts(corpora, work / "corpus")
    for fmt in formats:
        report["agreement"][fmt] = {
            "entries": sum(len(r) for r in corpora[fmt].values()),
            "skipped_quirks": quirks[fmt],
            "disagreements": agreement.disagreements(ours[fmt], official[fmt], corpora[fmt]),
        }
    edges = {fmt: agreement.edge_corpus(fmt) for fmt in formats}
    edge_official = agreement.official_verdicts(edges, work / "edge")
    for fmt in formats:
        found = agreement.disagreements(
            agreement.harness_verdicts(edges[fmt], fmt), edge_official[fmt], edges[fmt]
        )
        documented = [d for d in found if (fmt, d["variant"]) in agreement.KNOWN_DIVERGENCES]
        report["agreement"][fmt]["edge_cases"] = {
            "variants": {c: list(v) for c, v in agreement.EDGE_VARIANTS[fmt].items()},
            "documented_divergences": [
                {**d, "why": agreement.KNOWN_DIVERGENCES[(fmt, d["variant"])]} for d in documented
            ],
        }
        report["agreement"][fmt]["disagreements"] += [d for d in found if d not in documented]
    report["timing_s"]["agreement"] = time.perf_counter() - start
    report["generated"] = [
        generated_agreement(Path(d), work / f"generated{i}") for i, d in enumerate(args.results)
    ]

    failures = [
        (fmt, cat, len(r["harness_failures"]))
        for fmt, cats in report["self_check"].items()
        for cat, r in cats.items()
        if r["harness_failures"]
    ]
    disagreements = sum(len(a["disagreements"]) for a in report["agreement"].values()) + sum(
        len(g["disagreements"]) for g in report["generated"]
    )
    report["ok"] = not failures and disagreements == 0
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")

    for fmt, cats in report["self_check"].items():
        for cat, r in cats.items():
            print(
                f"self-check {fmt:8s} {cat:26s} {r['correct']}/{r['entries']}"
                f"  quirks={len(r['quirks'])} harness_failures={len(r['harness_failures'])}"
            )
    for fmt, a in report["agreement"].items():
        print(
            f"agreement  {fmt:8s} entries={a['entries']} disagreements={len(a['disagreements'])}"
            f" documented_edge_divergences={len(a['edge_cases']['documented_divergences'])}"
        )
    for g in report["generated"]:
        print(f"generated  {g['results']}: entries={g['entries']} disagreements={len(g['disagreements'])}")
    print(f"timing: {json.dumps(report['timing_s'])}; ok={report['ok']}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
