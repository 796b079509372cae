# Training: the base model, then GRPO (vanilla vs efficient vs each speed-up alone) per setting.


if config["model"]["base"] == "tiny":

    rule warmstart_base_model:
        input:
            samples=expand(R("data", "normalised", "{source}.parquet"), source=SOURCES),
        output:
            **early_model_output(),
            model=directory(R("models", "base")),
            manifest=manifest("warmstart_base_model"),
            # model.tiny.early_step: the same run's earlier weights, a filter policy weaker than the RL start
        log:
            R("logs", "warmstart_base_model.log"),
        benchmark:
            R("benchmarks", "warmstart_base_model.tsv")
        conda:
            "../envs/cpu.yaml"
        threads: WARMSTART_THREADS
        resources:
            gpu=0,
        params:
            cfg=as_json(subtree("model", "tiny")),
            record=as_json(
                {
                    "model.tiny": subtree("model", "tiny"),
                    "filter.reserve_fraction": subtree("filter", "reserve_fraction"),
                    "engines.warmstart_threads": WARMSTART_THREADS,
                }
            ),
            seeds=as_json(
                {
                    "model": subtree("model", "tiny", "seed"),
                    "reserve": subtree("filter", "seed"),
                }
            ),
            seed=subtree("model", "tiny", "seed"),
            reserve=subtree("filter", "reserve_fraction"),
            reserve_seed=subtree("filter", "seed"),
            # torch threads from config, not {threads}: --cores 1 would scale {threads} down and change
            # the float sums, hence the weights
            torch_threads=WARMSTART_THREADS,
            early=lambda w, output: (
                f"--early-out {output.early}" if "early" in output.keys() else ""
            ),
        shell:
            "python -m toolcall_repro.provenance run --rule warmstart_base_model --manifest {output.manifest:q}"
            " --config {params.record:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
            " --gpus {resources.gpu} --"
            " python -m toolcall_repro.engines.local.warmstart --train {input.samples}"
            " --out {output.model} --config {params.cfg:q} --seed {params.seed}"
            " --reserve-fraction {params.reserve} --reserve-seed {params.reserve_seed}"
            " --threads {params.torch_threads} {params.early} > {log} 2>&1"


# Paper scale: hub models (base, per-setting policies, the multi-turn filter model) are snapshotted into
# the results tree by this local rule, which with download_source is all that needs the network.
localrules:
    download_model,


rule download_model:
    output:
        model=directory(R("models", "hub", "{slug}")),
        manifest=manifest("download_model", "{slug}"),
    log:
        R("logs", "download_model", "{slug}.log"),
    benchmark:
        R("benchmarks", "download_model", "{slug}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        cfg=lambda w: as_json(
            {"hub_id": slug_to_hub_id(w.slug), "revision": model_revision(w.slug)}
        ),
        seeds=as_json({}),
        hub_id=lambda w: slug_to_hub_id(w.slug),
        revision=lambda w: model_revision_arg(w.slug),
    shell:
        "python -m toolcall_repro.provenance run --rule download_model --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {resources.gpu} --"
        " python -m toolcall_repro.data.download model --hub-id {params.hub_id} {params.revision}"
        " --out {output.model} > {log} 2>&1"


# One rule for both engines: local CPU GRPO on the embedded default, verl on SLURM at paper scale
# (1 node x 8 GPUs, or several nodes with Ray started through srun: train.verl.nodes).
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
    log:
        R("logs", "train_grpo", "{dataset}-{variant}.log"),
    benchmark:
        R("benchmarks", "train_grpo", "{dataset}-{variant}.tsv")
    conda:
        "../envs/train-verl.yaml" if PAPER_SCALE else "../envs/cpu.yaml"
    threads: THREADS
    resources:
        **train_resources(),
    params:
        cfg=lambda w: as_json(run_config(w.dataset, w.variant)),
        seeds=as_json({"train": subtree("train", "seed")}),
        seed=subtree("train", "seed"),
        engine=config["engines"]["training"],
        out_dir=lambda w, output: os.path.dirname(output.summary),
        verl=as_json(VERL),
        gpus=VERL["nodes"] * VERL["gpus_per_node"],
        launcher=os.path.join("workflow", "scripts", "verl", "launch_verl.sh"),
        torch_threads=THREADS,  # from config, never scaled by --cores: same seed, same numbers
    shell:
        "python -m toolcall_repro.provenance run --rule train_grpo --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {params.gpus} --"
        " python -m toolcall_repro.engines.train --engine {params.engine} --train {input.train}"
        " --heldout {input.heldout} --base {input.base} --config {params.cfg:q}"
        " --out {params.out_dir} --seed {params.seed} --threads {params.torch_threads}"
        " --nodes {resources.nodes} --verl {params.verl:q} --verl-launcher {params.launcher}"
        " > {log} 2>&1"


# The efficiency experiment: the same training rule at other seeds (train.efficiency.runs); seed
# train.seed is the run above, so every seed of a variant shares one held-out set and one start.
use rule train_grpo as train_grpo_seed with:
    output:
        metrics=R("train", "{dataset}", "{variant}", "seed{seed}", "metrics.jsonl"),
        curve=R("train", "{dataset}", "{variant}", "seed{seed}", "curve.jsonl"),
        summary=R("train", "{dataset}", "{variant}", "seed{seed}", "summary.json"),
        final=directory(R("train", "{dataset}", "{variant}", "seed{seed}", "final")),
        manifest=manifest("train_grpo", "{dataset}-{variant}-seed{seed}"),
    log:
        R("logs", "train_grpo", "{dataset}-{variant}-seed{seed}.log"),
    benchmark:
        R("benchmarks", "train_grpo", "{dataset}-{variant}-seed{seed}.tsv")
    params:
        cfg=lambda w: as_json(run_config(w.dataset, w.variant)),
        seeds=lambda w: as_json({"train": int(w.seed)}),
        seed=lambda w: int(w.seed),
        engine=config["engines"]["training"],
        out_dir=lambda w, output: os.path.dirname(output.summary),
        verl=as_json(VERL),
        gpus=VERL["nodes"] * VERL["gpus_per_node"],
        launcher=os.path.join("workflow", "scripts", "verl", "launch_verl.sh"),
        torch_threads=THREADS,


localrules:
    report_efficiency,
    efficiency,


# The efficiency report: time to vanilla's peak with intervals, the noise floor, non-inferiority,
# per-epoch group types and costs, figures; its own target so it runs without the evaluation stage.
rule report_efficiency:
    input:
        training=efficiency_summaries(),
    output:
        index=report(
            R("efficiency", "index.md"),
            caption="../report/tables.rst",
            category="Efficiency",
        ),
        manifest=manifest("report_efficiency"),
    log:
        R("logs", "report_efficiency.log"),
    benchmark:
        R("benchmarks", "report_efficiency.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        cfg=as_json(
            {
                "efficiency": config["train"].get("efficiency") or {},
                "variants": subtree("train", "variants"),
            }
        ),
        seeds=as_json({}),
        run_dir=lambda w, output: os.path.dirname(os.path.dirname(output.index)),
        out_dir=lambda w, output: os.path.dirname(output.index),
    shell:
        "python -m toolcall_repro.provenance run --rule report_efficiency --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {resources.gpu} --"
        " python -m toolcall_repro.analysis efficiency --run-dir {params.run_dir}"
        " --config {params.cfg:q} --out-dir {params.out_dir} > {log} 2>&1"


rule efficiency:
    input:
        R("efficiency", "index.md"),
