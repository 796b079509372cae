"""`Table`: a result table as numbers (CSV) and as text (Markdown, standalone HTML), with its sources.

Every row made from our results names its `source` file (which carries the protocol card) and the
`manifest` of the job that wrote it; quoted rows say so in `source`. Pure: strings out, no files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

import pandas as pd


@dataclass
class Table:
    name: str  # file stem under tables/
    title: str
    frame: pd.DataFrame  # machine-readable: numbers, plus source/manifest columns
    display: pd.DataFrame  # formatted for reading
    notes: list[str] = field(default_factory=list)

    def csv(self) -> str:
        return self.frame.to_csv(index=False)

    def _with_refs(self) -> tuple[pd.DataFrame, dict[tuple[str, str | None], int]]:
        refs = _source_refs(self.frame)
        display = self.display.copy()
        if refs:
            display.insert(0, "ref", [_ref_label(refs, r) for r in self.frame.to_dict("records")])
        return display, refs

    def markdown(self) -> str:
        display, refs = self._with_refs()
        lines = [f"# {self.title}", "", markdown_table(display), ""]
        lines += [f"- {n}" for n in self.notes]
        if refs:
            lines += ["", SOURCES_HEADING, ""]
            lines += [f"{i}. `{s}` (manifest: `{m or 'none found'}`)" for (s, m), i in refs.items()]
        return "\n".join(lines).rstrip() + "\n"

    def html(self) -> str:
        """A standalone page (the Snakemake report shows HTML results inline; CSV only as a download)."""
        display, refs = self._with_refs()
        parts = [f"<h2>{escape(self.title)}</h2>", display.to_html(index=False, na_rep="")]
        parts += [f"<p>{escape(n)}</p>" for n in self.notes]
        if refs:
            items = "".join(
                f"<li><code>{escape(s)}</code> (manifest: <code>{escape(m or 'none found')}</code>)</li>"
                for (s, m), i in refs.items()
            )
            parts.append(f"<p>{escape(SOURCES_HEADING)}</p><ol>{items}</ol>")
        return (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(self.title)}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(parts)}</body></html>\n"
        )


SOURCES_HEADING = "Sources (score summaries carry the protocol card; manifests record the job):"
_CSS = (
    "body{font-family:sans-serif;font-size:13px;margin:1em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}"
    "code{font-size:12px}"
)
SOURCE_COLUMNS = ("source", "source_base", "source_rl")


def _source_refs(frame: pd.DataFrame) -> dict[tuple[str, str | None], int]:
    refs: dict[tuple[str, str | None], int] = {}
    if not any(c in frame.columns for c in SOURCE_COLUMNS):
        return refs
    for row in frame.to_dict("records"):
        for s, m in _row_sources(row):
            refs.setdefault((s, m), len(refs) + 1)
    return refs


def _row_sources(row: Mapping) -> list[tuple[str, str | None]]:
    pairs = [(row.get("source"), row.get("manifest"))]
    pairs += [(row.get(f"source_{s}"), row.get(f"manifest_{s}")) for s in ("base", "rl")]
    return [
        (s, None if is_missing(m) else m)
        for s, m in pairs
        if isinstance(s, str) and not s.startswith("quoted")
    ]


def _ref_label(refs: Mapping, row: Mapping) -> str:
    if str(row.get("source", "")).startswith("quoted"):
        return "quoted"
    return ",".join(str(refs[p]) for p in _row_sources(row)) or "-"


def markdown_table(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *body]) if len(df.columns) else "(no columns)"


def is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_pm(mean: object, std: object = None, digits: int = 1) -> str:
    """'22.7 ± 0.9', '22.7' without a spread, 'n/a' without a value."""
    if is_missing(mean):
        return "n/a"
    if is_missing(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def percent_scale(values: Sequence[float]) -> float:
    """100 when the accuracies are fractions in [0, 1] (bfcl-eval's convention), else 1."""
    finite = [abs(v) for v in values if not is_missing(v)]
    return 100.0 if finite and max(finite) <= 1.0 else 1.0
