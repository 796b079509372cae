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
# Its rows land under data/raw/hub/, the synthetic twins' under data/raw/: raw_source() (data.mode) picks.
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
        cfg=lambda w: as_json(subtree("data", "sources", w.source)),
        seeds=as_json({}),
        hub_id=lambda w: subtree("data", "sources", w.source)["hub_id"],
        revision=lambda w: subtree("data", "sources", w.source)["revision"],
        split=lambda w: subtree("data", "sources", w.source)["split"],
        data_files=lambda w: data_files_arg(w.source),
    shell:
        "python -m toolcall_repro.provenance run --rule download_source --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {resources.gpu} --"
        " python -m toolcall_repro.data.download --source {wildcards.source}"
        " --hub-id {params.hub_id} --revision {params.revision} --split {params.split}"
        " {params.data_files} --out {output.raw} > {log} 2>&1"


rule normalise_source:
    input:
        raw=lambda w: raw_source(w.source),
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
        cfg=lambda w: as_json({"source": w.source}),
        seeds=as_json({}),
    shell:
        "python -m toolcall_repro.provenance run --rule normalise_source --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {resources.gpu} --"
        " python -m toolcall_repro.data.normalise --source {wildcards.source}"
        " --raw {input.raw} --out {output.samples} --rejects {output.rejects}"
        " --report {output.report} > {log} 2>&1"


localrules:
    download_lm_eval_data,


# lm-eval's task datasets at pinned revisions, into the HF_HOME the (offline) compute nodes share;
# in the DAG when check_general_capability's input (lm_eval_data()) asks for its record.
rule download_lm_eval_data:
    output:
        record=LM_EVAL_RECORD,
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
        cfg=lambda w: as_json(
            {
                "tasks": lm_eval_tasks(),
                "revisions": subtree("evaluate", "general", "revisions"),
            }
        ),
        seeds=as_json({}),
        tasks=lambda w: lm_eval_tasks(),
        revisions=lambda w: as_json(subtree("evaluate", "general", "revisions")),
    shell:
        "python -m toolcall_repro.provenance run --rule download_lm_eval_data --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {resources.gpu} --"
        " python -m toolcall_repro.eval.general.fetch --tasks {params.tasks}"
        " --revisions {params.revisions:q} --out {output.record} > {log} 2>&1"
