"""The benchmarks a run scores, behind one interface: a registry by name, as verl's core_algos registers
its advantage estimators.

A benchmark is a `Benchmark` registered with `@register("<name>")`. It says, from the experiment, which
score files it has (its units: model x protocol, each with the rule that writes it), the seeds it is
scored at, the generations whose budgets preflight checks, and, from the loaded score files, its tables
and the statistics of its scorecard rows. The experiment, the rules' targets, preflight and the report
iterate the registry; nothing else names a benchmark.

The four of the paper register here (BFCL, ACEBench, the held-out reserve benchmark, general capability)
and are in every run; their rules are written in workflow/rules/evaluate.smk. A benchmark from elsewhere
joins a run through its config entry, evaluate.benchmarks.<name>: {module: <its module>, ...}: the module
is imported (its `@register` line adds it), and one job per (model, protocol) runs its `score_<name>`
stage (evaluate.smk's one rule for them all, score_benchmark, the job sheet's row). Seeds: evaluate.seeds, or
evaluate.benchmarks.<name>.seeds for that benchmark alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

# pandas and the analysis modules are imported where frames are loaded or tables built, not here: every
# Snakemake parse imports this registry through the experiment, and pandas alone is most of that import.
if TYPE_CHECKING:
    import pandas as pd

    from toolcall_repro.analysis.tabular import Table

    # A study's (model, protocol) pairs for one benchmark's scores: the report's (experiment.Study's pairs).
    Pairs = Callable[[str, pd.DataFrame], list]
VARIANCE_STUDY = "seed_variance"


class Benchmark:
    """One benchmark: its score units, seeds, generations, score files as frames, tables and statistics."""

    name: str = ""
    # a `<name>_all` target of every score file (`target`)
    all_target: bool = True
    # on a pipeline check its tables open with tables.PIPELINE_CHECK_NOTE (a harness test, not a result)
    pipeline_check_note: bool = False
    # in every run; else only in a run whose config names it (evaluate.benchmarks.<name>)
    default: bool = False
    # the module of its `score_<name>` stage for evaluate.smk's one-rule pattern (None: rules of its own)
    stage_module: str | None = None
    # its scorecard rows (claims.yaml's `claims` shape) and the statistics they read, by name
    claims: tuple[Mapping, ...] = ()
    statistics: Mapping[str, Callable] = {}

    @property
    def score_rules(self) -> dict[str, str]:
        """Score kind (layout.SCORE_KINDS) -> the rule that writes that file: the job sheet's (sheet.py)."""
        from toolcall_repro.sheet import score_rules

        return score_rules(self.name, plugin=self.stage_module is not None)

    # --- the experiment's side ---------------------------------------------------------------------

    def spec(self, exp) -> dict:
        """Its config entry: evaluate.benchmarks.<name> (empty when not there)."""
        return dict(((exp.config["evaluate"].get("benchmarks") or {}).get(self.name)) or {})

    def seeds(self, exp) -> list[int]:
        """The seeds it is scored at: its own (evaluate.benchmarks.<name>.seeds), else evaluate.seeds."""
        return list(self.spec(exp).get("seeds") or exp.eval_seeds())

    def scores(self, exp) -> list:
        """Every score file the results stage reads of it (experiment.Score units)."""
        spec = self.spec(exp)
        protocols = spec.get("protocols", ["default"])
        return [exp.score(self.name, m, p) for m in spec.get("models", ["base"]) for p in protocols]

    def target(self, exp) -> list:
        """The score files of its `<name>_all` target."""
        return self.scores(exp)

    def generations(self, exp) -> set[tuple[str, str]]:
        """(model tag, protocol) of every generation it runs: preflight checks each budget."""
        return {(s.model, s.protocol) for s in self.scores(exp) if s.protocol}

    # --- the analysis' side ------------------------------------------------------------------------

    def load(self, units, index) -> dict[str, pd.DataFrame]:
        """Its score files as frames, by score kind (loaders.load_scores' rows)."""
        from toolcall_repro.analysis import loaders

        return {"summary": loaders.load_scores(units, index, self.name)}

    def tables(self, frames: Mapping[str, pd.DataFrame], cfg: Mapping, pairs: Pairs) -> list[Table]:
        return []

    def scorecard_scores(self, frames: Mapping[str, pd.DataFrame]) -> list[pd.DataFrame]:
        """The frames whose per-seed values the scorecard reads."""
        return [frames["summary"]]


