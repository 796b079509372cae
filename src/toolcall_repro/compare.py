"""Compare two runs (results trees or archives): what changed in config, which jobs reran, which cells moved.

Reads only the record of each run: its job manifests (`manifests/<rule>/<key>.json`: config subtree,
input and output sha256, finish time), its tables (`tables/csv/*.csv`), the score summaries the tables
name as sources (their protocol cards) and `provenance.json`. An archive is read in one streaming pass
over its members, never extracted. `compare_runs` is pure over two loaded runs; `write_comparison` is
the thin function with explicit paths that a rule or the CLI calls.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from toolcall_repro.archive import ARCHIVE_MANIFEST, iter_members
from toolcall_repro.io import atomic_write_text
from toolcall_repro.provenance import config_hash

REF_PREFIXES = ("source", "manifest")  # table columns that name files, not results
MISSING = "(absent)"


@dataclass
class Run:
    label: str  # the path as given
    run_id: str
    manifests: dict[str, dict]  # "<rule>/<key>" -> manifest
    tables: dict[str, list[dict[str, str]]]  # table name -> rows
    summaries: dict[str, dict]  # path in the tree -> a summary.json (cards)
    record: dict | None = None  # provenance.json


def _wanted(rel: str) -> bool:
    p = PurePosixPath(rel)
    return (
        (p.parts[:1] == ("manifests",) and p.suffix == ".json")
        or (p.parts[:2] == ("tables", "csv") and p.suffix == ".csv")
        or p.name == "summary.json"
        or rel in ("provenance.json", ARCHIVE_MANIFEST)
    )


def _tree_members(run_dir: Path) -> Iterator[tuple[str, bytes]]:
    roots = [run_dir / d for d in ("manifests", "tables", "eval", "train")]
    files = [run_dir / "provenance.json"] + [f for r in roots if r.is_dir() for f in sorted(r.rglob("*"))]
    for f in files:
        rel = f.relative_to(run_dir).as_posix()
        if f.is_file() and _wanted(rel):
            yield rel, f.read_bytes()


def load_run(path: str | Path) -> Run:
    """A results tree (a directory) or an archive (a .tar.gz): only the files a comparison reads."""
    path = Path(path)
    if path.is_dir():
        members = _tree_members(path)
    elif path.is_file():
        members = iter_members(path, _wanted)
    else:
        raise FileNotFoundError(f"compare: {path} is neither a results tree nor an archive")
    manifests, tables, summaries, record, info = {}, {}, {}, None, {}
    for rel, data in members:
        p = PurePosixPath(rel)
        if p.parts[0] == "manifests":
            manifests["/".join(p.parts[1:])[: -len(".json")]] = json.loads(data)
        elif p.parts[:2] == ("tables", "csv"):
            tables[p.stem] = list(csv.DictReader(io.StringIO(data.decode())))
        elif rel == "provenance.json":
            record = json.loads(data)
        elif rel == ARCHIVE_MANIFEST:
            info = json.loads(data)
        else:
            try:
                summaries[rel] = json.loads(data)
            except json.JSONDecodeError:
                continue  # not ours to read: a summary.json that is not JSON is the loaders' error
    if not manifests and not tables:
        raise ValueError(
            f"compare: {path} holds no manifests/ and no tables/csv/: not a results tree or archive"
        )
    # The run id as the manifests' paths spell it (results/<run_id>/...): a kept copy may be renamed.
    run_id = ((record or {}).get("config") or {}).get("run_id") or info.get("run_id")
    run_id = run_id or (path.name if path.is_dir() else "?")
    return Run(str(path), run_id, manifests, tables, summaries, record)


# --- jobs ----------------------------------------------------------------------------------------------


def flat_diff(a: object, b: object, prefix: str = "") -> list[tuple[str, object, object]]:
    """(dotted key, old, new) of every leaf that differs; a key on one side only is MISSING on the other."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            key = f"{prefix}.{k}" if prefix else str(k)
            out += (
                flat_diff(a.get(k, MISSING), b.get(k, MISSING), key)
                if k in a and k in b
                else [(key, a.get(k, MISSING), b.get(k, MISSING))]
            )
        return out
    return [] if a == b else [(prefix or "(whole)", a, b)]


def _tree_path(path: str, run_id: str) -> str:
    """A path as a manifest records it (results/<run_id>/..., relative or absolute) -> relative to the tree."""
    marker = f"results/{run_id}/"
    i = path.find(marker)
    if i == 0 or (i > 0 and path[i - 1] == "/"):
        return path[i + len(marker) :]
    return path


