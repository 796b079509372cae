# Evaluation: BFCL (3 seeds, every score with its protocol card), ACEBench, general capability; studies.


def protocol_json(protocol, seed):
    spec = dict(subtree("evaluate", "protocols", protocol))
    return as_json(
        {"id": protocol, **spec, "seed": int(seed), "backend": config["engines"]["generation"]}
    )


EVAL_RES = stage_resources("evaluate", gpu=0)


rule score_bfcl:
    input:
        model=lambda w: model_dir(w.model),
    output:
        score=R("eval", "bfcl", "{model}", "{protocol}", "seed{seed}.json"),
        manifest=manifest("score_bfcl", "{model}-{protocol}-{seed}"),
    params:
        cfg=lambda w: as_json(
            {
                "bfcl": subtree("evaluate", "bfcl"),
                "protocol": json.loads(protocol_json(w.protocol, w.seed)),
                "model": model_spec(w.model),
            }
        ),
        seeds=lambda w: as_json({"eval": int(w.seed)}),
        protocol=lambda w: protocol_json(w.protocol, w.seed),
        categories=",".join(subtree("evaluate", "bfcl", "categories")),
        limit=subtree("evaluate", "bfcl", "limit") or 0,
        backend=config["engines"]["generation"],
        work=lambda w: R("eval", "bfcl", w.model, w.protocol, f"seed{w.seed}.work"),
    log:
        R("logs", "score_bfcl", "{model}-{protocol}-{seed}.log"),
    benchmark:
        R("benchmarks", "score_bfcl", "{model}-{protocol}-{seed}.tsv")
    threads: THREADS
    resources:
        **EVAL_RES,
    conda:
        f"{ENVS}/eval-vllm.yaml" if PAPER_SCALE else f"{ENVS}/cpu.yaml"
    shell:
        # One process per (model, protocol, seed): bfcl-eval caches backend instances per process.
        PROV + " python -m toolcall_repro.eval.bfcl run --model-dir {input.model}"
        " --model-tag {wildcards.model} --protocol {params.protocol:q} --seed {wildcards.seed}"
        " --categories {params.categories} --limit {params.limit} --backend {params.backend}"
        " --work-dir {params.work} --out {output.score} --threads {threads} > {log} 2>&1"


def bfcl_seed_files(w, seeds=None):
    seeds = seeds if seeds is not None else config["evaluate"]["seeds"]
    return [R("eval", "bfcl", w.model, w.protocol, f"seed{s}.json") for s in seeds]


