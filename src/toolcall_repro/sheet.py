"""The job sheet: every kind of job the workflow runs, one typed row a rule, and the one place a rule's
name is written outside the rule files.

A row says what runs (the stage function: its module and name; a `use rule X as Y` twin runs X's),
where (its resource class: the GPU and cluster settings it asks for at paper scale; none: a CPU job with
the profile's defaults) and in what software (its environment at paper scale). `JobSheet` is the row set
of one validated config: each rule's resources and conda env, built once by the experiment. Who reads it:

- the rules (workflow/rules/*.smk, through common.smk's `job`, `env` and `resources`);
- the job entry (job.py: a job's stage function) and `toolcall-repro stage`;
- the slurm profile (profiles/slurm/config.yaml: its GPU rules' site resources, `cluster_rules`);
- the venv deployment's dispatch (scripts/cluster-envs-python.sh: `venv_of`);
- `plan` (a job's stage) and the tests.

A benchmark registered outside the package (benchmarks.py) scores through one rule, `score_benchmark`,
whatever its name: its jobs are `score_<name>` twins of that row, run its module's `score_<name>`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

# The GPU-holding classes: what config `resources.<class>` adds at paper scale, and which of the slurm
# profile's site settings a rule of the class asks for (train_*: training jobs, gpu_*: the others).
CLASSES = ("train", "filter", "evaluate")
# Envs with a GPU build (workflow/envs/<env>.yaml): their jobs run in the verl venv of the venv deployment.
VERL_ENVS = ("train-verl", "eval-vllm")


@dataclass(frozen=True)
class Kind:
    """One job kind: a rule, the stage function it runs, its resource class and its paper-scale env."""

    rule: str
    module: str
    twin_of: str | None = None  # `use rule X as Y`: Y runs X's stage and writes manifests under Y
    cluster: str | None = None  # one of CLASSES; None: a CPU job (the profile's default resources)
    env: str = "cpu"  # the env at paper scale (the embedded default runs every job in cpu.yaml)
    gpu_env_always: bool = False  # the GPU env at both scales (locate_vllm finds vLLM's `vllm` there)
    # the score files it writes, as (benchmark, kind: layout.SCORE_KINDS): what the analysis reads, each
    # filed with its manifest under this rule (units.Score.rule)
    scores: tuple[tuple[str, str], ...] = ()
    # a filter chain's setting (config filter.<setting>): what `plan` reads of its job
    setting: str | None = None

    @property
    def stage(self) -> str:
        """The function the job entry runs: the rule's own name, or the twin's original's."""
        return self.twin_of or self.rule


def _kinds(*rows: Kind) -> dict[str, Kind]:
    return {k.rule: k for k in rows}


