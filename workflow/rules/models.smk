# Models: the base model every later stage starts from (the tiny model's warm start on the embedded
# default, hub snapshots at paper scale), between the data it is warm-started on and the filters that
# roll it out. Which of the two a run uses is base_model_dir()'s choice (common.smk): no rule is defined
# or left out by config.


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
        # lambdas: evaluated only when the DAG needs the warm start (config/paper.yaml has no model.tiny)
        cfg=lambda w: as_json(subtree("model", "tiny")),
        record=lambda w: as_json(
            {
                "model.tiny": subtree("model", "tiny"),
                "filter.reserve_fraction": subtree("filter", "reserve_fraction"),
                "engines.warmstart_threads": WARMSTART_THREADS,
            }
        ),
        seeds=lambda w: as_json(
            {
                "model": subtree("model", "tiny", "seed"),
                "reserve": subtree("filter", "seed"),
            }
        ),
        seed=lambda w: subtree("model", "tiny", "seed"),
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
