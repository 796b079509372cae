# Filter chain (paper section 4): rollouts of a filter policy decide which samples are worth training on.


localrules:
    pool_tooln1,
    subset_format_study,
    report_filter,


rule filter_single_turn:
    input:
        samples=expand(
            R("data", "normalised", "{source}.parquet"),
            source=config["filter"]["single_turn"]["sources"],
        ),
        policy=EXP.filter_policy_dir("single_turn"),
    output:
        train=R("data", "train", "single_turn.parquet"),
        heldout=R("data", "train", "heldout_single_turn.parquet"),
        report=R("data", "filter", "single_turn.json"),
        manifest=manifest("filter_single_turn"),
    log:
        R("logs", "filter_single_turn.log"),
    benchmark:
        R("benchmarks", "filter_single_turn.tsv")
    conda:
        env("eval-vllm")
    threads: THREADS
    resources:
        **stage_resources("filter", gpu=0),
    params:
        files=files_param,
        job=job(
            "filter_single_turn",
            config=filter_job_config("single_turn"),
            seeds={"filter": subtree("filter", "seed")},
            backend=config["engines"]["generation"],
            threads=THREADS,  # from config, never scaled by --cores: same seed, same numbers
        ),
    shell:
        JOB


rule filter_multi_turn:
    input:
        samples=R("data", "normalised", "looptool.parquet"),
        policy=EXP.filter_policy_dir("multi_turn"),
    output:
        train=R("data", "train", "multi_turn.parquet"),
        heldout=R("data", "train", "heldout_multi_turn.parquet"),
        report=R("data", "filter", "multi_turn.json"),
        manifest=manifest("filter_multi_turn"),
    log:
        R("logs", "filter_multi_turn.log"),
    benchmark:
        R("benchmarks", "filter_multi_turn.tsv")
    conda:
        env("eval-vllm")
    threads: THREADS
    resources:
        **stage_resources("filter", gpu=0),
    params:
        files=files_param,
        job=job(
            "filter_multi_turn",
            config=filter_job_config("multi_turn"),
            seeds={"filter": subtree("filter", "seed")},
            backend=config["engines"]["generation"],
            threads=THREADS,  # from config, never scaled by --cores: same seed, same numbers
        ),
    shell:
        JOB


rule subset_format_study:
    input:
        single=R("data", "train", "single_turn.parquet"),
        multi=R("data", "train", "multi_turn.parquet"),
    output:
        single=R("data", "train", "format_single.parquet"),
        multi=R("data", "train", "format_multi.parquet"),
        report=R("data", "filter", "format_study.json"),
        manifest=manifest("subset_format_study"),
    log:
        R("logs", "subset_format_study.log"),
    benchmark:
        R("benchmarks", "subset_format_study.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "subset_format_study",
            config=subtree("filter", "format_study"),
            seeds={"filter": subtree("filter", "seed")},
        ),
    shell:
        JOB


# Tool-N1's training data (unfiltered, with a held-out split) for the paper's 80-step filter policy.
rule pool_tooln1:
    input:
        samples=expand(
            R("data", "normalised", "{source}.parquet"), source=EXP.tooln1_sources()
        ),
    output:
        train=R("data", "train", "tooln1.parquet"),
        heldout=R("data", "train", "heldout_tooln1.parquet"),
        report=R("data", "filter", "pool_tooln1.json"),
        manifest=manifest("pool_tooln1"),
    log:
        R("logs", "pool_tooln1.log"),
    benchmark:
        R("benchmarks", "pool_tooln1.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "pool_tooln1",
            config=heldout_cfg(),
            seeds={"filter": subtree("filter", "seed")},
        ),
    shell:
        JOB


rule report_filter:
    input:
        steps=[R("data", "filter", f"{step}.json") for step in EXP.filter_steps()],
        normalise=expand(
            R("data", "normalised", "{source}.report.json"),
            source=EXP.reported_sources(),
        ),
        rejects=expand(
            R("data", "normalised", "{source}.rejects.jsonl"),
            source=EXP.reported_sources(),
        ),
    output:
        json=report(
            R("data", "filter_report.json"),
            caption="../report/filter_report.rst",
            category="Data",
        ),
        md=report(
            R("data", "filter_report.md"),
            caption="../report/filter_report.rst",
            category="Data",
        ),
        manifest=manifest("report_filter"),
    log:
        R("logs", "report_filter.log"),
    benchmark:
        R("benchmarks", "report_filter.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job("report_filter", config=subtree("filter")),
    shell:
        JOB