def _files(manifest: Mapping, side: str, run_id: str) -> dict[str, str]:
    return {_tree_path(k, run_id): v for k, v in (manifest.get(side) or {}).items()}


@dataclass
class JobChange:
    job: str  # <rule>/<key>
    status: str  # added, removed, rerun, same
    config: list[tuple[str, object, object]] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)  # inputs added, removed or with another sha256
    outputs: list[str] = field(default_factory=list)
    code: tuple[str | None, str | None] | None = None  # commits, when they differ
    finished: tuple[str | None, str | None] = (None, None)  # finished_at in A and in B
    machine: list[tuple[str, object, object]] = field(default_factory=list)  # manifest "machine" facts

    @property
    def cause(self) -> str:
        """What differs in the job's record: its config subtree, inputs, code commit, machine/environment."""
        hits = (("config", self.config), ("inputs", self.inputs), ("code commit", self.code), ("machine", self.machine))
        why = [w for w, hit in hits if hit]
        return ", ".join(why) if why else "nothing recorded (forced, or a file's modification time)"


def compare_jobs(a: Run, b: Run) -> list[JobChange]:
    out = []
    for job in sorted(set(a.manifests) | set(b.manifests)):
        ma, mb = a.manifests.get(job), b.manifests.get(job)
        if ma is None or mb is None:
            out.append(JobChange(job, "added" if ma is None else "removed"))
            continue
        ia, ib = _files(ma, "inputs", a.run_id), _files(mb, "inputs", b.run_id)
        oa, ob = _files(ma, "outputs", a.run_id), _files(mb, "outputs", b.run_id)
        ca, cb = (ma.get("git") or {}).get("commit"), (mb.get("git") or {}).get("commit")
        change = JobChange(
            job,
            "same",
            config=flat_diff(ma.get("config"), mb.get("config")),
            inputs=sorted(k for k in set(ia) | set(ib) if ia.get(k) != ib.get(k)),
            outputs=sorted(k for k in set(oa) | set(ob) if oa.get(k) != ob.get(k)),
            code=(ca, cb) if ca != cb else None,
            finished=(ma.get("finished_at"), mb.get("finished_at")),
            machine=flat_diff(ma.get("machine", MISSING), mb.get("machine", MISSING)),
        )
        if change.outputs or change.finished[0] != change.finished[1]:
            change.status = "rerun"
        out.append(change)
    return out


# --- tables --------------------------------------------------------------------------------------------


def _is_ref(column: str) -> bool:
    return any(column == p or column.startswith(p + "_") for p in REF_PREFIXES)


def _same_value(x: str | None, y: str | None) -> bool:
    if x == y:
        return True
    try:
        fx, fy = float(x), float(y)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return fx == fy or (math.isnan(fx) and math.isnan(fy))


def key_columns(columns: list[str], *tables: list[dict[str, str]]) -> list[str]:
    """The shortest run of leading columns that tells every row apart in each table; [] when none does."""
    for k in range(1, len(columns) + 1):
        cols = columns[:k]
        if all(len({tuple(r.get(c) for c in cols) for r in t}) == len(t) for t in tables):
            return cols
    return []


@dataclass
class CellChange:
    row: str  # the row's key, e.g. "model=base, protocol=default"
    column: str
    old: str
    new: str
    sources: tuple[str | None, str | None]  # the row's source file in A and in B


@dataclass
class TableChange:
    name: str
    status: str  # added, removed, changed, same
    key: list[str] = field(default_factory=list)
    cells: list[CellChange] = field(default_factory=list)
    rows_only_a: list[str] = field(default_factory=list)
    rows_only_b: list[str] = field(default_factory=list)
    columns: tuple[list[str], list[str]] = ([], [])  # columns only in A, only in B
    matched: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (row, source A, B)
    cards: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # rows whose card moved


def compare_table(name: str, ta: list[dict[str, str]], tb: list[dict[str, str]]) -> TableChange:
    ca, cb = list(ta[0]) if ta else [], list(tb[0]) if tb else []
    shared = [c for c in ca if c in cb and not _is_ref(c)]
    key = key_columns(shared, ta, tb)

    def label(i: int, r: Mapping) -> str:
        return ", ".join(f"{c}={r.get(c)}" for c in key) if key else f"row {i + 1}"

    ra = {label(i, r): r for i, r in enumerate(ta)}
    rb = {label(i, r): r for i, r in enumerate(tb)}
    change = TableChange(
        name, "same", key, columns=([c for c in ca if c not in cb], [c for c in cb if c not in ca])
    )
    change.rows_only_a = [k for k in ra if k not in rb]
    change.rows_only_b = [k for k in rb if k not in ra]
    for k, row_a in ra.items():
        row_b = rb.get(k)
        if row_b is None:
            continue
        change.matched.append((k, row_a.get("source") or None, row_b.get("source") or None))
        for c in shared:
            if c not in key and not _same_value(row_a.get(c), row_b.get(c)):
                srcs = (row_a.get("source") or None, row_b.get("source") or None)
                change.cells.append(CellChange(k, c, row_a.get(c, ""), row_b.get(c, ""), srcs))
    if change.cells or change.rows_only_a or change.rows_only_b or any(change.columns):
        change.status = "changed"
    return change


