import os

import yaml

from toolcall_repro.archive import code_tag
from toolcall_repro.experiment import SOURCES, Experiment
from toolcall_repro.jobspec import files_param, job_param
from toolcall_repro.preflight import check_config
from toolcall_repro.provenance import config_hash
from toolcall_repro.runconfig import ConfigError, schema_problem
from toolcall_repro.sheet import kind, plugin_rule


report: "../report/workflow.rst"


# A bad config fails here, before any job, in a few lines naming the key, the value and what is allowed:
# the schema (one key at a time; its first complaint, not the schema and config dump), then every
# training run the DAG builds (cross-key rules: m <= n, engine limits, probe schedule; preflight.py).
with open(os.path.join(workflow.basedir, "schemas", "config.schema.yaml")) as f:
    _problem = schema_problem(config, yaml.safe_load(f))
if _problem:
    raise ConfigError(_problem)
# The experiment's units (toolcall_repro.experiment): training runs, scores, studies, models, with
# their paths and manifests. The rules' input functions and targets read them from here, and each
# training run's config is composed once, checked here and passed as the rule's params.
EXP = Experiment(config)
check_config(config, experiment=EXP)  # every cross-key rule (preflight.validate_config)
# Every results path and manifest key, wildcard patterns too ("{dataset}"): toolcall_repro.layout.
LAYOUT = EXP.layout
RUN = EXP.run_dir
PAPER_SCALE = EXP.paper_scale
THREADS = config["engines"]["threads"]
WARMSTART_THREADS = config["engines"].get("warmstart_threads", THREADS)
# Every job's CPU kernels (torch, MKL, oneDNN), set by the job entry before torch loads: toolcall_repro.machine.
CPU_CAPABILITY = config["engines"]["cpu_capability"]
# The job sheet (toolcall_repro.sheet): each rule's stage, resources and env for this config. The CUDA major
# of the GPU envs (engines.cuda, default 13): 12 swaps train-verl and eval-vllm for their CUDA 12 twins
# (*-cu12.yaml), for GPU nodes whose NVIDIA driver is older than 580 (docs/cluster.md).
JOBS = EXP.jobs
CUDA = JOBS.cuda
# The run's archive, named for the code commit and the config (EXP.archive), and the `efficiency` target's
# own (it builds no tables, so the whole run's archive is not its end).
ARCHIVE_WEIGHTS = config.get("archive", {}).get("weights", "final")
CODE_TAG = code_tag(workflow.basedir)
ARCHIVE = EXP.archive(CODE_TAG, config_hash(config))
EFFICIENCY_ARCHIVE = EXP.archive(CODE_TAG, config_hash(config), "efficiency")
ACEBENCH = EXP.acebench


wildcard_constraints:
    setting="single_turn|multi_turn",
    source="xlam|toolace|looptool|tooln1",
    dataset="single_turn|multi_turn|format_single|format_multi|tooln1",
    variant="[a-z][a-z0-9_]*",
    model="[a-z][a-z0-9-]*",
    protocol="[a-z][a-z0-9]*",
    seed=r"\d+",
    slug=r"[A-Za-z0-9._-]+--[A-Za-z0-9._-]+",


def subtree(*keys):
    """The config subtree at keys: what a job gets, so that only its own knobs trigger a rerun."""
    node = config
    for k in keys:
        node = node[k]
    return node


def job_files(wildcards, input, output, resources):
    """params.files (toolcall_repro.jobspec.files_param) with engines.cuda, for a GPU job's driver check: a
    function of input, output and resources, so no rerun trigger records it (files_param says why).
    """
    return files_param(wildcards, input, output, resources, cuda=CUDA)


def job(name, stage=None, **spec):
    """A rule's params: files (job_files) and job (toolcall_repro.jobspec.job_param) of the sheet's row: the
    stage it runs (`stage`: a function of the wildcards, for score_benchmark's plug-ins), and for a
    `use rule X as Y` twin its own name."""
    row = kind(name)
    twin = name if row.twin_of else None
    return {
        "files": job_files,
        "job": job_param(
            stage or row.stage, cpu_capability=CPU_CAPABILITY, twin=twin, **spec
        ),
    }


# Every rule's body: the job entry runs the stage and writes the manifest (src/toolcall_repro/job.py).
JOB = "python -m toolcall_repro.job {params.job:q} {params.files:q} > {log} 2>&1"


def rule_env(name):
    """A rule's software environment (the sheet's): its own at paper scale (the build of engines.cuda),
    the CPU environment on the embedded default."""
    return JOBS.env(name)


def rule_resources(name):
    """A rule's cluster resources (the sheet's): gpu=0 for a CPU job; a GPU class's from config
    (config['resources'][class] at paper scale, a training job's from train.verl)."""
    return JOBS.resources(name)


def heldout_cfg():
    """How every filter chain carves its held-out split (data.split: the reserve)."""
    return {k: subtree("filter", k) for k in ("heldout_fraction", "reserve_fraction")}


def synthetic_config(source):
    """The generator's knobs for one source: rows, and rows made malformed on purpose."""
    syn = config["data"]["synthetic"]
    if source not in syn:
        raise ValueError(
            f"config data.synthetic.{source}: how many synthetic rows? (not set)"
        )
    return {"rows": syn[source], "malformed": syn["malformed_per_source"]}


def early_model_output():
    """The warm start's earlier snapshot, when model.tiny.early_step asks for one."""
    tiny = config["model"].get("tiny") or {}
    return {"early": directory(LAYOUT.early_model())} if tiny.get("early_step") else {}


def train_job(name, seeds):
    """params.job of a training run (train_grpo, or its `use rule` twin): its run config, its seeds, the
    engine and the launcher's options."""
    verl = JOBS.verl
    return job(
        name,
        config=lambda w: EXP.run_config(w.dataset, w.variant),
        seeds=seeds,
        gpus=verl["nodes"] * verl["gpus_per_node"],
        engine=config["engines"]["training"],
        threads=THREADS,  # from config, never scaled by --cores: same seed, same numbers
        trackers=config["engines"].get("tracking", []),  # live curves, never read back
        nodes=JOBS.train_resources()["nodes"],
        verl={**verl, "trackers": config["engines"].get("tracking", [])},
        launcher=os.path.join("workflow", "scripts", "verl", "launch_verl.sh"),
    )


def protocol_spec(protocol, seed, model):
    """An evaluation protocol for one model: the model's thinking switch (model.enable_thinking) too."""
    thinking = EXP.models.thinking(EXP.models.eval_model(model))
    return {
        "id": protocol,
        **EXP.protocol(protocol),
        "seed": int(seed),
        "backend": config["engines"]["generation"],
        **({"enable_thinking": thinking} if thinking is not None else {}),
    }


def filter_job_config(chain):
    """A rollout filter's config: its chain's subtree, the held-out split and the policy's thinking switch."""
    thinking = EXP.models.thinking(EXP.models.filter_policy_model(chain))
    return {
        **subtree("filter", chain),
        **heldout_cfg(),
        **({"enable_thinking": thinking} if thinking is not None else {}),
    }


def paths(units):
    return [u.path for u in units]


def all_targets():
    return [
        EXP.filter_report(),
        *(run.summary for run in EXP.training_runs()),
        LAYOUT.index("tables"),
        LAYOUT.index("figures"),
        LAYOUT.provenance(),
        ARCHIVE,
    ]