# workflow/rules/<file>.smk: the rules in the order they are defined
KINDS: dict[str, Kind] = _kinds(
    # data.smk
    Kind("synthesize_source", "toolcall_repro.data.synthetic"),
    Kind("download_source", "toolcall_repro.data.download"),
    Kind("normalise_source", "toolcall_repro.data.normalise"),
    Kind("download_lm_eval_data", "toolcall_repro.eval.general.fetch"),
    # models.smk
    Kind("warmstart_base_model", "toolcall_repro.engines.local.warmstart"),
    Kind("download_model", "toolcall_repro.data.download"),
    # filter.smk
    Kind("filter_single_turn", "toolcall_repro.data.filter_cli", cluster="filter", env="eval-vllm",
         setting="single_turn"),  # fmt: skip
    Kind("filter_multi_turn", "toolcall_repro.data.filter_cli", cluster="filter", env="eval-vllm",
         setting="multi_turn"),  # fmt: skip
    Kind("subset_format_study", "toolcall_repro.data.filter_cli"),
    Kind("pool_tooln1", "toolcall_repro.data.filter_cli"),
    Kind("report_filter", "toolcall_repro.data.report"),
    # train.smk
    Kind("train_grpo", "toolcall_repro.engines.train", cluster="train", env="train-verl"),
    Kind("train_grpo_seed", "toolcall_repro.engines.train", "train_grpo", cluster="train", env="train-verl"),
    Kind("report_efficiency", "toolcall_repro.analysis.jobs"),
    Kind("evidence_unit", "toolcall_repro.analysis.evidence_units"),
    # evaluate.smk
    Kind("locate_vllm", "toolcall_repro.eval.bfcl.locate", env="eval-vllm", gpu_env_always=True),
    Kind("generate_bfcl", "toolcall_repro.eval.bfcl.jobs", cluster="evaluate", env="eval-bfcl"),
    Kind("score_bfcl", "toolcall_repro.eval.bfcl.jobs", env="eval-bfcl"),
    Kind("score_heldout", "toolcall_repro.eval.heldout", cluster="evaluate", env="eval-vllm",
         scores=(("heldout", "summary"), ("heldout", "variance"))),  # fmt: skip
    Kind("summarise_bfcl", "toolcall_repro.eval.bfcl.jobs", scores=(("bfcl", "summary"),)),
    Kind("summarise_bfcl_variance", "toolcall_repro.eval.bfcl.jobs", "summarise_bfcl", scores=(("bfcl", "variance"),)),
    Kind("download_acebench", "toolcall_repro.eval.acebench.jobs"),
    Kind("synthesize_acebench", "toolcall_repro.eval.acebench.jobs"),
    Kind("score_acebench", "toolcall_repro.eval.acebench.jobs", cluster="evaluate", env="eval-vllm"),
    Kind("summarise_acebench", "toolcall_repro.eval.acebench.jobs", scores=(("acebench", "summary"),)),
    Kind("check_general_capability", "toolcall_repro.eval.general.jobs", cluster="evaluate", env="eval-vllm",
         scores=(("general", "summary"),)),  # fmt: skip
    # a benchmark from outside the package: its module is the job's (options.module), not the row's
    Kind("score_benchmark", "", cluster="evaluate", env="eval-vllm"),
    # report.smk
    Kind("make_tables", "toolcall_repro.analysis.jobs"),
    Kind("make_figures", "toolcall_repro.analysis.jobs"),
    Kind("write_provenance", "toolcall_repro.provenance"),
    Kind("archive_results", "toolcall_repro.archive"),
    Kind("archive_efficiency", "toolcall_repro.archive", "archive_results"),
)
PLUGIN_RULE = "score_benchmark"
# The stages a job (or `toolcall-repro stage`) can name: every row's function, a twin's being its original's.
STAGES: dict[str, str] = {k.stage: k.module for k in KINDS.values() if k.module}


class SheetError(KeyError):
    """A rule or stage the sheet has no row for: names what it has."""

    def __str__(self) -> str:
        return str(self.args[0])


def kind(rule: str) -> Kind:
    if rule not in KINDS:
        raise SheetError(f"no job kind {rule!r} in the sheet (toolcall_repro.sheet); kinds: {sorted(KINDS)}")
    return KINDS[rule]


def plugin_rule(benchmark: str) -> str:
    """The name a benchmark registered outside the package scores under (its manifests, its score rule)."""
    return f"score_{benchmark}"


def score_rules(benchmark: str, plugin: bool = False) -> dict[str, str]:
    """{score kind: the rule whose manifest records that file} of a benchmark: the sheet's rows that write
    its scores; a plug-in's summary is its score_<name> job's (score_benchmark)."""
    if plugin:
        return {"summary": plugin_rule(benchmark)}
    return {kind: k.rule for k in KINDS.values() for (bench, kind) in k.scores if bench == benchmark}


def cluster_rules() -> dict[str, str]:
    """{rule: resource class} of every rule that holds GPUs at paper scale: the slurm profile gives each
    its site settings (profiles/slurm/config.yaml, `set-resources`)."""
    return {k.rule: k.cluster for k in KINDS.values() if k.cluster}


