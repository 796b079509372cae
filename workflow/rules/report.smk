# Results: tables, figures, the run-level provenance record and the checksummed archive.


rule make_tables:
    input:
        evals=all_eval_outputs(),
        training=[train_dir(s, v) + "/summary.json" for s, v in training_runs()],
        filter_report=R("data", "filter_report.json"),
    output:
        index=report(
            R("tables", "index.md"), caption="../report/tables.rst", category="Tables"
        ),
        manifest=manifest("make_tables"),
    params:
        cfg=as_json({"evaluate": subtree("evaluate"), "runs": training_runs()}),
        seeds=as_json({"eval": subtree("evaluate", "seeds")}),
        run_dir=RUN,
        out_dir=R("tables"),
    log:
        R("logs", "make_tables.log"),
    benchmark:
        R("benchmarks", "make_tables.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.analysis tables --run-dir {params.run_dir}"
        " --config {params.cfg:q} --out-dir {params.out_dir} > {log} 2>&1"


rule make_figures:
    input:
        evals=all_eval_outputs(),
        training=[train_dir(s, v) + "/summary.json" for s, v in training_runs()],
    output:
        index=report(
            R("figures", "index.md"), caption="../report/figures.rst", category="Figures"
        ),
        manifest=manifest("make_figures"),
    params:
        cfg=as_json({"evaluate": subtree("evaluate"), "runs": training_runs()}),
        seeds=as_json({"eval": subtree("evaluate", "seeds")}),
        run_dir=RUN,
        out_dir=R("figures"),
    log:
        R("logs", "make_figures.log"),
    benchmark:
        R("benchmarks", "make_figures.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.analysis figures --run-dir {params.run_dir}"
        " --config {params.cfg:q} --out-dir {params.out_dir} > {log} 2>&1"


rule write_provenance:
    input:
        tables=R("tables", "index.md"),
        figures=R("figures", "index.md"),
    output:
        record=report(
            R("provenance.json"), caption="../report/provenance.rst", category="Provenance"
        ),
    params:
        config=as_json(config),
        run_dir=RUN,
    log:
        R("logs", "write_provenance.log"),
    benchmark:
        R("benchmarks", "write_provenance.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        "python -m toolcall_repro.provenance record --run-dir {params.run_dir}"
        " --config {params.config:q} --out {output.record} > {log} 2>&1"


rule archive_results:
    input:
        record=R("provenance.json"),
        config=workflow.configfiles,
    output:
        archive=R("archive", f"{config['run_id']}.tar.gz"),
    params:
        run_dir=RUN,
    log:
        R("archive", "archive_results.log"),
    benchmark:
        R("archive", "archive_results.benchmark.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        # The log and benchmark of this rule live under archive/, which the archive itself leaves out.
        "python -m toolcall_repro.provenance archive --run-dir {params.run_dir}"
        " --out {output.archive} --extra {input.config} > {log} 2>&1"
