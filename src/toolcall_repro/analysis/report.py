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
from toolcall_repro.experiment import VARIANCE_STUDY, Study
from toolcall_repro.io import atomic_path, atomic_write_text

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
    and with `inputs` (the rule's declared input files) those files only (loaders.Declared)."""

    def __init__(
        self, run_dir: str | Path, units: Mapping, inputs: Iterable[str | Path] | None = None
    ):
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise FileNotFoundError(f"no run directory {self.run_dir}")
        index = loaders.Declared(self.run_dir, inputs)
        scores = units.get("scores") or []
        self.bfcl = loaders.load_scores(scores, index, "bfcl")
        variance = loaders.load_scores(scores, index, "bfcl", kind="variance")
        self.bfcl_variance = variance if len(variance) else self.bfcl
        self.acebench = loaders.load_scores(scores, index, "acebench")
        self.heldout = loaders.load_scores(scores, index, "heldout")
        self.heldout_variance = loaders.load_scores(scores, index, "heldout", kind="variance")
        self.general = loaders.load_general(scores, index)
        self.filter_report = loaders.load_filter_report(units.get("filter_report"), index)
        self.runs = loaders.load_training_runs(self.run_dir, units.get("runs") or [], index)


def _section(cfg: Mapping, key: str) -> dict:
    """cfg[key], or cfg['evaluate'][key] when the rule passes the evaluate subtree (studies, general)."""
    return dict(cfg.get(key) or (cfg.get("evaluate") or {}).get(key) or {})


def _study(cfg: Mapping, name: str, scores: pd.DataFrame) -> list[tuple[str, str]]:
    """The study's (model, protocol) pairs, as `experiment.Study` makes them from the study's unit (the
    rules pass the experiment's units) or config spec; without either, every pair that has scores.

    A study whose `benchmarks` leave out the benchmark of `scores` gives no pairs for it.
    """
    spec = _section(cfg, "studies").get(name)
    if spec:
        study = Study.from_unit(name, spec)
        benchmark = scores["benchmark"].iloc[0] if len(scores) else None
        if benchmark and study.benchmarks and benchmark not in study.benchmarks:
            return []
        return list(study.pairs)
    return sorted(set(zip(scores["model"], scores["protocol"], strict=True)))


def build_tables(res: RunResults, cfg: Mapping) -> list[tabular.Table]:
    bfcl = res.bfcl
    gen = _section(cfg, "general")
    base = gen.get("base", "base")
    rl = gen.get("rl") or [m for m in gen.get("models") or sorted(set(res.general["model"])) if m != base]
    out = [
        tables.table4(bfcl, _study(cfg, "table4", bfcl)),
        tables.prompt_ablation_table(bfcl, _study(cfg, "prompt_ablation", bfcl)),
        tables.study_table(
            bfcl,
            "data_format",
            "Training-data format: BFCL after training on single- vs multi-turn data",
            _study(cfg, "data_format", bfcl),
        ),
        tables.study_table(
            bfcl, "template", "Multi-turn template: native vs context", _study(cfg, "template", bfcl)
        ),
        tables.study_table(bfcl, "thinking", "Thinking history: keep vs drop", _study(cfg, "thinking", bfcl)),
        tables.seed_spread_table(_subset(res.bfcl_variance, cfg, VARIANCE_STUDY)),
        tables.acebench_table(res.acebench),
        tables.filter_chain_table(res.filter_report),
        efficiency.speedup_table(res.runs, baseline=SPEEDUP_BASELINE),
        tables.general_table(res.general, base, rl),
        tables.prompt_factorial_table(
            bfcl, _study(cfg, "prompt_factorial", bfcl), _study(cfg, "prompt_ablation", bfcl)
        ),
    ]
    if cfg.get("pipeline_check"):
        for t in out[:6] + out[-1:]:
            t.notes.insert(0, tables.PIPELINE_CHECK_NOTE)
        # a few held-out prompts and seeds: it checks the code; the evidence is its own target
        speedup = next(t for t in out if t.name == "speedup")
        speedup.title = f"{tables.EFFICIENCY_CHECK_TITLE}. {speedup.title}"
    else:  # paper scale: the paper's number beside ours wherever it reports one
        reported = claims.load_claims()["reported"]
        for t in out:
            tables.with_paper_columns(t, reported.get(t.name))
    out += heldout_tables(res, cfg)
    out.append(efficiency.dynamics_table(res.runs))
    assert tuple(t.name for t in out) == TABLE_NAMES
    return out


def build_scorecard(res: RunResults, built: list[tabular.Table], cfg: Mapping) -> tabular.Table:
    """The claims scorecard from the built tables (per-seed scores looked up by each row's source file)."""
    scores = pd.concat(
        [f for f in (res.bfcl_variance, res.bfcl, res.heldout_variance, res.heldout, res.acebench) if len(f)]
        or [res.bfcl],
        ignore_index=True,
    )
    return scorecard.build_scorecard({t.name: t for t in built}, scores, bool(cfg.get("pipeline_check")))


def heldout_tables(res: RunResults, cfg: Mapping) -> list[tabular.Table]:
    """Every protocol study again on the held-out reserve benchmark (same protocol cards, same seeds)."""
    held, metrics = res.heldout, tables.HELDOUT_METRICS
    note = (
        "held-out reserve benchmark: reserved conversations the model never trained on, in the sources' "
        "schemas, scored with the multi-turn training reward in the protocol's output format (eval/heldout.py)"
    )

    def study(name: str, title: str) -> tabular.Table:
        return tables.study_table(held, f"{name}_heldout", title, _study(cfg, name, held), metrics=metrics)

    spread = _subset(res.heldout_variance, cfg, VARIANCE_STUDY)
    out = [
        tables.seed_spread_table(spread, metrics=metrics),
        study("template", "Held-out: native vs context template"),
        study("thinking", "Held-out: keep vs drop thinking"),
        tables.with_instruction_tokens(
            study("prompt_ablation", "Held-out: the paper's four system prompts"),
            held,
            _study(cfg, "prompt_ablation", held),
        ),
        tables.prompt_factorial_table(
            held,
            _study(cfg, "prompt_factorial", held),
            _study(cfg, "prompt_ablation", held),
            name="prompt_factorial_heldout",
            metrics=metrics,
        ),
        study("data_format", "Held-out: training-data format"),
        study("table4", "Held-out: base, stronger prompt and RL"),
    ]
    out[0].name, out[0].title = "seed_spread_heldout", "Held-out: seed spread per model"
    for t in out:
        t.notes.insert(0, note)
    return out


def _subset(scores: pd.DataFrame, cfg: Mapping, study: str) -> pd.DataFrame:
    pairs = set(_study(cfg, study, scores))
    keep = [(m, p) in pairs for m, p in zip(scores["model"], scores["protocol"], strict=True)]
    return scores.loc[pd.Series(keep, index=scores.index, dtype=bool)]


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
