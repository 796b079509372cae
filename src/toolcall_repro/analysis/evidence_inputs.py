"""The efficiency report's analysis inputs as a few compressed files, and the report rebuilt from them alone.

The report (`report_efficiency`) writes what its estimators read, and nothing else, under
`efficiency/inputs/`, then computes every table and figure from those files read back: so the same
files, committed (`docs/evidence/`), rebuild the result byte for byte on any machine with the package
(`toolcall-repro evidence-rebuild INPUTS OUT`), without the run's tree, checkpoints or archive.

- `runs.json`: each run's identity (setting, variant, seed, its hyper-parameters, its summary, the
  manifest it came from with that job's commit and config digest) and the report's own config (margin);
- `metrics.jsonl.gz`: every training step's metrics (costs on both clocks, group types, filter counts),
  one line a step, keyed by run;
- `curves.jsonl.gz`: every checkpoint's held-out accuracy and per-prompt outcomes (greedy, and sampled:
  the fraction of a prompt's samples that were right), keyed by run.

Written by hand: a few lines of json and gzip with a fixed header (no timestamp), so the bytes depend on
the inputs only.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from toolcall_repro.analysis.loaders import RunRecord

__all__ = ["FILES", "export_runs", "load_runs", "read_config"]

FILES = ("runs.json", "metrics.jsonl.gz", "curves.jsonl.gz")
KEY = ("setting", "variant", "seed")


def _records(frame: pd.DataFrame) -> list[dict]:
    """A frame's rows without the cells a line did not have (NaN where another line had the key)."""
    out = []
    for row in frame.to_dict("records"):
        out.append({k: v for k, v in row.items() if not (isinstance(v, float) and v != v)})
    return out


def _gzip_lines(path: Path, lines: Sequence[dict]) -> None:
    text = "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(text.encode())


def _identity(run: RunRecord, run_dir: Path | None) -> dict:
    """Where the run's files came from: its manifest, that job's commit and config digest."""
    manifest = run.trace.get("manifest") if run.trace else None
    out = {"manifest": manifest}
    if manifest and run_dir is not None and (run_dir / manifest).is_file():
        record = json.loads((run_dir / manifest).read_text())
        out.update({k: record.get(k) for k in ("commit", "config_sha256", "rule")})
    return out


def export_runs(
    runs: Sequence[RunRecord],
    out_dir: str | Path,
    report_config: Mapping,
    run_dir: str | Path | None = None,
) -> list[Path]:
    """Write the runs' analysis inputs (FILES) under out_dir; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(run_dir) if run_dir is not None else None
    ordered = sorted(runs, key=lambda r: (r.setting, r.variant, r.seed))
    index = {
        "report_config": dict(report_config),
        "runs": [
            {
                "setting": r.setting,
                "variant": r.variant,
                "seed": r.seed,
                "config": r.config,
                "summary": r.summary,
                "identity": _identity(r, root),
            }
            for r in ordered
        ],
    }
    (out / "runs.json").write_text(json.dumps(index, sort_keys=True, indent=1) + "\n")
    for name, attr in (("metrics.jsonl.gz", "metrics"), ("curves.jsonl.gz", "curve")):
        lines = [
            {**dict(zip(KEY, (r.setting, r.variant, r.seed), strict=True)), **row}
            for r in ordered
            for row in _records(getattr(r, attr))
        ]
        _gzip_lines(out / name, lines)
    return [out / n for n in FILES]


def read_config(in_dir: str | Path) -> dict:
    """The report config the inputs were written with (train.efficiency: the margin)."""
    return json.loads((Path(in_dir) / "runs.json").read_text())["report_config"]


def _read_lines(path: Path) -> dict[tuple, list[dict]]:
    by_run: dict[tuple, list[dict]] = {}
    with gzip.open(path, "rt") as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {n} is not JSON ({e})") from e
            key = tuple(row.pop(k) for k in KEY)
            by_run.setdefault(key, []).append(row)
    return by_run


def load_runs(in_dir: str | Path) -> list[RunRecord]:
    """The training runs as the report reads them, from the files `export_runs` wrote."""
    folder = Path(in_dir)
    missing = [n for n in FILES if not (folder / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: lacks {missing} (written by the efficiency report under inputs/)")
    index = json.loads((folder / "runs.json").read_text())
    metrics = _read_lines(folder / "metrics.jsonl.gz")
    curves = _read_lines(folder / "curves.jsonl.gz")
    runs = []
    for r in index["runs"]:
        key = (r["setting"], r["variant"], r["seed"])
        runs.append(
            RunRecord(
                setting=r["setting"],
                variant=r["variant"],
                seed=int(r["seed"]),
                config=r["config"],
                metrics=pd.DataFrame(metrics.get(key, [])),
                curve=pd.DataFrame(curves.get(key, [])),
                summary=r["summary"],
                trace={"manifest": (r.get("identity") or {}).get("manifest")},
            )
        )
    return runs
