# Results: tables, figures, the run-level provenance record and the checksummed archive.
# `snakemake --report results/<run_id>/report.html` renders the report()-flagged outputs.


localrules:
    make_tables,
    make_figures,
    write_provenance,
    archive_results,
    archive_efficiency,


# The analysis reads exactly its inputs (`--inputs`): each result file and the manifest of the job that
# wrote it, which every row cites.
rule make_tables:
    input:
        evals=paths(EXP.scores()),
        training=[f for run in EXP.training_runs() for f in run.files],
        filter_report=EXP.filter_report(),
        manifests=EXP.result_manifests(
            EXP.scores(), EXP.training_runs(), filter_report=True
        ),
    output:
        index=report(
            R("tables", "index.md"), caption="../report/tables.rst", category="Tables"
        ),
        # the scorecard: each claim of analysis/claims.yaml, its verdict and the table it is read from
        claims=report(
            R("tables", "claims.html"),
            caption="../report/claims.rst",
            category="Claims",
        ),
        claims_md=R("tables", "claims.md"),
        claims_csv=R("tables", "claims.csv"),
        tables=report(
            directory(R("tables", "html")),
            patterns=["{name}.html"],
            caption="../report/tables.rst",
            category="Tables",
        ),
        # every table's cells (the digests read them; the figures read csv/speedup.csv)
        csv=directory(R("tables", "csv")),
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
        files=files_param,
        job=job(
            "make_tables",
            config={
                "evaluate": subtree("evaluate"),
                **EXP.analysis_units(),
                "pipeline_check": config["model"]["base"] == "tiny",
            },
            seeds={"eval": subtree("evaluate", "seeds")},
            run_dir=RUN,
        ),
    shell:
        JOB


rule make_figures:
    input:
        evals=paths(EXP.scores()),
        training=[f for run in EXP.training_runs() for f in run.files],
        manifests=EXP.result_manifests(EXP.scores(), EXP.training_runs()),
        tables_csv=rules.make_tables.output.csv,
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
        files=files_param,
        job=job(
            "make_figures",
            config={
                "evaluate": subtree("evaluate"),
                **EXP.analysis_units(),
                "pipeline_check": config["model"]["base"] == "tiny",
            },
            seeds={"eval": subtree("evaluate", "seeds")},
            run_dir=RUN,
        ),
    shell:
        JOB


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
        # the whole config: the record's own (no manifest: the record sums the manifests)
        files=files_param,
        job=job("write_provenance", config=config, run_dir=RUN),
    shell:
        JOB


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
        files=files_param,
        job=job(
            "archive_results",
            run_dir=RUN,
            weights=ARCHIVE_CFG["weights"],
        ),
    shell:
        # The size by part goes to the log and to the terminal.
        "python -m toolcall_repro.job {params.job:q} {params.files:q} 2>&1 | tee {log:q} >&2"


# The `efficiency` target's archive (train.smk): the same job and policy, once the efficiency report is
# written (that target builds no tables, so the whole run's archive is not its end).
use rule archive_results as archive_efficiency with:
    input:
        index=R("efficiency", "index.md"),
        config=[os.path.relpath(f) for f in workflow.configfiles],
    output:
        archive=EFFICIENCY_ARCHIVE,
    log:
        EFFICIENCY_ARCHIVE.removesuffix(".tar.gz") + ".log",
    benchmark:
        EFFICIENCY_ARCHIVE.removesuffix(".tar.gz") + ".benchmark.tsv"
    params:
        files=files_param,
        job=job(
            "archive_results",
            run_dir=RUN,
            weights=ARCHIVE_CFG["weights"],
            twin="archive_efficiency",
        ),
