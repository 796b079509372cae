import json
import os
import posixpath

import yaml

from toolcall_repro.archive import archive_name, code_tag
from toolcall_repro.preflight import (
    check_config,
    eval_model,
    filter_policy_model,
    thinking_of,
)
from toolcall_repro.provenance import config_hash
from toolcall_repro.runconfig import (
    SETTINGS,
    ConfigError,
    compose_run,
    dataset_setting as _dataset_setting,
    schema_problem,
)


report: "../report/workflow.rst"


# A bad config fails here, before any job, in a few lines naming the key, the value and what is allowed:
# the schema (one key at a time; its first complaint, not the schema and config dump), then every
# training run the DAG builds (cross-key rules: m <= n, engine limits, probe schedule; preflight.py).
with open(os.path.join(workflow.basedir, "schemas", "config.schema.yaml")) as f:
    _problem = schema_problem(config, yaml.safe_load(f))
if _problem:
    raise ConfigError(_problem)
check_config(config)  # every cross-key rule (preflight.validate_config)


RUN = os.path.join("results", config["run_id"])
PAPER_SCALE = config["engines"]["training"] == "verl"
THREADS = config["engines"]["threads"]
WARMSTART_THREADS = config["engines"].get("warmstart_threads", THREADS)
# Every job's CPU kernels (torch, MKL, oneDNN), set by the job entry before torch loads: toolcall_repro.machine.
CPU_CAPABILITY = config["engines"]["cpu_capability"]
SOURCES = ["xlam", "toolace", "looptool"]
VERL = config["train"].get("verl", {"nodes": 1, "gpus_per_node": 0})
# Archives live outside results/<run_id> (Snakemake deletes the old outputs of every job it reruns), named
# for the run id, the code commit and the config's sha256: a changed knob writes a second archive beside
# the first, the same code and config the same name.
ARCHIVE_CFG = {"weights": "final", "dir": os.path.join("results", "archives")}
ARCHIVE_CFG.update(config.get("archive", {}))
ARCHIVE = os.path.join(
    ARCHIVE_CFG["dir"],
    archive_name(config["run_id"], code_tag(workflow.basedir), config_hash(config)),
)


wildcard_constraints:
    setting="single_turn|multi_turn",
    source="xlam|toolace|looptool|tooln1",
    dataset="single_turn|multi_turn|format_single|format_multi|tooln1",
    variant="[a-z][a-z0-9_]*",
    model="[a-z][a-z0-9-]*",
    protocol="[a-z][a-z0-9]*",
    seed=r"\d+",
    slug=r"[A-Za-z0-9._-]+--[A-Za-z0-9._-]+",


def R(*parts):
    """Path under this run's results tree."""
    return os.path.join(RUN, *parts)


def subtree(*keys):
    """The config subtree at keys: what a job gets, so that only its own knobs trigger a rerun."""
    node = config
    for k in keys:
        node = node[k]
    return node


def as_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def heldout_cfg():
    """How every filter chain carves its held-out split (data.split: the reserve)."""
    return {k: subtree("filter", k) for k in ("heldout_fraction", "reserve_fraction")}


def stage_resources(stage, **defaults):
    """Cluster resources of a stage: config['resources'][stage] (paper scale) over the defaults."""
    merged = dict(defaults)
    merged.update(config.get("resources", {}).get(stage, {}))
    return merged


def train_resources():
    """SLURM resources of a training job from train.verl: one 8-GPU node, or several nodes.

    The GPU count is the job's total; the GPU type, constraint and time are the site's (the slurm
    profile's site settings). Several nodes also ask for one task per node (Ray head and workers
    through srun; mpi=srun keeps the jobstep plugin from wrapping the launcher in a one-task srun).
    """
    nodes, per_node = VERL["nodes"], VERL["gpus_per_node"]
    if per_node == 0:
        res = {"gpu": 0, "nodes": 1}
    elif nodes == 1:
        res = {"gpu": per_node, "nodes": 1, "tasks_per_gpu": 0}
    else:
        res = {
            "gpu": nodes * per_node,
            "nodes": nodes,
            "tasks": nodes,
            "mpi": "srun",
            "tasks_per_gpu": 0,
        }
    res.update(config.get("resources", {}).get("train", {}))
    return res