def compare_tables(a: Run, b: Run) -> list[TableChange]:
    out = []
    for name in sorted(set(a.tables) | set(b.tables)):
        if name not in a.tables or name not in b.tables:
            out.append(TableChange(name, "added" if name not in a.tables else "removed"))
        else:
            t = compare_table(name, a.tables[name], b.tables[name])
            # A row can keep its values while the protocol behind it moved (a knob no column shows).
            t.cards = [m for m in t.matched if _card(a, m[1]) != _card(b, m[2])]
            t.status = "changed" if t.cards else t.status
            out.append(t)
    return out


# --- the report ----------------------------------------------------------------------------------------


@dataclass
class Comparison:
    a: Run
    b: Run
    config: list[tuple[str, object, object]]
    jobs: list[JobChange]
    tables: list[TableChange]

    def rerun(self) -> list[JobChange]:
        return [j for j in self.jobs if j.status != "same"]


def compare_runs(a: Run, b: Run) -> Comparison:
    cfg_a, cfg_b = ((r.record or {}).get("config") for r in (a, b))
    config = flat_diff(cfg_a, cfg_b) if cfg_a is not None and cfg_b is not None else []
    return Comparison(a, b, config, compare_jobs(a, b), compare_tables(a, b))


def _v(x: object) -> str:
    text = x if isinstance(x, str) else json.dumps(x, sort_keys=True)
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


