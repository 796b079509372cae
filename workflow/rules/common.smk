import json
import os

from snakemake.utils import validate


report: "../report/workflow.rst"


# A bad config fails here, before any job, with the offending key named.
validate(config, "../schemas/config.schema.yaml")

RUN = f"results/{config['run_id']}"
ENVS = "../envs"
PAPER_SCALE = config["engines"]["training"] == "verl"
THREADS = config["engines"]["threads"]
SETTINGS = ["single_turn", "multi_turn"]
SOURCES = ["xlam", "toolace", "looptool"]


wildcard_constraints:
    setting="single_turn|multi_turn",
    source="|".join(SOURCES + ["tooln1"]),
    dataset="single_turn|multi_turn|format_single|format_multi|tooln1",
    variant="[a-z][a-z0-9_]*",
    model="[a-z][a-z0-9-]*",
    protocol="[a-z][a-z0-9]*",
    seed=r"\d+",
    slug=r"[A-Za-z0-9._-]+--[A-Za-z0-9._-]+",


def R(*parts):
    """Path under this run's results tree."""
    return "/".join([RUN, *parts])


def subtree(*keys, cfg=None):
    """The config subtree at keys: what a rule gets, so that only its own knobs trigger a rerun."""
    node = config if cfg is None else cfg
    for k in keys:
        node = node[k]
    return node


def as_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def stage_resources(stage, **defaults):
    """Cluster resources for a stage from config['resources'][stage] (paper scale), else the defaults."""
    merged = dict(defaults)
    merged.update(config.get("resources", {}).get(stage, {}))
    return merged


# Every job runs through the provenance wrapper, which times it and writes its manifest (inputs,
# outputs, config subtree + hash, git state, package versions, seeds, wall-clock and CPU/GPU seconds).
PROV = (
    "python -m toolcall_repro.provenance run --rule {rule} --manifest {output.manifest:q}"
    " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
    " --gpus {resources.gpu} --"
)


def manifest(rule_name, key="all"):
    return R("manifests", rule_name, f"{key}.json")


# --- model tags ---------------------------------------------------------------------------------------


def hub_model_dir(hub_id):
    return R("models", "hub", hub_id.replace("/", "--"))


def slug_to_hub_id(slug):
    return slug.replace("--", "/")


def model_path(name):
    """A model named in config: a local directory as is, else a hub id snapshotted by download_model."""
    return name if os.path.isdir(name) else hub_model_dir(name)


def base_model_dir():
    base = config["model"]["base"]
    return R("models", "base") if base == "tiny" else model_path(base)


def train_dir(dataset, variant):
    return R("train", dataset, variant)


def model_dir(tag):
    """Directory of the HF weights behind an evaluation model tag."""
    spec = config["evaluate"]["models"][tag]
    if spec["source"] == "base":
        return base_model_dir()
    if spec["source"] == "train":
        return train_dir(spec["setting"], spec["variant"]) + "/final"
    return train_dir(spec["dataset"], config["train"]["format_study"]["variant"]) + "/final"


def model_spec(tag):
    return {"tag": tag, **config["evaluate"]["models"][tag]}


# --- targets ------------------------------------------------------------------------------------------


def training_runs():
    return [(s, v) for s in SETTINGS for v in config["train"]["runs"].get(s, [])]


def study_jobs(study):
    spec = config["evaluate"]["studies"][study]
    seeds = spec.get("seeds", config["evaluate"]["seeds"])
    return [(m, p, seeds) for m in spec["models"] for p in spec["protocols"]]


def bfcl_summaries(study):
    return [
        R("eval", "bfcl", m, p, "summary.json") for m, p, _ in study_jobs(study)
    ]


# ACEBench data: the paper config downloads it at a pinned commit; the embedded default reads the copy in
# ../shared when present and leaves ACEBench out of the DAG (with a warning) when it is not.
ACEBENCH_DIR = config["evaluate"]["acebench"]["data_dir"] or os.path.join(
    "..", "shared", "data", "acebench", "data_all", "data_en"
)
HAVE_ACEBENCH = os.path.isdir(ACEBENCH_DIR)
if not HAVE_ACEBENCH:
    print(f"toolcall-repro: no ACEBench data at {ACEBENCH_DIR}; ACEBench targets are left out.")


def acebench_summaries():
    if not HAVE_ACEBENCH:
        return []
    return [R("eval", "acebench", m, ACEBENCH_PROTOCOL, "summary.json") for m in ACEBENCH_MODELS]


ACEBENCH_MODELS = config["evaluate"]["acebench"].get("models", ["base"])
ACEBENCH_PROTOCOL = config["evaluate"]["acebench"].get("protocol", "stronger")


def all_bfcl_summaries():
    studies = [s for s in config["evaluate"]["studies"] if s != "seed_variance"]
    return sorted({f for s in studies for f in bfcl_summaries(s)})


def all_eval_outputs():
    """Everything the results stage reads from evaluation."""
    outs = list(all_bfcl_summaries())
    if "seed_variance" in config["evaluate"]["studies"]:
        outs += [R("eval", "bfcl", m, p, "variance.json") for m, p, _ in study_jobs("seed_variance")]
    outs += acebench_summaries()
    if "general" in config["evaluate"]:
        outs += [R("eval", "general", m, "summary.json") for m in config["evaluate"]["general"]["models"]]
    return outs


def all_targets():
    targets = [
        R("data", "filter_report.json"),
        *[train_dir(s, v) + "/summary.json" for s, v in training_runs()],
        R("tables", "index.md"),
        R("figures", "index.md"),
        R("provenance.json"),
        R("archive", f"{config['run_id']}.tar.gz"),
    ]
    return targets


# Data, bookkeeping and report rules run on the submit host (compute nodes are often offline).
localrules:
    normalise_source,
    subset_format_study,
    pool_tooln1,
    report_filter,
    summarise_bfcl,
    summarise_bfcl_variance,
    summarise_acebench,
    make_tables,
    make_figures,
    write_provenance,
    archive_results,
    bfcl_all,
    study_seed_variance,
    study_template,
    study_thinking,
    study_prompt_ablation,
    study_data_format,
    table4,
    acebench_all,
    general_all,
