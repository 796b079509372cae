# Results: tables, figures, the run-level provenance record and the checksummed archive.
# `snakemake --report results/<run_id>/report.html` renders the report()-flagged outputs.


localrules:
    make_tables,
    make_figures,
    write_provenance,
    archive_results,


# The analysis reads exactly its inputs (`--inputs`): each result file and the manifest of the job that
# wrote it, which every row cites.
rule make_tables:
    input:
        evals=all_eval_outputs(),
        training=training_files(training_summaries()),
        filter_report=R("data", "filter_report.json"),
        manifests=result_manifests(
            [
                *all_eval_outputs(),
                *training_summaries(),
                R("data", "filter_report.json"),
            ]
        ),
    output:
        index=report(
            R("tables", "index.md"), caption="../report/tables.rst", category="Tables"
        ),
        tables=report(
            directory(R("tables", "html")),
            patterns=["{name}.html"],
            caption="../report/tables.rst",
            category="Tables",
        ),
        speedup=R("tables", "csv", "speedup.csv"),  # an input of the figures
        manifest=manifest("make_tables"),
    log:
        R("logs", "make_tables.log"),
    benchmark:
        R("benchmarks", "make_tables.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        cfg=as_json(
            {
                "evaluate": subtree("evaluate"),
                "runs": training_runs(),
                "pipeline_check": config["model"]["base"] == "tiny",
            }
        ),
        seeds=as_json({"eval": subtree("evaluate", "seeds")}),
        run_dir=lambda w, output: os.path.dirname(os.path.dirname(output.index)),
        out_dir=lambda w, output: os.path.dirname(output.index),
    shell:
        "python -m toolcall_repro.provenance run --rule make_tables --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {resources.gpu} --"
        " python -m toolcall_repro.analysis tables --run-dir {params.run_dir}"
        " --inputs {input:q} --config {params.cfg:q} --out-dir {params.out_dir} > {log} 2>&1"


rule make_figures:
    input:
        evals=all_eval_outputs(),
        training=training_files(training_summaries()),
        manifests=result_manifests([*all_eval_outputs(), *training_summaries()]),
        speedup=R("tables", "csv", "speedup.csv"),
    output:
        index=report(
            R("figures", "index.md"),
            caption="../report/figures.rst",
            category="Figures",
        ),
        figures=report(
            directory(R("figures", "png")),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
        manifest=manifest("make_figures"),
    log:
        R("logs", "make_figures.log"),
    benchmark:
        R("benchmarks", "make_figures.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        cfg=as_json({"evaluate": subtree("evaluate"), "runs": training_runs()}),
        seeds=as_json({"eval": subtree("evaluate", "seeds")}),
        run_dir=lambda w, output: os.path.dirname(os.path.dirname(output.index)),
        out_dir=lambda w, output: os.path.dirname(output.index),
    shell:
        "python -m toolcall_repro.provenance run --rule make_figures --manifest {output.manifest:q}"
        " --config {params.cfg:q} --seeds {params.seeds:q} --inputs {input:q} --outputs {output:q}"
        " --gpus {resources.gpu} --"
        " python -m toolcall_repro.analysis figures --run-dir {params.run_dir}"
        " --inputs {input:q} --speedup {input.speedup:q} --config {params.cfg:q}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule write_provenance:
    input:
        tables=R("tables", "index.md"),
        figures=R("figures", "index.md"),
    output:
        record=report(
            R("provenance.json"),
            caption="../report/provenance.rst",
            category="Provenance",
        ),
    log:
        R("logs", "write_provenance.log"),
    benchmark:
        R("benchmarks", "write_provenance.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        config=as_json(config),
        run_dir=lambda w, output: os.path.dirname(output.record),
    shell:
        "python -m toolcall_repro.provenance record --run-dir {params.run_dir}"
        " --config {params.config:q} --out {output.record} > {log} 2>&1"


# The archive policy (archive.weights; resume checkpoints never) and the name: toolcall_repro.archive.
rule archive_results:
    input:
        record=R("provenance.json"),
        # relative to the working directory: absolute paths would make a moved or copied tree's archive
        # "changed input files" and rerun it
        config=[os.path.relpath(f) for f in workflow.configfiles],
    output:
        archive=ARCHIVE,
    log:
        # Beside the archive: the run tree it packs is no place for the log of its own packing.
        ARCHIVE.removesuffix(".tar.gz") + ".log",
    benchmark:
        ARCHIVE.removesuffix(".tar.gz") + ".benchmark.tsv"
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        run_dir=lambda w, input: os.path.dirname(input.record),
        weights=ARCHIVE_CFG["weights"],
    shell:
        # The size by part goes to the log and to the terminal.
        "python -m toolcall_repro.provenance archive --run-dir {params.run_dir:q}"
        " --out {output.archive:q} --weights {params.weights} --extra {input.config:q}"
        " 2>&1 | tee {log:q} >&2"
