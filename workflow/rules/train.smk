# Training: the base model, then GRPO (vanilla vs efficient vs each speed-up alone) per setting.


def run_config(dataset, variant):
    """Hyper-parameters of one training run: its setting, its variant, and nothing else."""
    max_steps = None
    if dataset in SETTINGS:
        setting, epochs = dataset, None
    elif dataset == "tooln1":
        # The paper's filter policy: 80 GRPO steps on Tool-N1's data with the single-turn settings.
        setting, epochs, max_steps = "single_turn", None, FILTER_POLICY_STEPS
    else:
        setting = config["train"]["format_study"]["setting"]
        epochs = config["train"]["format_study"]["epochs"]
    hp = dict(subtree("train", "settings", setting))
    if epochs is not None:
        hp["epochs"] = epochs
    if max_steps is not None:
        hp["max_steps"] = max_steps
    var = dict(subtree("train", "variants", variant))
    if "n" in var:
        hp["n"] = var.pop("n")
    return {"setting": setting, "variant": variant, **hp, **var}


FILTER_POLICY_STEPS = 80


def policy_start_dir(dataset):
    """Weights a training run starts from: the setting's own model (paper scale) or the base model."""
    setting = run_config(dataset, "vanilla" if "vanilla" in config["train"]["variants"] else next(iter(config["train"]["variants"])))["setting"]
    hub_id = config["train"]["settings"][setting].get("model")
    return model_path(hub_id) if hub_id else base_model_dir()


def heldout_for(dataset):
    if dataset == "tooln1":
        return R("data", "train", "heldout_tooln1.parquet")
    setting = dataset if dataset in SETTINGS else config["train"]["format_study"]["setting"]
    return R("data", "train", f"heldout_{setting}.parquet")


if config["model"]["base"] == "tiny":

    rule warmstart_base_model:
        input:
            samples=expand(R("data", "normalised", "{source}.parquet"), source=SOURCES),
        output:
            model=directory(R("models", "base")),
            manifest=manifest("warmstart_base_model"),
        params:
            cfg=as_json(subtree("model", "tiny")),
            seeds=as_json({"model": subtree("model", "tiny", "seed")}),
            seed=subtree("model", "tiny", "seed"),
        log:
            R("logs", "warmstart_base_model.log"),
        benchmark:
            R("benchmarks", "warmstart_base_model.tsv")
        threads: THREADS
        resources:
            gpu=0,
        conda:
            f"{ENVS}/cpu.yaml"
        shell:
            PROV + " python -m toolcall_repro.engines.local.warmstart --train {input.samples}"
            " --out {output.model} --config {params.cfg:q} --seed {params.seed}"
            " --threads {threads} > {log} 2>&1"



# Paper scale: hub models (base, per-setting policies, the multi-turn filter model) are snapshotted
# into the results tree by this local rule, the only one besides download_source that needs the network.
localrules:
    download_model,


rule download_model:
    output:
        model=directory(R("models", "hub", "{slug}")),
        manifest=manifest("download_model", "{slug}"),
    params:
        cfg=lambda w: as_json({"hub_id": slug_to_hub_id(w.slug)}),
        seeds=as_json({}),
        hub_id=lambda w: slug_to_hub_id(w.slug),
    log:
        R("logs", "download_model", "{slug}.log"),
    benchmark:
        R("benchmarks", "download_model", "{slug}.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.data.download model --hub-id {params.hub_id}"
        " --out {output.model} > {log} 2>&1"


if PAPER_SCALE:
    TRAIN_CMD = (
        " bash workflow/scripts/verl/launch_verl.sh --train {input.train} --heldout {input.heldout}"
        " --base {input.base} --config {params.cfg:q} --out {params.out_dir} --seed {params.seed}"
        " --nodes {resources.nodes} --gpus-per-node {params.gpus_per_node}"
    )
else:
    TRAIN_CMD = (
        " python -m toolcall_repro.engines.local.grpo --train {input.train} --heldout {input.heldout}"
        " --base {input.base} --config {params.cfg:q} --out {params.out_dir} --seed {params.seed}"
        " --threads {threads} --resume"
    )

VERL = config["train"].get("verl", {"nodes": 1, "gpus_per_node": 0})


rule train_grpo:
    input:
        train=R("data", "train", "{dataset}.parquet"),
        heldout=lambda w: heldout_for(w.dataset),
        base=lambda w: policy_start_dir(w.dataset),
    output:
        metrics=R("train", "{dataset}", "{variant}", "metrics.jsonl"),
        curve=R("train", "{dataset}", "{variant}", "curve.jsonl"),
        summary=R("train", "{dataset}", "{variant}", "summary.json"),
        final=directory(R("train", "{dataset}", "{variant}", "final")),
        manifest=manifest("train_grpo", "{dataset}-{variant}"),
    params:
        cfg=lambda w: as_json(run_config(w.dataset, w.variant)),
        seeds=as_json({"train": subtree("train", "seed")}),
        seed=subtree("train", "seed"),
        out_dir=lambda w: train_dir(w.dataset, w.variant),
        gpus_per_node=VERL["gpus_per_node"],
    log:
        R("logs", "train_grpo", "{dataset}-{variant}.log"),
    benchmark:
        R("benchmarks", "train_grpo", "{dataset}-{variant}.tsv")
    threads: THREADS
    resources:
        **stage_resources(
            "train",
            gpu=VERL["nodes"] * VERL["gpus_per_node"],
            nodes=VERL["nodes"],
        ),
    conda:
        f"{ENVS}/train-verl.yaml" if PAPER_SCALE else f"{ENVS}/cpu.yaml"
    shell:
        PROV + TRAIN_CMD + " > {log} 2>&1"
