"""The experiment: one pure object that turns the validated config into what a run makes.

Which training runs (train.runs, the efficiency seeds, the evidence's seed pairs), which evaluation scores
(benchmark x model x protocol, at their seeds), which studies, which data chain, as units (units.py) with
their paths (layout.py, the one author of every results path and manifest key). Beside it, built once
from the same config: `models` (models.py: which model each part uses, where its weights lie) and `jobs`
(sheet.py: each rule's resources and env). The Snakemake input functions and targets
(workflow/rules/common.smk), `plan`, preflight and the analysis read this one object; nothing parses a
result path back into meaning.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from toolcall_repro.archive import archive_name
from toolcall_repro.benchmarks import VARIANCE_STUDY, Benchmark, run_benchmarks
from toolcall_repro.layout import Layout, job_key
from toolcall_repro.models import Models
from toolcall_repro.runconfig import SETTINGS, compose_sources, dataset_setting
from toolcall_repro.sheet import JobSheet
from toolcall_repro.units import Score, Study, TrainingRun

SOURCES = ("xlam", "toolace", "looptool")
FORMAT_DATASETS = ("format_single", "format_multi")
# Every training set a GRPO run can read: the settings', the format study's and Tool-N1's pool
# (the trained filter policy's).
TRAIN_DATASETS = (*SETTINGS, *FORMAT_DATASETS, "tooln1")
# What an evaluation protocol sets (each score's card names every one): its own keys over the defaults.
PROTOCOL_KEYS = ("system_prompt", "template", "thinking", "temperature", "top_p", "max_tokens")

class Experiment:
    """The validated config as the experiment's units, under results/<run_id> (or `run_dir`)."""

    def __init__(self, config: Mapping, run_dir: str | None = None):
        self.config = config
        self.run_dir = run_dir or os.path.join("results", config["run_id"])
        self.layout = Layout(self.run_dir)  # every path of the run and every manifest key (layout.py)
        evaluate = config["evaluate"]
        self.heldout = evaluate.get("heldout")
        default_benchmarks = ("bfcl", "heldout") if self.heldout else ("bfcl",)
        self.studies = {
            name: Study(
                name,
                tuple(spec["models"]),
                tuple(spec["protocols"]),
                tuple(spec.get("seeds", self.eval_seeds())),
                tuple(spec.get("benchmarks", default_benchmarks)),
            )
            for name, spec in evaluate["studies"].items()
        }
        self.acebench = evaluate.get("acebench") or {}
        self.general = evaluate.get("general")
        # the run's benchmarks (benchmarks.py): the paper's four and any evaluate.benchmarks names
        self.benchmarks: dict[str, Benchmark] = run_benchmarks(config)
        self._runs: dict[tuple[str, str], tuple[dict, dict]] = {}
        # every rule's resources and env, and a training job's verl layout (sheet.py)
        self.jobs = JobSheet(config)
        # which model each part of the run uses and where its weights lie (models.py)
        self.models = Models(config, self.layout)

    def run_config(self, dataset: str, variant: str) -> dict:
        """The hyper-parameters of one training run (runconfig.compose_sources), composed once per
        (dataset, variant) for config validation and the rule's params alike; read-only."""
        return self._composed(dataset, variant)[0]

    def run_sources(self, dataset: str, variant: str) -> dict:
        """Where each key of run_config came from (the config key), for error messages."""
        return self._composed(dataset, variant)[1]

    def _composed(self, dataset: str, variant: str) -> tuple[dict, dict]:
        if (dataset, variant) not in self._runs:
            self._runs[dataset, variant] = compose_sources(self.config, dataset, variant)
        return self._runs[dataset, variant]

    def manifest(self, rule: str, key: str = "all") -> str:
        return self.layout.manifest(rule, key)

    @property
    def paper_scale(self) -> bool:
        """`engines.training: verl`: the run that takes cluster time (its own envs, pinned inputs)."""
        return self.jobs.paper_scale

    # --- data ---------------------------------------------------------------------------------------

    def raw_source(self, source: str) -> str:
        """A source's raw rows: the synthetic twin (data.mode synthetic) or the Hub download."""
        return self.layout.raw_source(source, hub=self.config["data"]["mode"] != "synthetic")

    def tooln1_sources(self) -> list[str]:
        """Tool-N1's own RL rows when data.sources names them, else its ingredients: xLAM + ToolACE."""
        return ["tooln1"] if "tooln1" in self.config["data"]["sources"] else ["xlam", "toolace"]

    def filter_steps(self) -> list[str]:
        """The chains the filter report merges; the Tool-N1 pool only when the DAG trains the filter policy."""
        steps = ["single_turn", "multi_turn", "format_study"]
        model = self.config["model"]
        policies = {model.get("filter_policy"), model.get("filter_policy_multi_turn")}
        return steps + (["pool_tooln1"] if "train" in policies else [])

    def reported_sources(self) -> list[str]:
        pooled = self.tooln1_sources() if "pool_tooln1" in self.filter_steps() else []
        return [*SOURCES, *(s for s in pooled if s not in SOURCES)]

    def heldout_split(self, dataset: str) -> str:
        """The held-out split a training set's curve is scored on (its setting's; Tool-N1's own)."""
        name = "tooln1" if dataset == "tooln1" else dataset_setting(self.config, dataset)
        return self.layout.heldout_split(name)

    def train_set_target(self, dataset: str) -> int | None:
        """The rows its filter chain aims at (filter.<setting>.target_size, filter.format_study.size);
        None for Tool-N1's pool (all of it) or a target not set."""
        filt = self.config["filter"]
        if dataset in SETTINGS:
            return filt[dataset].get("target_size")
        if dataset in FORMAT_DATASETS:
            return filt.get("format_study", {}).get("size")
        return None

    def training_sets(self) -> list[str]:
        """Training sets whose conversations the held-out benchmark leaves out (GRPO and format study)."""
        return [self.layout.train_set(d) for d in (*SETTINGS, *FORMAT_DATASETS)]

    def acebench_dir(self) -> str:
        """ACEBench's data (evaluate.acebench.source): the synthetic twins the pipeline writes (embedded
        default), the English data downloaded at a pinned commit (paper scale), or a folder the user names
        (`local`). No folder outside the checkout is read."""
        source = self.acebench.get("source", "synthetic")
        return self.acebench.get("data_dir") if source == "local" else self.layout.acebench_data(source)

    def lm_eval_tasks(self) -> str:
        """The hub-backed lm-eval tasks of evaluate.general.tasks (not our local tool-choice task)."""
        tasks = (self.general or {}).get("tasks", "").split(",")
        return ",".join(t.strip() for t in tasks if t.strip() not in ("", "local"))

    def lm_eval_data(self) -> list[str]:
        """lm-eval's task data, fetched on the submit host when its tasks read the Hub (not `local`)."""
        if not self.lm_eval_tasks():
            return []
        if not self.general.get("revisions"):
            raise ValueError(
                "evaluate.general.revisions: lm-eval tasks read the Hub, so each dataset needs a pinned "
                "revision (hub dataset id -> revision), e.g. {cais/mmlu: <sha>}; not set"
            )
        return [self.layout.lm_eval_record()]

    def protocol(self, name: str) -> dict:
        """evaluate.protocols.<name> over evaluate.protocol_defaults."""
        evaluate = self.config["evaluate"]
        return {**(evaluate.get("protocol_defaults") or {}), **evaluate["protocols"][name]}

    def protocol_problems(self) -> list[str]:
        """A protocol that leaves a key unset after the defaults (each names the keys and where to set them)."""
        out = []
        for name in sorted(self.config["evaluate"]["protocols"]):
            missing = [k for k in PROTOCOL_KEYS if k not in self.protocol(name)]
            if missing:
                out.append(
                    f"evaluate.protocols.{name}: {', '.join(missing)} not set there nor in "
                    f"evaluate.protocol_defaults; every protocol needs {', '.join(PROTOCOL_KEYS)}"
                )
        return out

    # --- training -----------------------------------------------------------------------------------

    def training_runs(self) -> list[TrainingRun]:
        """train.runs: every (setting, variant) at train.seed."""
        runs = self.config["train"]["runs"]
        return [TrainingRun(self.run_dir, s, v) for s in SETTINGS for v in runs.get(s, [])]

    def efficiency_runs(self) -> list[TrainingRun]:
        """train.efficiency.runs: each variant at each seed; train.seed is the plain run."""
        spec = self.config["train"].get("efficiency") or {}
        base_seed = self.config["train"]["seed"]
        return [
            TrainingRun(self.run_dir, setting, variant, None if seed == base_seed else seed)
            for setting, variants in sorted((spec.get("runs") or {}).items())
            for variant, seeds in sorted(variants.items())
            for seed in seeds
        ]

    def evidence_pair(self, setting: str, seed: int) -> list[TrainingRun]:
        """One seed-pair unit of the efficiency evidence (analysis.evidence_units): vanilla and efficient at
        `seed`, as efficiency_runs names them (train.seed is the plain run)."""
        base_seed = self.config["train"]["seed"]
        return [TrainingRun(self.run_dir, setting, v, None if seed == base_seed else seed) for v in ("vanilla", "efficient")]

    def requested_runs(self) -> list[tuple[str, str, str]]:
        """(dataset, variant, where the config asks for it) of every training run the DAG can build: train.runs,
        train.efficiency.runs, the format study, evaluation models trained here, a trained filter policy.
        Config validation checks each (preflight.validate_config)."""
        train = self.config["train"]
        runs = [(r.dataset, r.variant, f"train.runs.{r.dataset}") for r in self.training_runs()]
        runs += [(r.dataset, r.variant, f"train.efficiency.runs.{r.dataset}") for r in self.efficiency_runs()]
        fmt = train["format_study"]["variant"]
        runs += [(d, fmt, "train.format_study.variant") for d in FORMAT_DATASETS]
        for tag, spec in sorted(self.config["evaluate"]["models"].items()):
            if spec.get("source") == "train":
                runs.append((spec.get("setting"), spec.get("variant"), f"evaluate.models.{tag}"))
        model = self.config["model"]
        if "train" in {model.get("filter_policy"), model.get("filter_policy_multi_turn")}:
            runs.append(("tooln1", "vanilla", "model.filter_policy: train"))
        seen, out = set(), []
        for run in runs:
            if run[:2] not in seen:
                seen.add(run[:2])
                out.append(run)
        return out

    # --- evaluation ---------------------------------------------------------------------------------

    def study_scores(self, study: str, benchmark: str) -> list[Score]:
        """A study's scores on one benchmark (none when the study leaves the benchmark out).

        The seed-variance study's held-out scores are its variance files; its BFCL ones are BFCL's
        `variance` (benchmarks.py; the other studies' BFCL summaries are at the evaluation seeds).
        """
        spec = self.studies.get(study)
        if spec is None or benchmark not in spec.benchmarks:
            return []
        if benchmark == "heldout" and not self.heldout:
            return []
        name = "variance.json" if benchmark == "heldout" and study == VARIANCE_STUDY else "summary.json"
        return [Score(self.run_dir, benchmark, m, p, name) for m, p in spec.pairs]

    def score(self, benchmark: str, model: str, protocol: str | None, name: str = "summary.json") -> Score:
        return Score(self.run_dir, benchmark, model, protocol, name)

    def benchmark_scores(self, benchmark: str) -> list[Score]:
        """A benchmark's score files (its registry entry's units)."""
        return self.benchmarks[benchmark].scores(self)

    def benchmark_seeds(self, benchmark: str) -> list[int]:
        """The seeds a benchmark is scored at: evaluate.benchmarks.<name>.seeds, else evaluate.seeds."""
        return self.benchmarks[benchmark].seeds(self)

    def study_outputs(self, study: str) -> list[str]:
        """A study's named target: its score files on every benchmark it runs."""
        bfcl_entry = self.benchmarks["bfcl"]
        bfcl = bfcl_entry.variance(self) if study == VARIANCE_STUDY else self.study_scores(study, "bfcl")
        return [*(s.path for s in bfcl), *sorted(s.path for s in self.study_scores(study, "heldout"))]

    def scores(self) -> list[Score]:
        """Everything the results stage reads from evaluation."""
        return [score for benchmark in self.benchmarks.values() for score in benchmark.scores(self)]

    def eval_seeds(self) -> list[int]:
        """The shared default seeds (evaluate.seeds): the studies' unless they set their own."""
        return list(self.config["evaluate"]["seeds"])

    def variance_seeds(self) -> list[int]:
        spec = self.studies.get(VARIANCE_STUDY)
        return list(spec.seeds) if spec else self.eval_seeds()

    def heldout_seeds(self, model: str, protocol: str) -> dict:
        """The held-out benchmark's seeds, and the seed-variance study's seeds for its own (model, protocol) pairs."""
        spec = self.studies.get(VARIANCE_STUDY)
        in_variance = spec is not None and (model, protocol) in spec.pairs
        seeds = self.benchmark_seeds("heldout")
        return {"eval": seeds, "variance": self.variance_seeds() if in_variance else seeds}

    def seed_files(self, benchmark: str, model: str, protocol: str, seeds=None) -> list[str]:
        """One generation job's output a seed: eval/<benchmark>/<model>/<protocol>/seed<k>.json (the
        benchmark's seeds unless given)."""
        seeds = self.benchmark_seeds(benchmark) if seeds is None else seeds
        return [self.layout.seed_score(benchmark, model, protocol, s) for s in seeds]

    def analysis_units(self, runs: list[TrainingRun] | None = None) -> dict:
        """What the analysis reads, as units (its config): every score, the training runs (train.runs,
        or `runs`), the studies (the analysis takes each table's pairs from these) and the filter report,
        each file with the manifest that records it."""
        runs = self.training_runs() if runs is None else runs
        return {
            "scores": [s.unit() for s in self.scores()],
            "runs": [r.unit() for r in runs],
            "studies": {name: study.unit() for name, study in self.studies.items()},
            "filter_report": {"path": self.filter_report(), "manifest": self.manifest("report_filter")},
        }

    # --- results ------------------------------------------------------------------------------------

    def filter_report(self) -> str:
        return self.layout.filter_report()

    def archive(self, code: str, config_sha256: str, target: str | None = None) -> str:
        """The run's checksummed archive (or a target's, e.g. efficiency), outside results/<run_id>: Snakemake
        deletes the old outputs of every job it reruns. Named for the run id, the code commit and the config's
        sha256: a changed knob writes a second archive beside the first, the same code and config the same name."""
        folder = (self.config.get("archive") or {}).get("dir", os.path.join("results", "archives"))
        return os.path.join(folder, archive_name(job_key(self.config["run_id"], target), code, config_sha256))

    def result_manifests(self, scores=(), runs=(), filter_report: bool = False) -> list[str]:
        """The manifests of the jobs that wrote the result files the analysis reads (each row cites one)."""
        found = {s.manifest for s in scores} | {r.manifest for r in runs}
        if filter_report:
            found.add(self.manifest("report_filter"))
        return sorted(found)