def manifest(rule_name, key="all"):
    """Each job's manifest, written by the job entry (`python -m toolcall_repro.job`) when the job ends."""
    return R("manifests", rule_name, f"{key}.json")


def _named(files):
    return {k: v if isinstance(v, str) else list(v) for k, v in files.items()}


def job(stage, config=None, seeds=None, gpus=None, rule=None, **options):
    """A rule's params.job: what the job runs, as JSON for `python -m toolcall_repro.job` (job.py).

    config (the subtree the stage reads and the manifest records), seeds, every option and gpus are
    values or functions of the wildcards, and of nothing else: Snakemake records a param for its rerun
    trigger only when its function does not read input, output, threads or resources, so a changed knob
    reruns the jobs that read it. The paths travel in params.files (rule_files). `rule` names a job that has
    no manifest output; gpus overrides resources.gpu.
    """

    def value(v, w):
        return v(w) if callable(v) else v

    def spec(wildcards):
        out = {
            "stage": stage,
            "config": value(config, wildcards),
            "seeds": value(seeds, wildcards) or {},
            "options": {
                "cpu_capability": CPU_CAPABILITY,
                **{k: value(v, wildcards) for k, v in options.items()},
            },
        }
        if gpus is not None:
            out["gpus"] = int(value(gpus, wildcards))
        if rule:
            out["rule"] = rule
        return as_json(out)

    return spec


def rule_files(wildcards, input, output, resources):
    """A rule's params.files: its own named input and output, every path (named or not), the GPUs it
    holds (resources.gpu), and its name from output.manifest (manifests/<rule>/<key>.json).
    """
    out = {
        "input": _named(input),
        "output": _named(output),
        "files": {"input": list(input), "output": list(output)},
        "gpus": int(resources.get("gpu", 0) or 0),
    }
    if "manifest" in output.keys():
        out["rule"] = os.path.basename(os.path.dirname(output.manifest))
    return as_json(out)


# Every rule's body: the job entry runs the stage and writes the manifest (src/toolcall_repro/job.py).
JOB = "python -m toolcall_repro.job {params.job:q} {params.files:q} > {log} 2>&1"


# --- data ----------------------------------------------------------------------------------------------


def synthetic_config(source):
    """The generator's knobs for one source: rows, and rows made malformed on purpose."""
    syn = config["data"]["synthetic"]
    if source not in syn:
        raise ValueError(
            f"config data.synthetic.{source}: how many synthetic rows? (not set)"
        )
    return {"rows": syn[source], "malformed": syn["malformed_per_source"]}


def raw_source(source):
    """A source's raw rows: the synthetic twin (data.mode synthetic) or the Hub download."""
    if config["data"]["mode"] == "synthetic":
        return R("data", "raw", f"{source}.jsonl")
    return R("data", "raw", "hub", f"{source}.jsonl")


def tooln1_sources():
    """Tool-N1's own RL rows when data.sources names them, else its ingredients: xLAM + ToolACE."""
    return ["tooln1"] if "tooln1" in config["data"]["sources"] else ["xlam", "toolace"]


def filter_steps():
    """The chains the report merges; the Tool-N1 pool only when the DAG trains the filter policy."""
    steps = ["single_turn", "multi_turn", "format_study"]
    policies = {
        config["model"].get("filter_policy"),
        config["model"].get("filter_policy_multi_turn"),
    }
    return steps + (["pool_tooln1"] if "train" in policies else [])


def reported_sources():
    pooled = tooln1_sources() if "pool_tooln1" in filter_steps() else []
    return SOURCES + [s for s in pooled if s not in SOURCES]


# --- models ---------------------------------------------------------------------------------------------


def hub_model_dir(hub_id):
    return R("models", "hub", hub_id.replace(posixpath.sep, "--"))


def slug_to_hub_id(slug):
    return slug.replace("--", posixpath.sep)


def model_revision(slug):
    """A hub model's pinned revision (model.revisions); the download record names the commit read."""
    return config["model"].get("revisions", {}).get(slug_to_hub_id(slug))


