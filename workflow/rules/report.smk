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
use rule job_frame as make_tables with:
    input:
        evals=paths(EXP.scores()),
        training=[f for run in EXP.training_runs() for f in run.files],
        filter_report=EXP.filter_report(),
        manifests=EXP.result_manifests(
            EXP.scores(), EXP.training_runs(), filter_report=True
        ),
    output:
        index=report(
            LAYOUT.index("tables"), caption="../report/tables.rst", category="Tables"
        ),
        # the scorecard: each claim of analysis/claims.yaml, its verdict and the table it is read from
        claims=report(
            LAYOUT.claims("html"),
            caption="../report/claims.rst",
            category="Claims",
        ),
        claims_md=LAYOUT.claims("md"),
        claims_csv=LAYOUT.claims("csv"),
        tables=report(
            directory(LAYOUT.tables("html")),
            patterns=["{name}.html"],
            caption="../report/tables.rst",
            category="Tables",
        ),
        # every table's cells (the digests read them; the figures read csv/speedup.csv)
        csv=directory(LAYOUT.tables("csv")),
        manifest=LAYOUT.manifest("make_tables"),
    log:
        LAYOUT.log("make_tables"),
    benchmark:
        LAYOUT.benchmark("make_tables")
    params:
        **job(
            "make_tables",
            config={
                "evaluate": subtree("evaluate"),
                **EXP.analysis_units(),
                "pipeline_check": config["model"]["base"] == "tiny",
            },
            seeds={"eval": subtree("evaluate", "seeds")},
            run_dir=RUN,
        ),


use rule job_frame as make_figures with:
    input:
        evals=paths(EXP.scores()),
        training=[f for run in EXP.training_runs() for f in run.files],
        manifests=EXP.result_manifests(EXP.scores(), EXP.training_runs()),
        tables_csv=rules.make_tables.output.csv,
    output:
        index=report(
            LAYOUT.index("figures"),
            caption="../report/figures.rst",
            category="Figures",
        ),
        figures=report(
            directory(LAYOUT.figures()),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
        manifest=LAYOUT.manifest("make_figures"),
    log:
        LAYOUT.log("make_figures"),
    benchmark:
        LAYOUT.benchmark("make_figures")
    params:
        **job(
            "make_figures",
            config={
                "evaluate": subtree("evaluate"),
                **EXP.analysis_units(),
                "pipeline_check": config["model"]["base"] == "tiny",
            },
            seeds={"eval": subtree("evaluate", "seeds")},
            run_dir=RUN,
        ),


use rule job_frame as write_provenance with:
    input:
        tables=LAYOUT.index("tables"),
        figures=LAYOUT.index("figures"),
    output:
        record=report(
            LAYOUT.provenance(),
            caption="../report/provenance.rst",
            category="Provenance",
        ),
    log:
        LAYOUT.log("write_provenance"),
    benchmark:
        LAYOUT.benchmark("write_provenance")
    params:
        # the whole config: the record's own (no manifest: the record sums the manifests)
        **job("write_provenance", config=config, run_dir=RUN),


# The archive policy (archive.weights; resume checkpoints never) and the name: toolcall_repro.archive.
# A rule of its own, not the frame: its body tees the log to the terminal.
rule archive_results:
    input:
        record=LAYOUT.provenance(),
        # relative to the working directory: absolute paths would make a moved or copied tree's archive
        # "changed input files" and rerun it
        config=[os.path.relpath(f) for f in workflow.configfiles],
    output:
        archive=ARCHIVE,
    log:
        # Beside the archive: the run tree it packs is no place for the log of its own packing.
        LAYOUT.archive_log(ARCHIVE),
    benchmark:
        LAYOUT.archive_benchmark(ARCHIVE)
    conda:
        rule_env("archive_results")
    threads: 1
    resources:
        **rule_resources("archive_results"),
    params:
        **job(
            "archive_results",
            run_dir=RUN,
            weights=ARCHIVE_WEIGHTS,
        ),
    shell:
        # The size by part goes to the log and to the terminal.
        "python -m toolcall_repro.job {params.job:q} {params.files:q} 2>&1 | tee {log:q} >&2"


# The `efficiency` target's archive (train.smk): the same job and policy, once the efficiency report is
# written (that target builds no tables, so the whole run's archive is not its end).
use rule archive_results as archive_efficiency with:
    input:
        index=LAYOUT.efficiency_report(),
        config=[os.path.relpath(f) for f in workflow.configfiles],
    output:
        archive=EFFICIENCY_ARCHIVE,
    log:
        LAYOUT.archive_log(EFFICIENCY_ARCHIVE),
    benchmark:
        LAYOUT.archive_benchmark(EFFICIENCY_ARCHIVE)
    params:
        **job(
            "archive_efficiency",
            run_dir=RUN,
            weights=ARCHIVE_WEIGHTS,
        ),
