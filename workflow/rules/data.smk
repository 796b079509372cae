# Data: raw sources (synthetic twins on the embedded default, the Hub at paper scale) -> normalised parquet.


localrules:
    normalise_source,


if config["data"]["mode"] == "synthetic":

    rule synthesize_sources:
        output:
            raw=expand(R("data", "raw", "{source}.jsonl"), source=SOURCES),
            manifest=manifest("synthesize_sources"),
        log:
            R("logs", "synthesize_sources.log"),
        benchmark:
            R("benchmarks", "synthesize_sources.tsv")
        conda:
            "../envs/cpu.yaml"
        threads: 1
        resources:
            gpu=0,
        params:
            cfg=as_json(
                {
                    "synthetic": subtree("data", "synthetic"),
                    "seed": subtree("data", "seed"),
                }
            ),
            seeds=as_json({"data": subtree("data", "seed")}),
            out_dir=lambda w, output: os.path.dirname(output.raw[0]),
        shell:
            "python -m toolcall_repro.provenance run --rule synthesize_sources --manifest {output.manifest:q}"
            " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
            " --gpus {resources.gpu} --"
            " python -m toolcall_repro.data.synthetic --config {params.cfg:q}"
            " --out-dir {params.out_dir} > {log} 2>&1"

else:

    localrules:
        download_source,

    # The only data rule that touches the network: compute nodes are often offline, so it runs locally.
    rule download_source:
        output:
            raw=R("data", "raw", "{source}.jsonl"),
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
        shell:
            "python -m toolcall_repro.provenance run --rule download_source --manifest {output.manifest:q}"
            " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
            " --gpus {resources.gpu} --"
            " python -m toolcall_repro.data.download --source {wildcards.source}"
            " --hub-id {params.hub_id} --revision {params.revision} --split {params.split}"
            " --out {output.raw} > {log} 2>&1"


rule normalise_source:
    input:
        raw=R("data", "raw", "{source}.jsonl"),
    output:
        samples=R("data", "normalised", "{source}.parquet"),
        rejects=R("data", "normalised", "{source}.rejects.jsonl"),
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
        " python -m toolcall_repro.data.sources --source {wildcards.source}"
        " --raw {input.raw} --out {output.samples} --rejects {output.rejects} > {log} 2>&1"