def model_path(name):
    """A model named in config: a local directory as is, else a hub id snapshotted by download_model."""
    return name if os.path.isdir(name) else hub_model_dir(name)


def early_model_output():
    """The warm start's earlier snapshot, when model.tiny.early_step asks for one."""
    tiny = config["model"].get("tiny") or {}
    return (
        {"early": directory(R("models", "base_early"))}
        if tiny.get("early_step")
        else {}
    )


def base_model_dir():
    base = config["model"]["base"]
    return R("models", "base") if base == "tiny" else model_path(base)


def final_model_dir(dataset, variant):
    return R("train", dataset, variant, "final")


def filter_policy_dir(setting):
    """The policy whose rollouts filter the data (config model.filter_policy).

    base: the base model (the warm-started tiny model on the embedded default); early: the tiny model's
    warm start at model.tiny.early_step (weaker than the RL start, as the paper's filter policy); train: the paper's
    policy, GRPO-trained 80 steps on Tool-N1's data (xLAM + ToolACE pooled, unfiltered); else a path
    or hub id. Multi-turn filtering uses model.filter_policy_multi_turn (the paper's "stronger model").
    """
    key = "filter_policy_multi_turn" if setting == "multi_turn" else "filter_policy"
    policy = config["model"].get(key) or config["model"].get("filter_policy", "base")
    if policy == "base":
        return base_model_dir()
    if policy == "early":  # the tiny model's warm start at model.tiny.early_step
        return R("models", "base_early")
    if policy == "train":
        return final_model_dir("tooln1", "vanilla")
    return model_path(policy)


def model_dir(tag):
    """Directory of the weights behind an evaluation model tag."""
    spec = config["evaluate"]["models"][tag]
    if spec["source"] == "base":
        return base_model_dir()
    if spec["source"] == "train":
        return final_model_dir(spec["setting"], spec["variant"])
    return final_model_dir(spec["dataset"], config["train"]["format_study"]["variant"])


def model_spec(tag):
    return {"tag": tag, **config["evaluate"]["models"][tag]}


# --- training -----------------------------------------------------------------------------------------


def dataset_setting(dataset):
    return _dataset_setting(config, dataset)


def run_config(dataset, variant):
    """Hyper-parameters of one training run: its setting and its variant (runconfig.compose_run)."""
    return compose_run(config, dataset, variant)


def heldout_for(dataset):
    if dataset == "tooln1":
        return R("data", "train", "heldout_tooln1.parquet")
    return R("data", "train", f"heldout_{dataset_setting(dataset)}.parquet")


def policy_start_dir(dataset):
    """Weights a training run starts from: the setting's own model (paper scale) or the base model."""
    hub_id = config["train"]["settings"][dataset_setting(dataset)].get("model")
    return model_path(hub_id) if hub_id else base_model_dir()


def train_job(seeds):
    """params.job of a training run: its run config, its seeds, the engine and the launcher's options."""
    return job(
        "train",
        config=lambda w: run_config(w.dataset, w.variant),
        seeds=seeds,
        gpus=VERL["nodes"] * VERL["gpus_per_node"],
        engine=config["engines"]["training"],
        threads=THREADS,  # from config, never scaled by --cores: same seed, same numbers
        nodes=train_resources()["nodes"],
        verl=VERL,
        launcher=os.path.join("workflow", "scripts", "verl", "launch_verl.sh"),
    )


def training_runs():
    return [(s, v) for s in SETTINGS for v in config["train"]["runs"].get(s, [])]


def training_summaries():
    return [R("train", s, v, "summary.json") for s, v in training_runs()]


def efficiency_summaries():
    """Every run of the efficiency experiment: train.efficiency.runs, seed train.seed at the plain path."""
    spec = config["train"].get("efficiency") or {}
    out = []
    for setting, variants in sorted((spec.get("runs") or {}).items()):
        for variant, seeds in sorted(variants.items()):
            for seed in seeds:
                if seed == config["train"]["seed"]:
                    out.append(R("train", setting, variant, "summary.json"))
                else:
                    out.append(
                        R("train", setting, variant, f"seed{seed}", "summary.json")
                    )
    return out


# --- evaluation ---------------------------------------------------------------------------------------


