# Models: the base model every later stage starts from (the tiny model's warm start on the embedded
# default, hub snapshots at paper scale), between the data it is warm-started on and the filters that
# roll it out. Which of the two a run uses is the experiment's base_model_dir (toolcall_repro.experiment): no rule is defined
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
        # lambdas: evaluated only when the DAG needs the warm start (config/paper.yaml has no model.tiny).
        # Torch threads are config, not {threads}: --cores 1 would scale {threads} down and change the
        # float sums, hence the weights.
        files=files_param,
        job=job(
            "warmstart_base_model",
            config=lambda w: {
                "model.tiny": subtree("model", "tiny"),
                "filter.reserve_fraction": subtree("filter", "reserve_fraction"),
                "engines.warmstart_threads": WARMSTART_THREADS,
            },
            seeds=lambda w: {
                "model": subtree("model", "tiny", "seed"),
                "reserve": subtree("filter", "seed"),
            },
        ),
    shell:
        JOB


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
        files=files_param,
        job=job(
            "download_model",
            config=lambda w: {
                "hub_id": EXP.hub_id(w.slug),
                "revision": EXP.model_revision(w.slug),
            },
        ),
    shell:
        JOB