def venv_of(spec: Mapping) -> str:
    """Which venv of the venv deployment (scripts/install-cluster-envs.sh) runs a job spec: `verl` for a
    rule whose paper-scale env is train-verl or eval-vllm (a plug-in score job: options.module), else
    `main`."""
    options = spec.get("options") or {}
    rule = PLUGIN_RULE if options.get("module") else (spec.get("rule") or spec["stage"])
    return "verl" if rule in KINDS and KINDS[rule].env in VERL_ENVS else "main"


class JobSheet:
    """The sheet for one validated config: each rule's cluster resources and conda env, a training job's
    verl layout.

    paper_scale: `engines.training: verl` (each GPU rule in its own env; else cpu.yaml); cuda: the GPU
    envs' CUDA major (engines.cuda); verl: train.verl (default: one node, no GPUs: the local engine);
    classes: config `resources.<class>` (paper scale: the GPUs of each class's jobs, over the defaults)."""

    def __init__(self, config: Mapping):
        self.config = config  # read as asked: the experiment's tests build it from parts of a config

    @property
    def paper_scale(self) -> bool:
        return self.config["engines"]["training"] == "verl"

    @property
    def cuda(self) -> int:
        """engines.cuda: the CUDA major of the GPU envs (the schema holds it to gpu_driver.CUDA_CHOICES)."""
        from toolcall_repro.gpu_driver import CUDA_MAJOR

        return int(self.config["engines"].get("cuda", CUDA_MAJOR))

    @property
    def verl(self) -> dict:
        """train.verl as configured (default: one node, no GPUs: the local engine)."""
        return dict(self.config["train"].get("verl") or {"nodes": 1, "gpus_per_node": 0})

    def _class(self, name: str) -> dict:
        return dict((self.config.get("resources") or {}).get(name, {}))

    def train_resources(self) -> dict:
        """SLURM resources of a training job from train.verl: one 8-GPU node, or several nodes;
        resources.train over them.

        The GPU count is the job's total; the GPU type, constraint and time are the site's (the slurm
        profile's site settings). Several nodes also ask for one task per node (Ray head and workers
        through srun; mpi=srun keeps the jobstep plugin from wrapping the launcher in a one-task srun).
        """
        nodes, per_node = self.verl["nodes"], self.verl["gpus_per_node"]
        res = {"gpu": nodes * per_node, "nodes": nodes, "tasks_per_gpu": 0}
        if per_node == 0:
            res = {"gpu": 0, "nodes": 1}
        elif nodes > 1:
            res.update(tasks=nodes, mpi="srun")
        return {**res, **self._class("train")}

    def job_verl(self) -> dict:
        """train.verl as a training job gets it: its `verl` option with the job's nodes (train_resources)."""
        return {**self.verl, "nodes": self.train_resources()["nodes"]}

    def resources(self, rule: str) -> dict:
        """The rule's `resources:`: gpu=0 for a CPU job; a GPU class's from config (a training job's
        train_resources)."""
        cls = kind(rule).cluster
        if cls == "train":
            return self.train_resources()
        if cls is None:
            return {"gpu": 0}
        return {"gpu": 0, **self._class(cls)}

    def env(self, rule: str) -> str:
        """The rule's `conda:` file (relative to workflow/rules/): its own env built for engines.cuda at
        paper scale, cpu.yaml on the embedded default."""
        from toolcall_repro.gpu_driver import env_name

        k = kind(rule)
        if k.gpu_env_always or (self.paper_scale and k.env != "cpu"):
            return f"../envs/{env_name(k.env, self.cuda)}.yaml"
        return "../envs/cpu.yaml"


def main(argv: list[str] | None = None) -> int:
    """`python -m toolcall_repro.sheet venv SPEC_JSON`: the venv of a job (scripts/cluster-envs-python.sh)."""
    import json

    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2 or argv[0] != "venv":
        print("usage: python -m toolcall_repro.sheet venv SPEC_JSON", file=sys.stderr)
        return 2
    print(venv_of(json.loads(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
