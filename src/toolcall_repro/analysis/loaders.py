"""Read a run's result files (docs/architecture.md) into DataFrames: the I/O edge of the analysis.

Every row keeps `source` (the file it came from, relative to the run directory; score summaries carry
the protocol card) and `manifest` (the manifest of the job that wrote it, named by the file's unit), so
any number in a table can be traced back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from toolcall_repro import io

SETTINGS = ("single_turn", "multi_turn")
CARD_FIELDS = ("system_prompt", "template", "thinking")


class ResultFileError(ValueError):
    """A result file that does not follow its contract; the message names the file and the problem."""


def read_json(path: Path) -> dict:
    try:
        obj = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ResultFileError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(obj, dict):
        raise ResultFileError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


def read_jsonl(path: Path) -> pd.DataFrame:
    """One JSON object a line; a bad line is an error naming file and line (never skipped)."""
    return pd.DataFrame(io.read_jsonl(path, error=ResultFileError))


# --- what may be read, and where each file's record is -------------------------------------------------


class Declared:
    """The files this reader may read, and the manifest each result file cites.

    `inputs` (a rule's declared input files) limits every read to them: the loaders below keep only
    declared result files and manifests (`visible`), so a stale file beside them never reaches a table.
    Without `inputs` (a run directory read as a whole) everything is visible. A file's manifest is its
    unit's (toolcall_repro.units: Score.unit, TrainingRun.unit, the filter report's), never found by
    matching paths; it is cited when it is visible and exists.
    """

    def __init__(self, run_dir: Path, inputs: Iterable[str | Path] | None = None):
        self.run_dir = Path(run_dir)
        self.declared = None if inputs is None else {Path(p).resolve() for p in inputs}

    def visible(self, paths: Iterable[Path]) -> list[Path]:
        """The paths among `paths` this reader may read: the declared inputs, or all without them."""
        if self.declared is None:
            return list(paths)
        return [p for p in paths if Path(p).resolve() in self.declared]

    def _rel(self, path: str | Path) -> str:
        return Path(path).resolve().relative_to(self.run_dir.resolve()).as_posix()

    def trace(self, file: Path, manifest: str | Path | None) -> dict[str, str | None]:
        """{"source": the file, "manifest": its unit's manifest, or None when not readable}, both relative
        to the run directory."""
        cited = manifest is not None and Path(manifest).is_file() and bool(self.visible([Path(manifest)]))
        return {"source": self._rel(file), "manifest": self._rel(manifest) if cited else None}


# --- evaluation summaries ---------------------------------------------------------------------------


def card_field(card: dict, name: str) -> object:
    """A protocol field from a card: card['protocol'][name] (protocol_card), else top level; an {"id"} -> id."""
    inner = card.get("protocol")
    value = inner[name] if isinstance(inner, dict) and name in inner else card.get(name)
    return value["id"] if isinstance(value, dict) and "id" in value else value


def _seeds_of(summary: dict, metric: dict) -> list:
    return list(summary.get("seeds") or range(len(metric.get("per_seed") or [])))


def _units(units: Iterable[Mapping], index: Declared, **match) -> list[tuple[Mapping, Path]]:
    """The units (toolcall_repro.units: Score.unit, TrainingRun.unit) that match, with their file,
    among the files this reader may read. A unit's meaning is its own fields, never its path."""
    chosen = [u for u in units if all(u.get(k) == v for k, v in match.items())]
    paths = [Path(u.get("path") or Path(u["dir"]) / "summary.json") for u in chosen]
    visible = {p.resolve() for p in index.visible(paths)}
    found = [(u, p) for u, p in zip(chosen, paths, strict=True) if p.resolve() in visible]
    return sorted(found, key=lambda pair: pair[1])  # one order whatever the config's


def load_scores(
    units: Iterable[Mapping], index: Declared, benchmark: str, kind: str = "summary"
) -> pd.DataFrame:
    """The score files the experiment names for a benchmark (kind: summary or variance) -> one row per
    (model, protocol, metric).

    Columns: benchmark, model, protocol, metric, mean, std, n_seeds, per_seed, seeds, card, the card's
    protocol fields (system_prompt, template, thinking), source, manifest.
    """
    rows = []
    for unit, path in _units(units, index, benchmark=benchmark, kind=kind):
        summary = read_json(path)
        if "metrics" not in summary or not isinstance(summary["metrics"], dict):
            raise ResultFileError(f"{path}: no 'metrics' mapping")
        card = summary.get("card") or {}
        for metric, value in summary["metrics"].items():
            if not isinstance(value, dict) or "mean" not in value:
                raise ResultFileError(f"{path}: metric {metric!r} lacks 'mean'")
            per_seed = [float("nan") if v is None else float(v) for v in value.get("per_seed") or []]
            rows.append(
                {
                    "benchmark": benchmark,
                    "model": unit["model"],
                    "protocol": unit["protocol"],
                    "metric": metric,
                    "mean": _num(value.get("mean")),
                    "std": _num(value.get("std")),
                    "n_seeds": len(per_seed),
                    "per_seed": per_seed,
                    "seeds": _seeds_of(summary, value),
                    "card": card,
                    **{f: card_field(card, f) for f in CARD_FIELDS},
                    **index.trace(path, unit.get("manifest")),
                }
            )
    return pd.DataFrame(rows, columns=_SCORE_COLUMNS)


_SCORE_COLUMNS = [
    "benchmark",
    "model",
    "protocol",
    "metric",
    "mean",
    "std",
    "n_seeds",
    "per_seed",
    "seeds",
    "card",
    *CARD_FIELDS,
    "source",
    "manifest",
]


def _num(v: object) -> float:
    return float("nan") if v is None else float(v)


def load_general(units: Iterable[Mapping], index: Declared) -> pd.DataFrame:
    """The general-capability summaries the experiment names (toolcall_repro.eval.general) -> one row per
    (model, task, metric)."""
    rows = []
    for unit, path in _units(units, index, benchmark="general"):
        summary = read_json(path)
        if "results" not in summary:
            raise ResultFileError(f"{path}: no 'results' list")
        for r in summary["results"]:
            rows.append(
                {
                    "model": unit["model"],
                    "task": r["task"],
                    "metric": r["metric"],
                    "value": _num(r.get("value")),
                    "stderr": _num(r.get("stderr")),
                    "n_samples": r.get("n_samples"),
                    "task_hash": (summary.get("task_hashes") or {}).get(r["task"]),
                    "num_fewshot": (summary.get("card") or {}).get("num_fewshot"),
                    "card": summary.get("card") or {},
                    **index.trace(path, unit.get("manifest")),
                }
            )
    cols = ["model", "task", "metric", "value", "stderr", "n_samples", "task_hash", "num_fewshot", "card"]
    return pd.DataFrame(rows, columns=[*cols, "source", "manifest"])


# --- data filter report ------------------------------------------------------------------------------


def load_filter_report(unit: Mapping | None, index: Declared) -> pd.DataFrame:
    """The filter report (data/filter_report.json; its unit: Experiment.analysis_units' `filter_report`,
    {path, manifest}) -> one row per (chain, step): in, out and what was dropped why.

    Reads toolcall_repro.data.report's shape ({"sources": {src: {rows, samples, rejects}}, "chains":
    {setting: {"steps": [{step, in, out, dropped: {reason: n}}]}}}); each source's normalisation is a
    step of its own. Also accepts {setting: {"steps": [...]}} and {"steps": [...]}.
    """
    path = Path(unit["path"]) if unit else None
    if path is None or not path.is_file() or not index.visible([path]):
        return pd.DataFrame(columns=["chain", "order", "step", "source", "manifest"])
    report = read_json(path)
    trace = index.trace(path, unit.get("manifest"))
    rows = []
    for name, src in (report.get("sources") or {}).items():
        dropped = src.get("rejects") or {}
        rows.append(
            {
                "chain": f"normalise/{name}",
                "order": 0,
                "step": "normalise",
                "in": src.get("rows"),
                "out": src.get("samples"),
                "dropped": _reasons(dropped),
                **trace,
            }
        )
    chains = report.get("chains") or ({"all": report} if "steps" in report else report)
    for chain, block in chains.items():
        steps = block.get("steps") if isinstance(block, dict) else block
        if not isinstance(steps, list):
            continue  # metadata beside the chains (sources, malformed rows, a seed)
        for order, step in enumerate(steps):
            if not isinstance(step, dict):
                raise ResultFileError(f"{path}: step {order} of {chain!r} is not a mapping")
            name_key = next((k for k in ("step", "name", "stage") if k in step), None)
            if name_key is None:
                raise ResultFileError(f"{path}: step {order} of {chain!r} has no name")
            row = {"chain": chain, "order": order, "step": step[name_key]}
            for k, v in step.items():
                if k != name_key:
                    row[k] = _reasons(v) if isinstance(v, dict) else v
            rows.append({**row, **trace})
    return pd.DataFrame(rows)


def _reasons(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


# --- training runs ---------------------------------------------------------------------------------


@dataclass
class RunRecord:
    """One training run's records as the analysis reads them (its metrics, curve and summary); the run
    itself, as the experiment names it, is a units.TrainingRun."""

    setting: str  # the training set: single_turn, multi_turn, format_single, format_multi
    variant: str
    seed: int
    config: dict
    metrics: pd.DataFrame
    curve: pd.DataFrame
    summary: dict
    trace: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.setting}/{self.variant}/seed{self.seed}"


def load_training_runs(
    run_dir: Path, units: Iterable[Mapping], index: Declared, settings: Iterable[str] = SETTINGS
) -> list[RunRecord]:
    """The training runs the experiment names (units.TrainingRun.unit: dataset, variant, seed, dir), each with
    metrics.jsonl, curve.jsonl and summary.json (all three), for the training sets in `settings`.

    The run's hyper-parameters come from summary['config'] when present, else from the manifest's
    config subtree; its seed from summary['seed'], else the unit's, else the manifest's seeds.
    """
    runs = []
    settings = list(settings)
    chosen = [(u, p) for u, p in _units(units, index) if u["dataset"] in settings]
    for unit, summary_path in sorted(chosen, key=lambda pair: (settings.index(pair[0]["dataset"]), pair[1])):
        folder = summary_path.parent
        missing = [n for n in ("metrics.jsonl", "curve.jsonl", "summary.json") if not (folder / n).is_file()]
        if missing:
            raise ResultFileError(f"{folder}: lacks {missing}")
        summary = read_json(summary_path)
        trace = index.trace(summary_path, unit.get("manifest"))
        manifest = read_json(Path(run_dir) / trace["manifest"]) if trace["manifest"] else {}
        seed = summary.get("seed", unit.get("seed"))
        if seed is None:
            seed = (manifest.get("seeds") or {}).get("train", 0)
        runs.append(
            RunRecord(
                setting=unit["dataset"],
                variant=unit["variant"],
                seed=int(seed),
                config=summary.get("config") or manifest.get("config") or {},
                metrics=read_jsonl(folder / "metrics.jsonl"),
                curve=read_jsonl(folder / "curve.jsonl"),
                summary=summary,
                trace=trace,
            )
        )
    return runs