def protocol_spec(protocol, seed, model):
    """An evaluation protocol for one model: the model's thinking switch (model.enable_thinking) too."""
    spec = dict(subtree("evaluate", "protocols", protocol))
    thinking = thinking_of(config, eval_model(config, model))
    return {
        "id": protocol,
        **spec,
        "seed": int(seed),
        "backend": config["engines"]["generation"],
        **({"enable_thinking": thinking} if thinking is not None else {}),
    }


def filter_job_config(chain):
    """A rollout filter's config: its chain's subtree, the held-out split and the policy's thinking switch."""
    thinking = thinking_of(config, filter_policy_model(config, chain))
    return {
        **subtree("filter", chain),
        **heldout_cfg(),
        **({"enable_thinking": thinking} if thinking is not None else {}),
    }


def study_jobs(study):
    spec = config["evaluate"]["studies"][study]
    seeds = spec.get("seeds", config["evaluate"]["seeds"])
    return [(m, p, seeds) for m in spec["models"] for p in spec["protocols"]]


def study_benchmarks(study):
    """Where a study runs: its `benchmarks` list, else BFCL and, when configured, the held-out reserve."""
    spec = config["evaluate"]["studies"][study]
    default = ["bfcl", "heldout"] if HELDOUT else ["bfcl"]
    return spec.get("benchmarks", default)


def bfcl_summaries(study):
    if study not in config["evaluate"]["studies"] or "bfcl" not in study_benchmarks(
        study
    ):
        return []
    return [R("eval", "bfcl", m, p, "summary.json") for m, p, _ in study_jobs(study)]


# The held-out reserve benchmark (eval/heldout.py): where the tiny model has skill, every study runs too.
# It reads the reserve's definition (filter.reserve_fraction, filter.seed: what the warm start skipped).
HELDOUT = config["evaluate"].get("heldout")
RESERVE_FRACTION = config["filter"]["reserve_fraction"]
RESERVE_SEED = config["filter"]["seed"]


def heldout_summaries(study=None):
    studies = [study] if study else list(config["evaluate"]["studies"])
    if not HELDOUT:
        return []
    out = []
    for s in studies:
        if s not in config["evaluate"]["studies"] or "heldout" not in study_benchmarks(
            s
        ):
            continue
        name = "variance.json" if s == "seed_variance" else "summary.json"
        out += [R("eval", "heldout", m, p, name) for m, p, _ in study_jobs(s)]
    return sorted(set(out))


def heldout_seeds(w):
    """Evaluation seeds, and the seed-variance study's seeds for its own (model, protocol) pairs."""
    evaluation = list(config["evaluate"]["seeds"])
    studies = config["evaluate"]["studies"]
    in_variance = "seed_variance" in studies and (w.model, w.protocol) in {
        (m, p) for m, p, _ in study_jobs("seed_variance")
    }
    return {
        "eval": evaluation,
        "variance": variance_seeds() if in_variance else evaluation,
    }


def heldout_training_sets():
    """Training sets whose conversations the held-out benchmark leaves out (GRPO and format-study data)."""
    return [
        R("data", "train", f"{d}.parquet")
        for d in (*SETTINGS, "format_single", "format_multi")
    ]


def bfcl_variance_summaries():
    if "seed_variance" not in config["evaluate"]["studies"]:
        return []
    return [
        R("eval", "bfcl", m, p, "variance.json")
        for m, p, _ in study_jobs("seed_variance")
    ]


def variance_seeds():
    studies = config["evaluate"]["studies"]
    return studies.get("seed_variance", {}).get("seeds", config["evaluate"]["seeds"])


def bfcl_seed_files(w, seeds=None):
    seeds = config["evaluate"]["seeds"] if seeds is None else seeds
    return [R("eval", "bfcl", w.model, w.protocol, f"seed{s}.json") for s in seeds]


def all_bfcl_summaries():
    studies = [s for s in config["evaluate"]["studies"] if s != "seed_variance"]
    return sorted({f for s in studies for f in bfcl_summaries(s)})


