# Filter chain (paper section 4): rollouts from a filter policy decide which samples are worth training on.


def filter_policy_dir(setting):
    """The policy whose rollouts filter the data (config model.filter_policy).

    base: the base model (the warm-started tiny model on the embedded default); train: the paper's
    policy, GRPO-trained 80 steps on Tool-N1's data (xLAM + ToolACE pooled, unfiltered); else a path.
    Multi-turn filtering uses model.filter_policy_multi_turn (the paper's "stronger model") when set.
    """
    key = "filter_policy_multi_turn" if setting == "multi_turn" else "filter_policy"
    policy = config["model"].get(key) or config["model"].get("filter_policy", "base")
    if policy == "base":
        return base_model_dir()
    if policy == "train":
        return train_dir("tooln1", "vanilla") + "/final"
    return model_path(policy)


rule pool_tooln1:
    input:
        samples=expand(R("data", "normalised", "{source}.parquet"), source=["xlam", "toolace"]),
    output:
        train=R("data", "train", "tooln1.parquet"),
        heldout=R("data", "train", "heldout_tooln1.parquet"),
        manifest=manifest("pool_tooln1"),
    params:
        cfg=as_json({"heldout_fraction": subtree("filter", "heldout_fraction")}),
        seeds=as_json({"filter": subtree("filter", "seed")}),
        seed=subtree("filter", "seed"),
    log:
        R("logs", "pool_tooln1.log"),
    benchmark:
        R("benchmarks", "pool_tooln1.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.data.filters pool --inputs {input.samples}"
        " --config {params.cfg:q} --seed {params.seed} --out-train {output.train}"
        " --out-heldout {output.heldout} > {log} 2>&1"


rule filter_single_turn:
    input:
        samples=expand(
            R("data", "normalised", "{source}.parquet"),
            source=config["filter"]["single_turn"]["sources"],
        ),
        policy=filter_policy_dir("single_turn"),
    output:
        train=R("data", "train", "single_turn.parquet"),
        heldout=R("data", "train", "heldout_single_turn.parquet"),
        report=R("data", "filter", "single_turn.json"),
        manifest=manifest("filter_single_turn"),
    params:
        cfg=as_json(
            {
                **subtree("filter", "single_turn"),
                "heldout_fraction": subtree("filter", "heldout_fraction"),
            }
        ),
        seeds=as_json({"filter": subtree("filter", "seed")}),
        seed=subtree("filter", "seed"),
        backend=config["engines"]["generation"],
    log:
        R("logs", "filter_single_turn.log"),
    benchmark:
        R("benchmarks", "filter_single_turn.tsv")
    threads: THREADS
    resources:
        **stage_resources("filter", gpu=0),
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.data.filters single-turn --inputs {input.samples}"
        " --policy {input.policy} --backend {params.backend} --config {params.cfg:q}"
        " --seed {params.seed} --out-train {output.train} --out-heldout {output.heldout}"
        " --report {output.report} --threads {threads} > {log} 2>&1"


rule filter_multi_turn:
    input:
        samples=R("data", "normalised", "looptool.parquet"),
        policy=filter_policy_dir("multi_turn"),
    output:
        train=R("data", "train", "multi_turn.parquet"),
        heldout=R("data", "train", "heldout_multi_turn.parquet"),
        report=R("data", "filter", "multi_turn.json"),
        manifest=manifest("filter_multi_turn"),
    params:
        cfg=as_json(
            {
                **subtree("filter", "multi_turn"),
                "heldout_fraction": subtree("filter", "heldout_fraction"),
            }
        ),
        seeds=as_json({"filter": subtree("filter", "seed")}),
        seed=subtree("filter", "seed"),
        backend=config["engines"]["generation"],
    log:
        R("logs", "filter_multi_turn.log"),
    benchmark:
        R("benchmarks", "filter_multi_turn.tsv")
    threads: THREADS
    resources:
        **stage_resources("filter", gpu=0),
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.data.filters multi-turn --inputs {input.samples}"
        " --policy {input.policy} --backend {params.backend} --config {params.cfg:q}"
        " --seed {params.seed} --out-train {output.train} --out-heldout {output.heldout}"
        " --report {output.report} --threads {threads} > {log} 2>&1"


rule subset_format_study:
    input:
        single=R("data", "train", "single_turn.parquet"),
        multi=R("data", "train", "multi_turn.parquet"),
    output:
        single=R("data", "train", "format_single.parquet"),
        multi=R("data", "train", "format_multi.parquet"),
        report=R("data", "filter", "format_study.json"),
        manifest=manifest("subset_format_study"),
    params:
        cfg=as_json(subtree("filter", "format_study")),
        seeds=as_json({"filter": subtree("filter", "seed")}),
        seed=subtree("filter", "seed"),
    log:
        R("logs", "subset_format_study.log"),
    benchmark:
        R("benchmarks", "subset_format_study.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.data.filters format-subsets --single {input.single}"
        " --multi {input.multi} --config {params.cfg:q} --seed {params.seed}"
        " --out-single {output.single} --out-multi {output.multi} --report {output.report}"
        " > {log} 2>&1"


rule report_filter:
    input:
        steps=[
            R("data", "filter", "single_turn.json"),
            R("data", "filter", "multi_turn.json"),
            R("data", "filter", "format_study.json"),
        ],
        rejects=expand(R("data", "normalised", "{source}.rejects.jsonl"), source=SOURCES),
    output:
        json=report(
            R("data", "filter_report.json"),
            caption="../report/filter_report.rst",
            category="Data",
        ),
        md=R("data", "filter_report.md"),
        manifest=manifest("report_filter"),
    params:
        cfg=as_json(subtree("filter")),
        seeds=as_json({}),
    log:
        R("logs", "report_filter.log"),
    benchmark:
        R("benchmarks", "report_filter.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.data.report --steps {input.steps}"
        " --rejects {input.rejects} --out-json {output.json} --out-md {output.md} > {log} 2>&1"
