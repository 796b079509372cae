"""The experiment as units: one pure object that turns the validated config into what a run makes.

Training runs, evaluation scores (benchmark x model x protocol, with their seeds), studies with their
own seeds and benchmarks, models and the data chain, each with its paths (from its layout: layout.py,
the one author of every results path and manifest key), the rule that makes it and that rule's manifest. The Snakemake input functions and targets (workflow/rules/common.smk), `plan`
and the analysis read this one object; nothing parses a result path back into meaning.

Preflight (config validation) reads its resolutions here too: which model each generation runs (its
chat template and thinking switch), the hub models, paper scale, verl's job resources.

No I/O apart from `os.path.isdir` on a configured model name (a local folder or a hub id).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from toolcall_repro.archive import archive_name
from toolcall_repro.benchmarks import VARIANCE_STUDY, Benchmark, get_benchmark, run_benchmarks
from toolcall_repro.layout import Layout, job_key, manifest_path
from toolcall_repro.runconfig import SETTINGS, compose_sources, dataset_setting
from toolcall_repro.sheet import JobSheet

SOURCES = ("xlam", "toolace", "looptool")
FORMAT_DATASETS = ("format_single", "format_multi")
# Every training set a GRPO run can read: the settings', the format study's and Tool-N1's pool
# (the trained filter policy's).
TRAIN_DATASETS = (*SETTINGS, *FORMAT_DATASETS, "tooln1")
# model.filter_policy[_multi_turn] values that name the workflow's own policies, not a model
POLICY_NAMES = ("base", "early", "train")
# What an evaluation protocol sets (each score's card names every one): its own keys over the defaults.
PROTOCOL_KEYS = ("system_prompt", "template", "thinking", "temperature", "top_p", "max_tokens")

# The rule that writes each kind of score file, by (benchmark, file name): each benchmark's (benchmarks.py).
def score_rule(benchmark: str, name: str) -> str:
    rules = get_benchmark(benchmark).score_rules
    kind = name.removesuffix(".json")
    if kind not in rules:
        raise ValueError(f"benchmark {benchmark!r} writes no {name}; it writes {sorted(rules)}")
    return rules[kind]


@dataclass(frozen=True)
class TrainingRun:
    """One GRPO run: a training set (a setting or a format-study subset), a variant and a seed.

    `seed` None is the run at train.seed, at the plain path every other stage reads; another seed (the
    efficiency experiment) sits in a seed<k> folder beside it.
    """

    run_dir: str
    dataset: str
    variant: str
    seed: int | None = None

    @property
    def key(self) -> str:
        return Layout.training_key(self.dataset, self.variant, self.seed)

    @property
    def dir(self) -> str:
        return Layout(self.run_dir).training_dir(self.dataset, self.variant, self.seed)

    @property
    def summary(self) -> str:
        return self._file("summary")

    @property
    def files(self) -> list[str]:
        """What the analysis reads of the run."""
        return [self._file(kind) for kind in ("summary", "metrics", "curve")]

    def _file(self, kind: str) -> str:
        return Layout(self.run_dir).training_file(self.dataset, self.variant, kind, self.seed)

    @property
    def rule(self) -> str:
        """train_grpo; train_grpo_seed (its `use rule` twin) for a run at another seed."""
        return "train_grpo" if self.seed is None else "train_grpo_seed"

    @property
    def manifest(self) -> str:
        return manifest_path(self.run_dir, self.rule, self.key)

    def unit(self) -> dict:
        """The run as the analysis receives it (its config): what it is and where it lies."""
        return {"dataset": self.dataset, "variant": self.variant, "seed": self.seed, "dir": self.dir,
                "manifest": self.manifest}  # fmt: skip


@dataclass(frozen=True)
class Score:
    """One score file the analysis reads: a benchmark's summary (or seed-variance summary) of a model
    under a protocol; the general-capability check has no protocol."""

    run_dir: str
    benchmark: str
    model: str
    protocol: str | None
    name: str = "summary.json"

    @property
    def path(self) -> str:
        return Layout(self.run_dir).score(self.benchmark, self.model, self.protocol, self.kind)

    @property
    def kind(self) -> str:
        """summary or variance (layout.SCORE_KINDS): the file's name without .json."""
        return self.name.removesuffix(".json")

    @property
    def rule(self) -> str:
        return score_rule(self.benchmark, self.name)

    @property
    def manifest(self) -> str:
        return Layout(self.run_dir).manifest(self.rule, self.model, self.protocol)

    def unit(self) -> dict:
        """The score as the analysis receives it (its config): what it is and where it lies."""
        return {"benchmark": self.benchmark, "model": self.model, "protocol": self.protocol, "kind": self.kind,
                "path": self.path, "manifest": self.manifest}  # fmt: skip