# ACEBench data: synthetic twins the pipeline writes (embedded default), the real English data downloaded
# at a pinned commit (paper scale), or a folder the user names (`local`). No folder outside the checkout is read.
ACEBENCH = config["evaluate"].get("acebench", {})
ACEBENCH_SOURCE = ACEBENCH.get("source", "synthetic")
ACEBENCH_DIRS = {
    "synthetic": R("data", "acebench", "synthetic"),
    "download": R("data", "acebench", "data_en"),
    "local": ACEBENCH.get("data_dir"),
}
ACEBENCH_DIR = ACEBENCH_DIRS[ACEBENCH_SOURCE]


def acebench_summaries():
    protocol = ACEBENCH.get("protocol", "stronger")
    return [
        R("eval", "acebench", m, protocol, "summary.json")
        for m in ACEBENCH.get("models", ["base"])
    ]


def acebench_seed_files(w):
    return [
        R("eval", "acebench", w.model, w.protocol, f"seed{s}.json")
        for s in config["evaluate"]["seeds"]
    ]


def general_summaries():
    general = config["evaluate"].get("general")
    if not general:
        return []
    return [R("eval", "general", m, "summary.json") for m in general["models"]]


LM_EVAL_RECORD = R("data", "lm_eval", "record.json")


def lm_eval_data():
    """lm-eval's task data, fetched on the submit host when its tasks read the Hub (not `local`)."""
    general = config["evaluate"].get("general") or {}
    tasks = [t.strip() for t in general.get("tasks", "").split(",")]
    if not set(tasks) - {"", "local"}:
        return []
    if not general.get("revisions"):
        raise ValueError(
            "evaluate.general.revisions: lm-eval tasks read the Hub, so each dataset needs a pinned "
            "revision (hub dataset id -> revision), e.g. {cais/mmlu: <sha>}; not set"
        )
    return [LM_EVAL_RECORD]


def lm_eval_tasks():
    """The hub-backed lm-eval tasks (not our local tool-choice task)."""
    tasks = subtree("evaluate", "general", "tasks").split(",")
    return ",".join(t.strip() for t in tasks if t.strip() not in ("", "local"))


def all_eval_outputs():
    """Everything the results stage reads from evaluation."""
    return [
        *all_bfcl_summaries(),
        *bfcl_variance_summaries(),
        *acebench_summaries(),
        *heldout_summaries(),
        *general_summaries(),
    ]


# --- results ----------------------------------------------------------------------------------------


def training_files(summaries):
    """A training run's result files, from its summary.json: what the analysis reads of the run."""
    return [
        os.path.join(os.path.dirname(path), name)
        for path in summaries
        for name in ("summary.json", "metrics.jsonl", "curve.jsonl")
    ]


# The manifest of the job that wrote each result file the analysis reads (it cites that manifest in every
# row), so that the analysis reads its declared inputs and nothing else.
SUMMARY_RULES = {
    ("bfcl", "summary.json"): "summarise_bfcl",
    ("bfcl", "variance.json"): "summarise_bfcl_variance",
    ("acebench", "summary.json"): "summarise_acebench",
    ("heldout", "summary.json"): "score_heldout",
    ("heldout", "variance.json"): "score_heldout",
}


def result_manifest(path):
    parts = os.path.relpath(path, RUN).split(os.sep)
    if parts[:2] == ["eval", "general"]:  # eval/general/<model>/summary.json
        return manifest("check_general_capability", parts[2])
    if parts[0] == "eval":  # eval/<benchmark>/<model>/<protocol>/<file>
        producer = SUMMARY_RULES[(parts[1], parts[4])]
        return manifest(producer, f"{parts[2]}-{parts[3]}")
    if parts[0] == "train":  # train/<dataset>/<variant>[/seed<k>]/<file>
        return manifest("train_grpo", "-".join(parts[1:-1]))
    if parts == ["data", "filter_report.json"]:
        return manifest("report_filter")
    raise ValueError(f"{path}: no rule is known to write it (result_manifest)")


def result_manifests(paths):
    return sorted({result_manifest(p) for p in paths})


def all_targets():
    return [
        R("data", "filter_report.json"),
        *training_summaries(),
        R("tables", "index.md"),
        R("figures", "index.md"),
        R("provenance.json"),
        ARCHIVE,
    ]
