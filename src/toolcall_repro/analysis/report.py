"""Build every table and figure of a run: read results (loaders), build (tables, efficiency, figures), write.

The analysis config (all keys optional; `studies` and `general` may also sit under `evaluate`, so a rule
can pass {"evaluate": <evaluate subtree>}):
  studies:  {name: {models, protocols, seeds, benchmarks}}: the experiment's study units (the rules pass
            Experiment.analysis_units), or evaluate.studies specs; each table's (model, protocol) pairs
            are experiment.Study's; absent studies use every (model, protocol) with a summary
  speedup:  {baseline: vanilla, target: null, time: device|wall, bootstrap: 2000, seed: 0}
  general:  {base: base, rl: [rl-multi]} or evaluate.general {models: [base, rl-multi]}: every model
            but the base is compared with it
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from toolcall_repro.analysis import claims, efficiency, figures, loaders, scorecard, tables, tabular
from toolcall_repro.benchmarks import BENCHMARKS, VARIANCE_STUDY, Benchmark, config_section
from toolcall_repro.io import atomic_path, atomic_write_text
from toolcall_repro.units import Study

# The order of the tables index (tables/index.md): the paper's four benchmarks' tables (benchmarks.py) and
# the run's own (filter chain, speedup, training dynamics); a benchmark's tables not named here follow.
TABLE_NAMES = (
    "table4_bfcl",
    "prompt_ablation",
    "data_format",
    "template",
    "thinking",
    "seed_spread",
    "acebench",
    "filter_chain",
    "speedup",
    "general_capability",
    "prompt_factorial",
    "seed_spread_heldout",
    "template_heldout",
    "thinking_heldout",
    "prompt_ablation_heldout",
    "prompt_factorial_heldout",
    "data_format_heldout",
    "table4_heldout",
    "training_dynamics",
)
# The scorecard (tables/claims.{md,csv,html}): one row a claim of claims.yaml, read from the tables above.
CLAIMS = "claims"
FIGURE_NAMES = (
    "seed_spread",
    "template",
    "thinking",
    "group_fractions",
    "retention",
    "step_costs",
    "accuracy_vs_time",
)
# The speedup table is the paper's: each variant against vanilla, in device time, at the baseline's peak
# (efficiency.speedup_table's defaults; the config has no knob for them).
SPEEDUP_BASELINE = "vanilla"
# The title of every figure of a pipeline check (a tiny model, a few prompts, one seed a run).
PIPELINE_CHECK_TITLE = (
    "Pipeline check (tiny model, CPU, a few dozen prompts): shows the pipeline runs, not the paper's result"
)


class RunResults:
    """Everything the analysis reads from one run directory, loaded once: the units the experiment names
    (`units`: {"scores": [...], "runs": [...]}, toolcall_repro.experiment.Experiment.analysis_units),
    and with `inputs` (the rule's declared input files) those files only (loaders.Declared).

    `scores[benchmark][kind]`: each benchmark's score files as frames (its `load`), for every default
    benchmark and every registered one the units name (benchmarks.py)."""

    def __init__(
        self, run_dir: str | Path, units: Mapping, inputs: Iterable[str | Path] | None = None
    ):
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise FileNotFoundError(f"no run directory {self.run_dir}")
        index = loaders.Declared(self.run_dir, inputs)
        scores = units.get("scores") or []
        named = {s["benchmark"] for s in scores}
        unknown = sorted(named - set(BENCHMARKS))
        if unknown:
            raise ValueError(f"scores of benchmark(s) {unknown} not registered; registered: {', '.join(BENCHMARKS)}")
        self.benchmarks: dict[str, Benchmark] = {
            n: b for n, b in BENCHMARKS.items() if b.default or n in named
        }
        self.scores = {n: b.load(scores, index) for n, b in self.benchmarks.items()}
        self.filter_report = loaders.load_filter_report(units.get("filter_report"), index)
        self.runs = loaders.load_training_runs(self.run_dir, units.get("runs") or [], index)

    @property
    def bfcl(self) -> pd.DataFrame:
        return self.scores["bfcl"]["summary"]

    @property
    def bfcl_variance(self) -> pd.DataFrame:
        return self.scores["bfcl"]["variance"]


def _study(cfg: Mapping, name: str, scores: pd.DataFrame) -> list[tuple[str, str]]:
    """The study's (model, protocol) pairs, as `experiment.Study` makes them from the study's unit (the
    rules pass the experiment's units) or config spec; without either, every pair that has scores.

    A study whose `benchmarks` leave out the benchmark of `scores` gives no pairs for it.
    """
    spec = config_section(cfg, "studies").get(name)
    if spec:
        study = Study.from_unit(name, spec)
        benchmark = scores["benchmark"].iloc[0] if len(scores) else None
        if benchmark and study.benchmarks and benchmark not in study.benchmarks:
            return []
        return list(study.pairs)
    return sorted(set(zip(scores["model"], scores["protocol"], strict=True)))


def build_tables(res: RunResults, cfg: Mapping) -> list[tabular.Table]:
    """Every benchmark's tables (benchmarks.py), the filter chain's and the training runs', in the index's
    order (TABLE_NAMES, then any other benchmark's)."""

    def pairs(study: str, scores: pd.DataFrame) -> list[tuple[str, str]]:
        return _study(cfg, study, scores)

    check = bool(cfg.get("pipeline_check"))
    out = []
    for name, benchmark in res.benchmarks.items():
        built = benchmark.tables(res.scores[name], cfg, pairs)
        if check and benchmark.pipeline_check_note:
            for t in built:
                t.notes.insert(0, tables.PIPELINE_CHECK_NOTE)
        out += built
    speedup = efficiency.speedup_table(res.runs, baseline=SPEEDUP_BASELINE)
    out += [tables.filter_chain_table(res.filter_report), speedup, efficiency.dynamics_table(res.runs)]
    if check:  # a few held-out prompts and seeds: it checks the code; the evidence is its own target
        speedup.title = f"{tables.EFFICIENCY_CHECK_TITLE}. {speedup.title}"
    else:  # paper scale: the paper's number beside ours wherever it reports one
        reported = claims.load_claims()["reported"]
        for t in out:
            tables.with_paper_columns(t, reported.get(t.name))
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise ValueError(f"two tables share a name: {sorted(n for n in set(names) if names.count(n) > 1)}")
    order = {name: i for i, name in enumerate(TABLE_NAMES)}
    return sorted(out, key=lambda t: order.get(t.name, len(order)))


def build_scorecard(res: RunResults, built: list[tabular.Table], cfg: Mapping) -> tabular.Table:
    """The claims scorecard from the built tables (per-seed scores looked up by each row's source file):
    claims.yaml's rows and every benchmark's own (its `claims`, read with its `statistics`)."""
    frames = [f for n, b in res.benchmarks.items() for f in b.scorecard_scores(res.scores[n]) if len(f)]
    scores = pd.concat(frames or [res.bfcl], ignore_index=True)
    spec = claims.load_claims()
    extra = [claim for b in res.benchmarks.values() for claim in b.claims]
    statistics = {k: f for b in res.benchmarks.values() for k, f in b.statistics.items()}
    if extra:
        spec = {**spec, "claims": [*spec["claims"], *extra]}
    return scorecard.build_scorecard(
        {t.name: t for t in built}, scores, bool(cfg.get("pipeline_check")), spec, statistics
    )


def build_figures(res: RunResults, cfg: Mapping, speedups: pd.DataFrame | None = None) -> list[figures.Fig]:
    """Every figure; `speedups` is the speedup table's frame as make_tables wrote it (tables/csv/speedup.csv),
    built here from res.runs only when not given (a run directory read as a whole)."""
    if speedups is None:
        speedups = efficiency.speedup_table(res.runs, baseline=SPEEDUP_BASELINE).frame
    time_label = "device-hours (CPU-hours on CPU)"
    bfcl = res.bfcl
    out = [
        figures.seed_spread(res.bfcl_variance, _study(cfg, VARIANCE_STUDY, res.bfcl_variance)),
        figures.protocol_comparison(
            bfcl,
            _study(cfg, "template", bfcl),
            "template",
            "template",
            "Native vs context multi-turn template",
        ),
        figures.protocol_comparison(
            bfcl,
            _study(cfg, "thinking", bfcl),
            "thinking",
            "thinking",
            "Keep vs drop earlier turns' thinking",
        ),
        figures.group_fractions(res.runs),
        figures.retention(res.runs),
        figures.step_costs(efficiency.cost_points(res.runs), efficiency.cost_by_context(res.runs), res.runs),
        figures.accuracy_vs_time(res.runs, speedups, SPEEDUP_BASELINE, time_label),
    ]
    assert tuple(f.name for f in out) == FIGURE_NAMES
    if cfg.get("pipeline_check"):
        for f in out:
            f.figure.suptitle(PIPELINE_CHECK_TITLE, fontsize=9, color="#a33")
    return out


# --- writing -----------------------------------------------------------------------------------------


def write_tables(
    items: list[tabular.Table], out_dir: str | Path, card: tabular.Table | None = None
) -> list[Path]:
    """<out>/{csv,md,html}/<name>.<ext> and <out>/index.md (one folder per format, for report patterns);
    with the scorecard `card`, <out>/claims.{md,csv,html} too, and index.md opens with it."""
    out_dir = Path(out_dir)
    written = []
    for t in items:
        for ext, text in (("csv", t.csv()), ("md", t.markdown()), ("html", t.html())):
            atomic_write_text(out_dir / ext / f"{t.name}.{ext}", text)
            written.append(out_dir / ext / f"{t.name}.{ext}")
    index = []
    if card is not None:
        for ext, text in (("csv", card.csv()), ("md", scorecard.markdown(card)), ("html", card.html())):
            atomic_write_text(out_dir / f"{CLAIMS}.{ext}", text)
            written.append(out_dir / f"{CLAIMS}.{ext}")
        index += [scorecard.markdown(card, "#"), ""]
    index += [
        "# Tables",
        "",
        "Each table lists, per row, the summary file it came from (which carries the protocol card) and the"
        " job manifest that wrote it: the `source` / `manifest` columns of the CSV, the Sources list below"
        " each Markdown/HTML table.",
        "",
    ]
    index += [f"- [{t.title}](md/{t.name}.md) ([csv](csv/{t.name}.csv)), {len(t.frame)} rows" for t in items]
    atomic_write_text(out_dir / "index.md", "\n".join(index) + "\n")
    return [*written, out_dir / "index.md"]


def write_figures(items: list[figures.Fig], out_dir: str | Path) -> list[Path]:
    """<out>/{png,pdf}/<name>.<ext> and <out>/index.md with every caption and its sources."""
    out_dir = Path(out_dir)
    written = []
    index = ["# Figures", ""]
    for f in items:
        for ext in ("png", "pdf"):
            path = out_dir / ext / f"{f.name}.{ext}"
            # Fixed metadata so the same data gives the same PDF bytes.
            meta = {"CreationDate": None} if ext == "pdf" else {"Software": None}
            with atomic_path(path) as tmp:
                f.figure.savefig(tmp, format=ext, dpi=120, metadata=meta)
            written.append(path)
        index += [
            f"## {f.name}",
            "",
            f"![{f.name}](png/{f.name}.png) ([pdf](pdf/{f.name}.pdf))",
            "",
            f.caption,
            "",
        ]
        if f.sources:
            index.append("Sources:")
            index += [f"- `{s}` (manifest: `{m or 'none found'}`)" for s, m in f.sources]
            index.append("")
    atomic_write_text(out_dir / "index.md", "\n".join(index))
    return [*written, out_dir / "index.md"]


def table_summary_line(t: tabular.Table) -> str:
    """One line per table for logs: name, rows, first note."""
    return f"{t.name}: {len(t.frame)} rows" + (f" ({t.notes[0]})" if t.notes else "")