@dataclass(frozen=True)
class Study:
    """A sensitivity study: models x protocols, scored at its seeds on its benchmarks."""

    name: str
    models: tuple[str, ...]
    protocols: tuple[str, ...]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "pairs", tuple((m, p) for m in self.models for p in self.protocols))

    def unit(self) -> dict:
        """The study as the analysis receives it (its config): defaults resolved, pairs by `from_unit`."""
        return {"models": list(self.models), "protocols": list(self.protocols), "seeds": list(self.seeds),
                "benchmarks": list(self.benchmarks)}  # fmt: skip

    @classmethod
    def from_unit(cls, name: str, unit: Mapping) -> Study:
        """A study from its unit, or from a config spec (no seeds or benchmarks: every benchmark)."""
        return cls(name, tuple(unit["models"]), tuple(unit["protocols"]), tuple(unit.get("seeds", ())),
                   tuple(unit.get("benchmarks", ())))  # fmt: skip


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

    # --- models -------------------------------------------------------------------------------------

    def hub_model_dir(self, hub_id: str) -> str:
        return self.layout.hub_model(hub_id.replace(posixpath.sep, "--"))

    @staticmethod
    def hub_id(slug: str) -> str:
        """The hub id of a download_model folder name (org--name)."""
        return slug.replace("--", posixpath.sep)

    def model_revision(self, slug: str) -> str | None:
        """A hub model's pinned revision (model.revisions); the download record names the commit read."""
        return self.config["model"].get("revisions", {}).get(self.hub_id(slug))

    @staticmethod
    def is_hub_model(name: str) -> bool:
        """Whether a model named in config is a hub id (download_model snapshots it): not tiny, no folder."""
        return name != "tiny" and not os.path.isdir(name)

    def model_path(self, name: str) -> str:
        """A model named in config: `tiny` (the model warmstart_base_model builds), a local directory as
        is, else a hub id snapshotted by download_model."""
        if name == "tiny":
            return self.layout.base_model()
        return self.hub_model_dir(name) if self.is_hub_model(name) else name

    def hub_models(self) -> list[str]:
        """Every hub model the DAG snapshots (download_model): base, per-setting policies, filter policies."""
        model = self.config["model"]
        names = [model["base"], model.get("filter_policy"), model.get("filter_policy_multi_turn")]
        names += [s.get("model") for s in self.config["train"]["settings"].values()]
        return sorted({n for n in names if n and n not in POLICY_NAMES and self.is_hub_model(n)})

    def thinking(self, model: str | None) -> bool | None:
        """model.enable_thinking of a model (hub id or path); None: not set (the chat template's default)."""
        return (self.config["model"].get("enable_thinking") or {}).get(model) if model else None

    def base_model_dir(self) -> str:
        return self.model_path(self.config["model"]["base"])

    def final_model_dir(self, dataset: str, variant: str) -> str:
        return self.layout.training_file(dataset, variant, "final")

    def start_model(self, dataset: str) -> str:
        """The model a training run starts from, as config names it: its setting's own model
        (train.settings.<setting>.model, paper scale), else model.base. A trained model keeps its chat
        template (and its thinking switch)."""
        model = self.config["train"]["settings"][dataset_setting(self.config, dataset)].get("model")
        return model or self.config["model"]["base"]

    def policy_start_dir(self, dataset: str) -> str:
        """Weights a training run starts from: the setting's own model (paper scale) or the base model."""
        return self.model_path(self.start_model(dataset))

    def filter_policy(self, setting: str) -> str:
        """A chain's model.filter_policy[_multi_turn] (the multi-turn key falls back to filter_policy):
        one of POLICY_NAMES, a path or a hub id."""
        model = self.config["model"]
        key = "filter_policy_multi_turn" if setting == "multi_turn" else "filter_policy"
        return model.get(key) or model.get("filter_policy", "base")

    def filter_policy_model(self, setting: str) -> str | None:
        """The model whose chat template a chain's filter policy uses (None: the tiny model's warm start)."""
        policy = self.filter_policy(setting)
        if policy == "base":
            return self.config["model"]["base"]
        if policy == "train":  # the 80-step Tool-N1 policy, trained from its setting's model
            return self.start_model("tooln1")
        return None if policy == "early" else policy

    def filter_policy_dir(self, setting: str) -> str:
        """The policy whose rollouts filter a chain's data (model.filter_policy[_multi_turn]).

        base: the base model; early: the tiny model's warm start at model.tiny.early_step (weaker than
        the RL start, as the paper's filter policy); train: the paper's policy, GRPO-trained 80 steps on
        Tool-N1's data; else a path or hub id.
        """
        policy = self.filter_policy(setting)
        if policy == "base":
            return self.base_model_dir()
        if policy == "early":
            return self.layout.early_model()
        if policy == "train":
            return self.final_model_dir("tooln1", "vanilla")
        return self.model_path(policy)

    def model_dir(self, tag: str) -> str:
        """The weights behind an evaluation model tag (evaluate.models)."""
        spec = self.config["evaluate"]["models"][tag]
        if spec["source"] == "base":
            return self.base_model_dir()
        if spec["source"] == "train":
            return self.final_model_dir(spec["setting"], spec["variant"])
        return self.final_model_dir(spec["dataset"], self.config["train"]["format_study"]["variant"])

    def eval_model(self, tag: str) -> str:
        """The model whose chat template an evaluation model tag uses (a trained model keeps its start's)."""
        spec = self.config["evaluate"]["models"][tag]
        if spec["source"] == "base":
            return self.config["model"]["base"]
        return self.start_model(spec["setting"] if spec["source"] == "train" else spec["dataset"])

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

    def model_spec(self, tag: str) -> dict:
        return {"tag": tag, **self.config["evaluate"]["models"][tag]}

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
