"""Normalise one raw source file: samples to parquet, malformed rows to a rejects file, counts to a report.

    toolcall-repro stage normalise_source --config '{"source": "xlam"}' --in raw=data/raw/xlam.jsonl \
        --out samples=data/normalised/xlam.parquet --out rejects=data/normalised/xlam.rejects.jsonl \
        --out report=data/reports/normalise_xlam.json
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from toolcall_repro.data.schema import iter_jsonl, write_samples
from toolcall_repro.data.sources import LoadResult, load_rows
from toolcall_repro.io import atomic_write_json, write_jsonl
from toolcall_repro.provenance import sha256_file


def normalise_report(result: LoadResult, raw_path: str | Path, out_path: str | Path) -> dict:
    samples = result.samples
    return {
        "source": result.source,
        "raw": str(raw_path),
        "raw_sha256": sha256_file(raw_path),
        "rows": result.rows,
        "rows_rejected": len(result.rejects),
        "rows_kept": result.rows - len(result.rejects),
        "samples": len(samples),
        "rejects": result.reject_counts(),
        "settings": dict(sorted(Counter(s.setting for s in samples).items())),
        "num_turns": {str(k): v for k, v in sorted(Counter(s.num_turns for s in samples).items())},
        "ground_truth_calls": {
            str(k): v for k, v in sorted(Counter(len(s.ground_truth_list) for s in samples).items())
        },
        "out": str(out_path),
        "out_sha256": sha256_file(out_path),
    }


def normalise_file(
    source: str, raw: str | Path, out: str | Path, rejects: str | Path, report: str | Path
) -> dict:
    result = load_rows(source, iter_jsonl(raw))
    write_samples(result.samples, out)
    write_jsonl(result.rejects, rejects)
    summary = normalise_report(result, raw, out)
    atomic_write_json(report, summary)
    return summary


def normalise_source(j) -> None:
    """The normalise_source job (toolcall_repro.job)."""
    s = normalise_file(j.config["source"], j.path("raw"), j.out("samples"), j.out("rejects"), j.out("report"))
    print(f"{s['source']}: {s['rows']} rows -> {s['samples']} samples, {s['rows_rejected']} rejected {s['rejects']}")
