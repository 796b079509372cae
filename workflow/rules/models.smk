# Models: the base model every later stage starts from (the tiny model's warm start on the embedded
# default, hub snapshots at paper scale), between the data it is warm-started on and the filters that
# roll it out. Which of the two a run uses is the experiment's base_model_dir (toolcall_repro.experiment): no rule is defined
# or left out by config.


use rule job_frame as warmstart_base_model with:
    input:
        samples=[LAYOUT.samples(source) for source in SOURCES],
    output:
        **early_model_output(),
        model=directory(LAYOUT.base_model()),
        manifest=LAYOUT.manifest("warmstart_base_model"),
        # model.tiny.early_step: the same run's earlier weights, a filter policy weaker than the RL start
    log:
        LAYOUT.log("warmstart_base_model"),
    benchmark:
        LAYOUT.benchmark("warmstart_base_model")
    threads: WARMSTART_THREADS
    params:
        # lambdas: evaluated only when the DAG needs the warm start (config/paper.yaml has no model.tiny).
        # Torch threads are config, not {threads}: --cores 1 would scale {threads} down and change the
        # float sums, hence the weights.
        **job(
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


# Paper scale: hub models (base, per-setting policies, the multi-turn filter model) are snapshotted into
# the results tree by this local rule, which with download_source is all that needs the network.
localrules:
    download_model,


use rule job_frame as download_model with:
    output:
        model=directory(LAYOUT.hub_model("{slug}")),
        manifest=LAYOUT.manifest("download_model", "{slug}"),
    log:
        LAYOUT.log("download_model", "{slug}"),
    benchmark:
        LAYOUT.benchmark("download_model", "{slug}")
    params:
        **job(
            "download_model",
            config=lambda w: {
                "hub_id": EXP.models.hub_id(w.slug),
                "revision": EXP.models.model_revision(w.slug),
            },
        ),