BENCHMARKS: dict[str, Benchmark] = {}


def register(name: str, *, default: bool = False):
    """Class decorator: the benchmark `name` (one per name)."""

    def decorate(cls: type[Benchmark]) -> type[Benchmark]:
        if name in BENCHMARKS:
            raise ValueError(f"benchmark {name!r} is registered twice")
        cls.name, cls.default = name, default
        BENCHMARKS[name] = cls()
        return cls

    return decorate


def get_benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise ValueError(f"benchmark {name!r} is not registered; registered: {', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


def run_benchmarks(config: Mapping) -> dict[str, Benchmark]:
    """The benchmarks of a run, in registry order: every default one and each evaluate.benchmarks entry
    (its `module` imported first, so that its `@register` line runs)."""
    entries = (config.get("evaluate") or {}).get("benchmarks") or {}
    for name, spec in entries.items():
        if (spec or {}).get("module"):
            importlib.import_module(spec["module"])
        if name not in BENCHMARKS:
            raise ValueError(
                f"evaluate.benchmarks.{name}: no benchmark registered as {name!r} (module: "
                f"{(spec or {}).get('module')}); registered: {', '.join(BENCHMARKS)}"
            )
    return {n: b for n, b in BENCHMARKS.items() if b.default or n in entries}


def config_section(cfg: Mapping, key: str) -> dict:
    """cfg[key], or cfg['evaluate'][key] when the rule passes the evaluate subtree (studies, general)."""
    return dict(cfg.get(key) or (cfg.get("evaluate") or {}).get(key) or {})


def subset(scores: pd.DataFrame, pairs: Pairs, study: str) -> pd.DataFrame:
    """The rows of a study's (model, protocol) pairs."""
    import pandas as pd

    keep_pairs = set(pairs(study, scores))
    keep = [(m, p) in keep_pairs for m, p in zip(scores["model"], scores["protocol"], strict=True)]
    return scores.loc[pd.Series(keep, index=scores.index, dtype=bool)]


# --- the paper's four ----------------------------------------------------------------------------------


@register("bfcl", default=True)
class BFCL(Benchmark):
    """BFCL v4 (multi-turn and single-turn): every study's pairs at the evaluation seeds, the seed-variance
    study's at its own seeds (variance.json)."""

    pipeline_check_note = True

    def summaries(self, exp) -> list:
        """Every BFCL summary at the evaluation seeds (the seed-variance study's are its variance files)."""
        found = {
            s.path: s for st in exp.studies if st != VARIANCE_STUDY for s in exp.study_scores(st, self.name)
        }
        return [found[p] for p in sorted(found)]

    def variance(self, exp) -> list:
        study = exp.studies.get(VARIANCE_STUDY)
        if study is None or self.name not in study.benchmarks:
            return []
        return [exp.score(self.name, m, p, "variance.json") for m, p in study.pairs]

    def scores(self, exp) -> list:
        return [*self.summaries(exp), *self.variance(exp)]

    def target(self, exp) -> list:
        return self.summaries(exp)

    def load(self, units, index) -> dict[str, pd.DataFrame]:
        from toolcall_repro.analysis import loaders

        summary = loaders.load_scores(units, index, self.name)
        variance = loaders.load_scores(units, index, self.name, kind="variance")
        return {"summary": summary, "variance": variance if len(variance) else summary}

    def tables(self, frames, cfg, pairs) -> list[Table]:
        from toolcall_repro.analysis import tables

        bfcl = frames["summary"]
        return [
            tables.table4(bfcl, pairs("table4", bfcl)),
            tables.prompt_ablation_table(bfcl, pairs("prompt_ablation", bfcl)),
            tables.study_table(
                bfcl,
                "data_format",
                "Training-data format: BFCL after training on single- vs multi-turn data",
                pairs("data_format", bfcl),
            ),
            tables.study_table(
                bfcl, "template", "Multi-turn template: native vs context", pairs("template", bfcl)
            ),
            tables.study_table(bfcl, "thinking", "Thinking history: keep vs drop", pairs("thinking", bfcl)),
            tables.seed_spread_table(subset(frames["variance"], pairs, VARIANCE_STUDY)),
            tables.prompt_factorial_table(bfcl, pairs("prompt_factorial", bfcl), pairs("prompt_ablation", bfcl)),
        ]

    def scorecard_scores(self, frames) -> list[pd.DataFrame]:
        return [frames["variance"], frames["summary"]]


@register("acebench", default=True)
class ACEBench(Benchmark):
    """ACEBench (English): evaluate.acebench.models under its one protocol, at the evaluation seeds."""


    def scores(self, exp) -> list:
        protocol = exp.acebench.get("protocol", "stronger")
        return [exp.score(self.name, m, protocol) for m in exp.acebench.get("models", ["base"])]

    def tables(self, frames, cfg, pairs) -> list[Table]:
        from toolcall_repro.analysis import tables

        return [tables.acebench_table(frames["summary"])]


HELDOUT_NOTE = (
    "held-out reserve benchmark: reserved conversations the model never trained on, in the sources' "
    "schemas, scored with the multi-turn training reward in the protocol's output format (eval/heldout.py)"
)


@register("heldout", default=True)
class Heldout(Benchmark):
    """The held-out reserve benchmark (evaluate.heldout): every protocol study again, one job a pair
    scoring the evaluation seeds and, for the seed-variance study's pairs, its seeds (variance.json)."""

    all_target = False  # its scores are the studies' targets (study_<name>)

    def scores(self, exp) -> list:
        found = {s.path: s for st in exp.studies for s in exp.study_scores(st, self.name)}
        return [found[p] for p in sorted(found)]

    def load(self, units, index) -> dict[str, pd.DataFrame]:
        from toolcall_repro.analysis import loaders

        return {
            "summary": loaders.load_scores(units, index, self.name),
            "variance": loaders.load_scores(units, index, self.name, kind="variance"),
        }

    def tables(self, frames, cfg, pairs) -> list[Table]:
        """Every protocol study again on the held-out reserve benchmark (same protocol cards, same seeds)."""
        from toolcall_repro.analysis import tables

        held, metrics = frames["summary"], tables.HELDOUT_METRICS

        def study(name: str, title: str) -> Table:
            return tables.study_table(held, f"{name}_heldout", title, pairs(name, held), metrics=metrics)

        spread = subset(frames["variance"], pairs, VARIANCE_STUDY)
        out = [
            tables.seed_spread_table(spread, metrics=metrics),
            study("template", "Held-out: native vs context template"),
            study("thinking", "Held-out: keep vs drop thinking"),
            tables.with_instruction_tokens(
                study("prompt_ablation", "Held-out: the paper's four system prompts"),
                held,
                pairs("prompt_ablation", held),
            ),
            tables.prompt_factorial_table(
                held,
                pairs("prompt_factorial", held),
                pairs("prompt_ablation", held),
                name="prompt_factorial_heldout",
                metrics=metrics,
            ),
            study("data_format", "Held-out: training-data format"),
            study("table4", "Held-out: base, stronger prompt and RL"),
        ]
        out[0].name, out[0].title = "seed_spread_heldout", "Held-out: seed spread per model"
        for t in out:
            t.notes.insert(0, HELDOUT_NOTE)
        return out

    def scorecard_scores(self, frames) -> list[pd.DataFrame]:
        return [frames["variance"], frames["summary"]]


@register("general", default=True)
class General(Benchmark):
    """General capability (lm-eval, evaluate.general): each model once, no protocol; every model but the
    base is compared with it."""


    def seeds(self, exp) -> list[int]:
        return super().seeds(exp)[:1]  # lm-eval's one run: the first seed

    def scores(self, exp) -> list:
        if not exp.general:
            return []
        return [exp.score(self.name, m, None) for m in exp.general["models"]]

    def load(self, units, index) -> dict[str, pd.DataFrame]:
        from toolcall_repro.analysis import loaders

        return {"summary": loaders.load_general(units, index)}

    def tables(self, frames, cfg, pairs) -> list[Table]:
        from toolcall_repro.analysis import tables

        general = frames["summary"]
        gen = config_section(cfg, "general")
        base = gen.get("base", "base")
        rl = gen.get("rl") or [m for m in gen.get("models") or sorted(set(general["model"])) if m != base]
        return [tables.general_table(general, base, rl)]

    def scorecard_scores(self, frames) -> list[pd.DataFrame]:
        return []  # its rows are per task, not per seed
