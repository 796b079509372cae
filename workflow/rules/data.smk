# Data: raw sources in their own schemas (synthetic twins on the embedded default, the Hub at paper
# scale) -> normalised samples (one schema for both settings) + rejected rows, each with its reason.


localrules:
    normalise_source,


rule synthesize_source:
    output:
        raw=R("data", "raw", "{source}.jsonl"),
        manifest=manifest("synthesize_source", "{source}"),
    log:
        R("logs", "synthesize_source", "{source}.log"),
    benchmark:
        R("benchmarks", "synthesize_source", "{source}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "synthesize_source",
            config=lambda w: synthetic_config(w.source),
            seeds={"data": subtree("data", "seed")},
            source=lambda w: w.source,
        ),
    shell:
        JOB


localrules:
    download_source,


# The only data rule that touches the network: compute nodes are often offline, so it runs locally.
# Its rows land under data/raw/hub/, the synthetic twins' under data/raw/: the experiment's raw_source (data.mode) picks.
rule download_source:
    output:
        raw=R("data", "raw", "hub", "{source}.jsonl"),
        record=R("data", "raw", "hub", "{source}.jsonl.source.json"),
        manifest=manifest("download_source", "{source}"),
    log:
        R("logs", "download_source", "{source}.log"),
    benchmark:
        R("benchmarks", "download_source", "{source}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "download_source",
            config=lambda w: subtree("data", "sources", w.source),
            source=lambda w: w.source,
        ),
    shell:
        JOB


rule normalise_source:
    input:
        raw=lambda w: EXP.raw_source(w.source),
    output:
        samples=R("data", "normalised", "{source}.parquet"),
        rejects=R("data", "normalised", "{source}.rejects.jsonl"),
        report=R("data", "normalised", "{source}.report.json"),
        manifest=manifest("normalise_source", "{source}"),
    log:
        R("logs", "normalise_source", "{source}.log"),
    benchmark:
        R("benchmarks", "normalise_source", "{source}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "normalise_source",
            config=lambda w: {"source": w.source},
        ),
    shell:
        JOB


localrules:
    download_lm_eval_data,


# lm-eval's task datasets at pinned revisions, into the HF_HOME the (offline) compute nodes share;
# in the DAG when check_general_capability's input (the experiment's lm_eval_data) asks for its record.
rule download_lm_eval_data:
    output:
        record=EXP.lm_eval_record(),
        manifest=manifest("download_lm_eval_data"),
    log:
        R("logs", "download_lm_eval_data.log"),
    benchmark:
        R("benchmarks", "download_lm_eval_data.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "download_lm_eval_data",
            config=lambda w: {
                "tasks": EXP.lm_eval_tasks(),
                "revisions": subtree("evaluate", "general", "revisions"),
            },
        ),
    shell:
        JOB
