"""The filter report: per-source normalisation counts and malformed rows, every filter step's counts and
drop reasons, the turn-count definitions, the held-out split and the format-study subsets, merged into
``data/filter_report.json`` plus a small Markdown table.

    toolcall-repro stage report_filter --in steps=single_turn.json --in steps=multi_turn.json ... \
        --in normalise=xlam.report.json ... --in rejects=xlam.rejects.jsonl ... \
        --out json=filter_report.json --out md=filter_report.md
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from toolcall_repro.io import atomic_write_json, atomic_write_text, iter_jsonl


def rejects_summary(path: str | Path) -> dict:
    """Count a rejects file by reason; the source is named by the file (`<source>.rejects.jsonl`)."""
    reasons: Counter = Counter()
    source = Path(path).name.split(".")[0]
    for _, row in iter_jsonl(path):
        source = row.get("source", source)
        reasons[row["reason"]] += 1
    return {
        "source": source,
        "file": str(path),
        "rows_rejected": sum(reasons.values()),
        "rejects": dict(sorted(reasons.items())),
    }


def merge_reports(steps: list[dict], normalise: list[dict], rejects: list[dict]) -> dict:
    sources: dict[str, dict] = {}
    for r in normalise:
        sources[r["source"]] = {
            k: r[k]
            for k in ("rows", "samples", "rows_rejected", "rejects", "raw_sha256", "num_turns")
            if k in r
        }
    for r in rejects:
        entry = sources.setdefault(r["source"], {})
        if entry.get("rejects", r["rejects"]) != r["rejects"]:
            raise ValueError(f"{r['file']} disagrees with the normalisation report of {r['source']}")
        entry.update(rows_rejected=r["rows_rejected"], rejects=r["rejects"], rejects_file=r["file"])
    chains = {}
    for r in steps:
        if r.get("setting") in chains:
            raise ValueError(f"two step reports for {r.get('setting')!r}")
        chains[r.get("setting", f"step{len(chains)}")] = r
    malformed = Counter()
    for entry in sources.values():
        malformed.update(entry.get("rejects", {}))
    return {
        "sources": dict(sorted(sources.items())),
        "malformed_rows": {"total": sum(malformed.values()), "by_reason": dict(sorted(malformed.items()))},
        "chains": chains,
    }


def _fmt(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"


def to_markdown(report: dict) -> str:
    lines = [
        "# Filter report",
        "",
        "## Sources",
        "",
        "| source | rows | samples | rejected rows | why rejected |",
        "|---|---:|---:|---:|---|",
    ]
    for name, s in report["sources"].items():
        lines.append(
            f"| {name} | {s.get('rows', '?')} | {s.get('samples', '?')} | {s.get('rows_rejected', 0)} | {_fmt(s.get('rejects', {}))} |"
        )
    for name, chain in report["chains"].items():
        lines += ["", f"## {name}", ""]
        if "steps" in chain:
            lines += ["| step | in | out | dropped |", "|---|---:|---:|---|"]
            lines += [
                f"| {s['step']} | {s['in']} | {s['out']} | {_fmt(s['dropped'])} |" for s in chain["steps"]
            ]
        if "turn_counting" in chain:
            tc = chain["turn_counting"]
            lo, hi = tc["range"]
            lines += [
                "",
                f"Turn counting (filter uses `{tc['definition']}`):",
                "",
                f"| definition | in {lo}-{hi} |",
                "|---|---:|",
            ]
            lines += [f"| {k} | {v['in_range']} |" for k, v in tc["definitions"].items()]
        if "train" in chain:
            t = chain["train"]
            lines += [
                "",
                f"Train: {t['size']} (target {t['target']}, reached: {t['reached']}); held-out: {chain['heldout']['size']}.",
            ]
        if "size" in chain and "single_turn" in chain:
            lines.append(
                f"Matched subsets: {chain['size']} single-turn vs {chain['size']} multi-turn (requested {chain['requested']})."
            )
    return "\n".join(lines) + "\n"


def write_report(steps: list[str], normalise: list[str], rejects: list[str], out_json: str, out_md: str) -> dict:
    load = lambda p: json.loads(Path(p).read_text())  # noqa: E731
    report = merge_reports(
        [load(p) for p in steps], [load(p) for p in normalise], [rejects_summary(p) for p in rejects]
    )
    atomic_write_json(out_json, report)
    atomic_write_text(out_md, to_markdown(report))
    print(to_markdown(report))
    return report


def report_filter(j) -> None:
    """The report_filter job (toolcall_repro.job): every chain's report, normalise reports, rejects."""
    write_report(j.paths("steps"), j.paths("normalise"), j.paths("rejects"), j.out("json"), j.out("md"))
