# Data: raw sources in their own schemas (synthetic twins on the embedded default, the Hub at paper
# scale) -> normalised samples (one schema for both settings) + rejected rows, each with its reason.


localrules:
    normalise_source,


use rule job_frame as synthesize_source with:
    output:
        raw=LAYOUT.raw_source("{source}"),
        manifest=LAYOUT.manifest("synthesize_source", "{source}"),
    log:
        LAYOUT.log("synthesize_source", "{source}"),
    benchmark:
        LAYOUT.benchmark("synthesize_source", "{source}")
    params:
        **job(
            "synthesize_source",
            config=lambda w: synthetic_config(w.source),
            seeds={"data": subtree("data", "seed")},
            source=lambda w: w.source,
        ),


localrules:
    download_source,


# The only data rule that touches the network: compute nodes are often offline, so it runs locally.
# Its rows land under data/raw/hub/, the synthetic twins' under data/raw/: the experiment's raw_source (data.mode) picks.
use rule job_frame as download_source with:
    output:
        raw=LAYOUT.raw_source("{source}", hub=True),
        record=LAYOUT.download_record("{source}"),
        manifest=LAYOUT.manifest("download_source", "{source}"),
    log:
        LAYOUT.log("download_source", "{source}"),
    benchmark:
        LAYOUT.benchmark("download_source", "{source}")
    params:
        **job(
            "download_source",
            config=lambda w: subtree("data", "sources", w.source),
            source=lambda w: w.source,
        ),


use rule job_frame as normalise_source with:
    input:
        raw=lambda w: EXP.raw_source(w.source),
    output:
        samples=LAYOUT.samples("{source}"),
        rejects=LAYOUT.rejects("{source}"),
        report=LAYOUT.normalise_report("{source}"),
        manifest=LAYOUT.manifest("normalise_source", "{source}"),
    log:
        LAYOUT.log("normalise_source", "{source}"),
    benchmark:
        LAYOUT.benchmark("normalise_source", "{source}")
    params:
        **job(
            "normalise_source",
            config=lambda w: {"source": w.source},
        ),


localrules:
    download_lm_eval_data,


# lm-eval's task datasets at pinned revisions, into the HF_HOME the (offline) compute nodes share;
# in the DAG when check_general_capability's input (the experiment's lm_eval_data) asks for its record.
use rule job_frame as download_lm_eval_data with:
    output:
        record=LAYOUT.lm_eval_record(),
        manifest=LAYOUT.manifest("download_lm_eval_data"),
    log:
        LAYOUT.log("download_lm_eval_data"),
    benchmark:
        LAYOUT.benchmark("download_lm_eval_data")
    params:
        **job(
            "download_lm_eval_data",
            config=lambda w: {
                "tasks": EXP.lm_eval_tasks(),
                "revisions": subtree("evaluate", "general", "revisions"),
            },
        ),