rule summarise_bfcl:
    input:
        seeds=bfcl_seed_files,
    output:
        summary=R("eval", "bfcl", "{model}", "{protocol}", "summary.json"),
        manifest=manifest("summarise_bfcl", "{model}-{protocol}"),
    params:
        cfg=as_json({"seeds": subtree("evaluate", "seeds")}),
        seeds=as_json({"eval": subtree("evaluate", "seeds")}),
    log:
        R("logs", "summarise_bfcl", "{model}-{protocol}.log"),
    benchmark:
        R("benchmarks", "summarise_bfcl", "{model}-{protocol}.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.eval.bfcl summarise --inputs {input.seeds}"
        " --out {output.summary} > {log} 2>&1"


VARIANCE_SEEDS = config["evaluate"]["studies"]["seed_variance"].get(
    "seeds", config["evaluate"]["seeds"]
)


rule summarise_bfcl_variance:
    input:
        seeds=lambda w: bfcl_seed_files(w, VARIANCE_SEEDS),
    output:
        summary=R("eval", "bfcl", "{model}", "{protocol}", "variance.json"),
        manifest=manifest("summarise_bfcl_variance", "{model}-{protocol}"),
    params:
        cfg=as_json({"seeds": VARIANCE_SEEDS}),
        seeds=as_json({"eval": VARIANCE_SEEDS}),
    log:
        R("logs", "summarise_bfcl_variance", "{model}-{protocol}.log"),
    benchmark:
        R("benchmarks", "summarise_bfcl_variance", "{model}-{protocol}.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.eval.bfcl summarise --inputs {input.seeds}"
        " --out {output.summary} > {log} 2>&1"


rule score_acebench:
    input:
        model=lambda w: model_dir(w.model),
    output:
        score=R("eval", "acebench", "{model}", "{protocol}", "seed{seed}.json"),
        manifest=manifest("score_acebench", "{model}-{protocol}-{seed}"),
    params:
        cfg=lambda w: as_json(
            {
                "acebench": subtree("evaluate", "acebench"),
                "protocol": json.loads(protocol_json(w.protocol, w.seed)),
                "model": model_spec(w.model),
            }
        ),
        seeds=lambda w: as_json({"eval": int(w.seed)}),
        protocol=lambda w: protocol_json(w.protocol, w.seed),
        data_dir=ACEBENCH_DIR,
        categories=lambda w: (
            "all"
            if subtree("evaluate", "acebench", "categories") == "all"
            else ",".join(subtree("evaluate", "acebench", "categories"))
        ),
        limit=subtree("evaluate", "acebench", "limit") or 0,
        simulator=subtree("evaluate", "acebench", "simulator"),
        backend=config["engines"]["generation"],
    log:
        R("logs", "score_acebench", "{model}-{protocol}-{seed}.log"),
    benchmark:
        R("benchmarks", "score_acebench", "{model}-{protocol}-{seed}.tsv")
    threads: THREADS
    resources:
        **EVAL_RES,
    conda:
        f"{ENVS}/eval-vllm.yaml" if PAPER_SCALE else f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.eval.acebench --data-dir {params.data_dir}"
        " --model {input.model} --protocol {params.protocol:q} --seed {wildcards.seed}"
        " --categories {params.categories} --limit {params.limit} --simulator {params.simulator}"
        " --backend {params.backend} --out {output.score} --threads {threads} > {log} 2>&1"


rule summarise_acebench:
    input:
        seeds=lambda w: [
            R("eval", "acebench", w.model, w.protocol, f"seed{s}.json")
            for s in config["evaluate"]["seeds"]
        ],
    output:
        summary=R("eval", "acebench", "{model}", "{protocol}", "summary.json"),
        manifest=manifest("summarise_acebench", "{model}-{protocol}"),
    params:
        cfg=as_json({"seeds": subtree("evaluate", "seeds")}),
        seeds=as_json({"eval": subtree("evaluate", "seeds")}),
    log:
        R("logs", "summarise_acebench", "{model}-{protocol}.log"),
    benchmark:
        R("benchmarks", "summarise_acebench", "{model}-{protocol}.tsv")
    threads: 1
    resources:
        gpu=0,
    conda:
        f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.eval.summary --inputs {input.seeds}"
        " --out {output.summary} > {log} 2>&1"


rule check_general_capability:
    input:
        model=lambda w: model_dir(w.model),
        samples=R("data", "normalised", "xlam.parquet"),
    output:
        summary=R("eval", "general", "{model}", "summary.json"),
        manifest=manifest("check_general_capability", "{model}"),
    params:
        cfg=lambda w: as_json(
            {"general": subtree("evaluate", "general"), "model": model_spec(w.model)}
        ),
        seeds=as_json({"eval": subtree("evaluate", "seeds")[0]}),
        seed=subtree("evaluate", "seeds")[0],
        tasks=subtree("evaluate", "general", "tasks"),
        fewshot=subtree("evaluate", "general", "num_fewshot"),
        limit=subtree("evaluate", "general", "limit") or 0,
        out_dir=lambda w: R("eval", "general", w.model),
        backend=config["engines"]["generation"],
    log:
        R("logs", "check_general_capability", "{model}.log"),
    benchmark:
        R("benchmarks", "check_general_capability", "{model}.tsv")
    threads: THREADS
    resources:
        **EVAL_RES,
    conda:
        f"{ENVS}/eval-vllm.yaml" if PAPER_SCALE else f"{ENVS}/cpu.yaml"
    shell:
        PROV + " python -m toolcall_repro.eval.general --model-dir {input.model}"
        " --tasks {params.tasks} --local-source {input.samples} --num-fewshot {params.fewshot}"
        " --seed {params.seed} --limit {params.limit} --backend {params.backend}"
        " --out {params.out_dir} > {log} 2>&1"


# --- studies: each one named target -------------------------------------------------------------------


rule bfcl_all:
    input:
        all_bfcl_summaries(),


rule study_seed_variance:
    input:
        [R("eval", "bfcl", m, p, "variance.json") for m, p, _ in study_jobs("seed_variance")],


rule study_template:
    input:
        bfcl_summaries("template"),


rule study_thinking:
    input:
        bfcl_summaries("thinking"),


rule study_prompt_ablation:
    input:
        bfcl_summaries("prompt_ablation"),


rule study_data_format:
    input:
        bfcl_summaries("data_format"),


rule table4:
    input:
        bfcl_summaries("table4"),


rule acebench_all:
    input:
        acebench_summaries(),


rule general_all:
    input:
        [R("eval", "general", m, "summary.json") for m in config["evaluate"]["general"]["models"]],
