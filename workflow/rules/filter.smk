# Filter chain (paper section 4): rollouts of a filter policy decide which samples are worth training on.


localrules:
    pool_tooln1,
    subset_format_study,
    report_filter,


use rule job_frame as filter_single_turn with:
    input:
        samples=[
            LAYOUT.samples(source)
            for source in config["filter"]["single_turn"]["sources"]
        ],
        policy=EXP.models.filter_policy_dir("single_turn"),
    output:
        train=LAYOUT.train_set("single_turn"),
        heldout=LAYOUT.heldout_split("single_turn"),
        report=LAYOUT.filter_step_report("single_turn"),
        manifest=LAYOUT.manifest("filter_single_turn"),
    log:
        LAYOUT.log("filter_single_turn"),
    benchmark:
        LAYOUT.benchmark("filter_single_turn")
    # The trainings wait on the filters: they go first too (train.smk).
    priority: 1
    conda:
        rule_env("filter_single_turn")
    threads: THREADS
    resources:
        **rule_resources("filter_single_turn"),
    params:
        **job(
            "filter_single_turn",
            config=filter_job_config("single_turn"),
            seeds={"filter": subtree("filter", "seed")},
            backend=config["engines"]["generation"],
            threads=THREADS,  # from config, never scaled by --cores: same seed, same numbers
        ),


use rule filter_single_turn as filter_multi_turn with:
    input:
        samples=LAYOUT.samples("looptool"),
        policy=EXP.models.filter_policy_dir("multi_turn"),
    output:
        train=LAYOUT.train_set("multi_turn"),
        heldout=LAYOUT.heldout_split("multi_turn"),
        report=LAYOUT.filter_step_report("multi_turn"),
        manifest=LAYOUT.manifest("filter_multi_turn"),
    log:
        LAYOUT.log("filter_multi_turn"),
    benchmark:
        LAYOUT.benchmark("filter_multi_turn")
    params:
        **job(
            "filter_multi_turn",
            config=filter_job_config("multi_turn"),
            seeds={"filter": subtree("filter", "seed")},
            backend=config["engines"]["generation"],
            threads=THREADS,  # from config, never scaled by --cores: same seed, same numbers
        ),


use rule job_frame as subset_format_study with:
    input:
        single=LAYOUT.train_set("single_turn"),
        multi=LAYOUT.train_set("multi_turn"),
    output:
        single=LAYOUT.train_set("format_single"),
        multi=LAYOUT.train_set("format_multi"),
        report=LAYOUT.filter_step_report("format_study"),
        manifest=LAYOUT.manifest("subset_format_study"),
    log:
        LAYOUT.log("subset_format_study"),
    benchmark:
        LAYOUT.benchmark("subset_format_study")
    params:
        **job(
            "subset_format_study",
            config=subtree("filter", "format_study"),
            seeds={"filter": subtree("filter", "seed")},
        ),


# Tool-N1's training data (unfiltered, with a held-out split) for the paper's 80-step filter policy.
use rule job_frame as pool_tooln1 with:
    input:
        samples=[LAYOUT.samples(source) for source in EXP.tooln1_sources()],
    output:
        train=LAYOUT.train_set("tooln1"),
        heldout=LAYOUT.heldout_split("tooln1"),
        report=LAYOUT.filter_step_report("pool_tooln1"),
        manifest=LAYOUT.manifest("pool_tooln1"),
    log:
        LAYOUT.log("pool_tooln1"),
    benchmark:
        LAYOUT.benchmark("pool_tooln1")
    params:
        **job(
            "pool_tooln1",
            config=heldout_cfg(),
            seeds={"filter": subtree("filter", "seed")},
        ),


use rule job_frame as report_filter with:
    input:
        steps=[LAYOUT.filter_step_report(step) for step in EXP.filter_steps()],
        normalise=[LAYOUT.normalise_report(s) for s in EXP.reported_sources()],
        rejects=[LAYOUT.rejects(s) for s in EXP.reported_sources()],
    output:
        json=report(
            LAYOUT.filter_report("json"),
            caption="../report/filter_report.rst",
            category="Data",
        ),
        md=report(
            LAYOUT.filter_report("md"),
            caption="../report/filter_report.rst",
            category="Data",
        ),
        manifest=LAYOUT.manifest("report_filter"),
    log:
        LAYOUT.log("report_filter"),
    benchmark:
        LAYOUT.benchmark("report_filter")
    params:
        **job("report_filter", config=subtree("filter")),