def _c(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _card(run: Run, source: str | None) -> dict | str:
    """The protocol card of a table row's source file, or why there is none."""
    if not source:
        return "no source file"
    summary = run.summaries.get(source)
    if summary is None:
        return "source file not in this run"
    return summary.get("card") or "no protocol card in the source file"


def _card_lines(c: Comparison, src_a: str | None, src_b: str | None, cards: dict[str, dict]) -> list[str]:
    """Each card by a short sha256 (`cards` collects them for the report's last section), and the diff."""
    card_a, card_b = _card(c.a, src_a), _card(c.b, src_b)

    def ref(card: dict | str) -> str:
        if not isinstance(card, dict):
            return card
        digest = config_hash(card)[:10]
        cards[digest] = card
        return f"card `{digest}`"

    if src_a == src_b and card_a == card_b:
        return [f"- `{src_a}`: same in A and B: {ref(card_a)}"]
    lines = [f"- `{src_a}` in A: {ref(card_a)}; `{src_b}` in B: {ref(card_b)}"]
    if isinstance(card_a, dict) and isinstance(card_b, dict):
        moved = "; ".join(f"{k}: {_v(o)} -> {_v(n)}" for k, o, n in flat_diff(card_a, card_b))
        lines.append(f"  the cards differ in {moved}")
    return lines


def _run_line(r: Run) -> str:
    rec = r.record or {}
    commit = ((rec.get("git") or {}).get("commit") or "?")[:10]
    cfg = (rec.get("config_sha256") or "?")[:10]
    return f"`{r.label}` (run `{r.run_id}`, code `{commit}`, config `{cfg}`, {len(r.manifests)} jobs)"


def markdown(c: Comparison, max_files: int = 5) -> str:
    lines = ["# Comparison of two runs", "", f"- A: {_run_line(c.a)}", f"- B: {_run_line(c.b)}", ""]
    lines += ["## Config", ""]
    if c.a.record is None or c.b.record is None:
        lines.append("(one side has no provenance.json: per-job configs below)")
    lines += [f"- `{k}`: {_v(old)} -> {_v(new)}" for k, old, new in c.config] or ["No config key changed."]
    rerun = c.rerun()
    lines += ["", "## Jobs", ""]
    counts = {s: sum(j.status == s for j in c.jobs) for s in ("rerun", "added", "removed", "same")}
    lines.append(
        f"{_n(len(c.jobs), 'job')}: {counts['rerun']} rerun, {counts['added']} only in B, "
        f"{counts['removed']} only in A, {counts['same']} unchanged (same manifest: not rerun)."
    )
    if rerun:
        lines += [
            "",
            "| job | status | what differs | config changed | inputs changed | outputs changed | finished (A -> B) |",
            "|---|---|---|---|---|---|---|",
        ]
        for j in rerun:
            cfg = "; ".join(f"{k}: {_v(o)} -> {_v(n)}" for k, o, n in j.config)
            ins = _few(j.inputs, max_files)
            outs = _few(j.outputs, max_files) or ("same bytes" if j.status == "rerun" else "")
            why = j.cause if j.status == "rerun" else ""
            when = " -> ".join(str(t or "") for t in j.finished) if j.status == "rerun" else ""
            lines.append(f"| `{j.job}` | {j.status} | {why} | {cfg} | {ins} | {outs} | {when} |")
    lines += _machine_section(c)
    lines += ["", "## Tables", ""]
    cards: dict[str, dict] = {}  # short sha256 -> protocol card, each shown once at the end
    same = [t.name for t in c.tables if t.status == "same"]
    for t in c.tables:
        if t.status in ("added", "removed"):
            lines += [f"### {t.name}: only in {'B' if t.status == 'added' else 'A'}", ""]
        elif t.status == "changed":
            lines += _table_section(c, t, cards)
    if not c.tables:
        lines.append("Neither run has tables (tables/csv/).")
    else:
        lines.append(f"Unchanged: {', '.join(same)}." if same else "No table is unchanged.")
    if cards:
        lines += ["", "## Protocol cards", ""]
        lines += [f"- `{digest}`: {_v(card)}" for digest, card in cards.items()]
    return "\n".join(lines) + "\n"


def _machine_section(c: Comparison) -> list[str]:
    """The machines and environments the two runs' jobs ran in, where they differ (kernels, CPU, torch
    build, installed packages): a changed number with no config or code change is usually one of these."""
    diffs: dict[tuple[str, str, str], list[str]] = {}
    for j in c.jobs:
        for key, old, new in j.machine:
            diffs.setdefault((key, _v(old), _v(new)), []).append(j.job)
    dist = [(r.record or {}).get("distributions") for r in (c.a, c.b)]
    lines = ["", "## Machines and environments", ""]
    if not diffs and (None in dist or dist[0] == dist[1]):
        return lines + ["Every job that ran in both has the same machine and environment record."]
    for (key, old, new), jobs in sorted(diffs.items()):
        lines.append(f"- `{key}`: {old} -> {new} ({_n(len(jobs), 'job')}, e.g. `{jobs[0]}`)")
    if None not in dist and dist[0] != dist[1]:
        a, b = set(dist[0]), set(dist[1])
        lines.append(f"- packages only in A: {_few(sorted(a - b), 20) or 'none'}; only in B: {_few(sorted(b - a), 20) or 'none'}")
    return lines


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _few(items: list[str], n: int) -> str:
    shown = ", ".join(f"`{i}`" for i in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def _table_section(c: Comparison, t: TableChange, cards: dict[str, dict]) -> list[str]:
    lines = [f"### {t.name} (`tables/csv/{t.name}.csv`)", ""]
    key = ", ".join(t.key) if t.key else "row position"
    lines.append(f"{_n(len(t.cells), 'cell')} changed (rows matched on {key}).")
    for side, rows in (("A", t.rows_only_a), ("B", t.rows_only_b)):
        if rows:
            lines.append(f"Rows only in {side}: {', '.join(rows)}.")
    for side, cols in zip(("A", "B"), t.columns, strict=True):
        if cols:
            lines.append(f"Columns only in {side}: {', '.join(cols)}.")
    if t.cards:
        rows = ", ".join(r for r, _, _ in t.cards)
        lines.append(f"The protocol card behind {_n(len(t.cards), 'row')} changed: {rows}.")
    if t.cells:
        lines += ["", "| row | column | A | B |", "|---|---|---|---|"]
        lines += [f"| {_c(x.row)} | {_c(x.column)} | {_c(x.old)} | {_c(x.new)} |" for x in t.cells]
    sources = dict.fromkeys([*(x.sources for x in t.cells), *((a, b) for _, a, b in t.cards)])
    if sources:
        lines += ["", "Protocol cards of the changed rows:", ""]
        for src_a, src_b in sources:
            lines += _card_lines(c, src_a, src_b, cards)
    return [*lines, ""]


def write_comparison(a: str | Path, b: str | Path, out: str | Path | None = None) -> str:
    """Compare run A (old) with run B (new): a results tree or an archive each; write the Markdown to out."""
    text = markdown(compare_runs(load_run(a), load_run(b)))
    if out is not None:
        atomic_write_text(out, text)
    return text
