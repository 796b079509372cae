# Evaluation: BFCL (seeds from config, every score with its protocol card), ACEBench, general
# capability (lm-eval); the paper's sensitivity studies are named targets at the end.


localrules:
    locate_vllm,
    score_bfcl,
    summarise_bfcl,
    summarise_bfcl_variance,
    summarise_acebench,
    bfcl_all,
    acebench_all,
    general_all,


# BFCL's env cannot hold vLLM (numpy), so generate_bfcl serves with the vLLM env's `vllm`: locate_vllm runs
# inside eval-vllm.yaml (deployed by --sdm conda; else VLLM_BIN / VERL_PYTHON) and records where it is.
rule locate_vllm:
    output:
        vllm=R("eval", "bfcl", "vllm.json"),
        manifest=manifest("locate_vllm"),
    log:
        R("logs", "locate_vllm.log"),
    benchmark:
        R("benchmarks", "locate_vllm.tsv")
    conda:
        "../envs/eval-vllm.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job("locate_vllm", config={}, seeds={}),
    shell:
        JOB


# One process per (model, protocol, seed): bfcl-eval caches backend instances per process. With vLLM it
# starts `vllm serve` from the vLLM env, as locate_vllm recorded it (input.vllm). The raw results (bfcl's
# layout, the card, the expected entry ids) are its output; score_bfcl reads them.
rule generate_bfcl:
    input:
        model=lambda w: EXP.model_dir(w.model),
        vllm=(
            rules.locate_vllm.output.vllm
            if config["engines"]["generation"] == "vllm"
            else []
        ),
    output:
        results=directory(
            R("eval", "bfcl", "{model}", "{protocol}", "raw", "seed{seed}")
        ),
        manifest=manifest("generate_bfcl", "{model}-{protocol}-{seed}"),
    log:
        R("logs", "generate_bfcl", "{model}-{protocol}-{seed}.log"),
    benchmark:
        R("benchmarks", "generate_bfcl", "{model}-{protocol}-{seed}.tsv")
    conda:
        env("eval-bfcl")
    threads: THREADS
    resources:
        **stage_resources("evaluate", gpu=0),
    params:
        files=files_param,
        job=job(
            "generate_bfcl",
            config=lambda w: {
                "bfcl": subtree("evaluate", "bfcl"),
                "protocol": protocol_spec(w.protocol, w.seed, w.model),
                "model": EXP.model_spec(w.model),
            },
            seeds=lambda w: {"eval": int(w.seed)},
            threads=THREADS,
        ),
    shell:
        JOB


# bfcl-eval's own checkers over one seed's raw results (no model, no GPU): the seed's score file. Local at
# paper scale: seconds of CPU, less than a SLURM queue wait.
rule score_bfcl:
    input:
        results=rules.generate_bfcl.output.results,
    output:
        score=R("eval", "bfcl", "{model}", "{protocol}", "seed{seed}.json"),
        manifest=manifest("score_bfcl", "{model}-{protocol}-{seed}"),
    log:
        R("logs", "score_bfcl", "{model}-{protocol}-{seed}.log"),
    benchmark:
        R("benchmarks", "score_bfcl", "{model}-{protocol}-{seed}.tsv")
    conda:
        env("eval-bfcl")
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "score_bfcl",
            config=lambda w: {"protocol": protocol_spec(w.protocol, w.seed, w.model)},
            seeds=lambda w: {"eval": int(w.seed)},
        ),
    shell:
        JOB


rule score_heldout:
    input:
        model=lambda w: EXP.model_dir(w.model),
        samples=expand(R("data", "normalised", "{source}.parquet"), source=SOURCES),
        exclude=EXP.training_sets(),
    output:
        seeds=R("eval", "heldout", "{model}", "{protocol}", "seeds.json"),
        summary=R("eval", "heldout", "{model}", "{protocol}", "summary.json"),
        variance=R("eval", "heldout", "{model}", "{protocol}", "variance.json"),
        manifest=manifest("score_heldout", "{model}-{protocol}"),
    log:
        R("logs", "score_heldout", "{model}-{protocol}.log"),
    benchmark:
        R("benchmarks", "score_heldout", "{model}-{protocol}.tsv")
    conda:
        env("eval-vllm")
    threads: THREADS
    resources:
        **stage_resources("evaluate", gpu=0),
    params:
        files=files_param,
        job=job(
            "score_heldout",
            config=lambda w: {
                "heldout": EXP.heldout,
                "reserve": {
                    "fraction": subtree("filter", "reserve_fraction"),
                    "seed": subtree("filter", "seed"),
                },
                "protocol": protocol_spec(w.protocol, 0, w.model),
                "seeds": EXP.heldout_seeds(w.model, w.protocol),
                "model": EXP.model_spec(w.model),
            },
            seeds=lambda w: {"eval": EXP.heldout_seeds(w.model, w.protocol)},
            threads=THREADS,
        ),
    shell:
        JOB


rule summarise_bfcl:
    input:
        seeds=lambda w: EXP.seed_files("bfcl", w.model, w.protocol),
    output:
        summary=R("eval", "bfcl", "{model}", "{protocol}", "summary.json"),
        manifest=manifest("summarise_bfcl", "{model}-{protocol}"),
    log:
        R("logs", "summarise_bfcl", "{model}-{protocol}.log"),
    benchmark:
        R("benchmarks", "summarise_bfcl", "{model}-{protocol}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "summarise_bfcl",
            config={"seeds": subtree("evaluate", "seeds")},
            seeds={"eval": subtree("evaluate", "seeds")},
        ),
    shell:
        JOB


# The seed-variance study's summary: the same job over that study's seeds (evaluate.studies.seed_variance).
use rule summarise_bfcl as summarise_bfcl_variance with:
    input:
        seeds=lambda w: EXP.seed_files(
            "bfcl", w.model, w.protocol, EXP.variance_seeds()
        ),
    output:
        summary=R("eval", "bfcl", "{model}", "{protocol}", "variance.json"),
        manifest=manifest("summarise_bfcl_variance", "{model}-{protocol}"),
    log:
        R("logs", "summarise_bfcl_variance", "{model}-{protocol}.log"),
    benchmark:
        R("benchmarks", "summarise_bfcl_variance", "{model}-{protocol}.tsv")
    params:
        files=files_param,
        job=job(
            "summarise_bfcl",
            twin="summarise_bfcl_variance",
            config={"seeds": EXP.variance_seeds()},
            seeds={"eval": EXP.variance_seeds()},
        ),


localrules:
    download_acebench,


# ACEBench's data: the pinned download (paper scale) or the synthetic twins (embedded default), each at
# a path of its own; score_acebench reads ACEBENCH_DIR (evaluate.acebench.source) and pulls in one.
rule download_acebench:
    output:
        data=directory(ACEBENCH_DIRS["download"]),
        manifest=manifest("download_acebench"),
    log:
        R("logs", "download_acebench.log"),
    benchmark:
        R("benchmarks", "download_acebench.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "download_acebench",
            config=lambda w: {
                "repo": ACEBENCH.get("repo"),
                "commit": ACEBENCH.get("commit"),
            },
            seeds={},
        ),
    shell:
        JOB


rule synthesize_acebench:
    output:
        data=directory(ACEBENCH_DIRS["synthetic"]),
        manifest=manifest("synthesize_acebench"),
    log:
        R("logs", "synthesize_acebench.log"),
    benchmark:
        R("benchmarks", "synthesize_acebench.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "synthesize_acebench",
            config=lambda w: {"synthetic": ACEBENCH.get("synthetic")},
            seeds=lambda w: {"data": ACEBENCH["synthetic"]["seed"]},
        ),
    shell:
        JOB


rule score_acebench:
    input:
        model=lambda w: EXP.model_dir(w.model),
        data=ACEBENCH_DIR,
    output:
        score=R("eval", "acebench", "{model}", "{protocol}", "seed{seed}.json"),
        manifest=manifest("score_acebench", "{model}-{protocol}-{seed}"),
    log:
        R("logs", "score_acebench", "{model}-{protocol}-{seed}.log"),
    benchmark:
        R("benchmarks", "score_acebench", "{model}-{protocol}-{seed}.tsv")
    conda:
        env("eval-vllm")
    threads: THREADS
    resources:
        **stage_resources("evaluate", gpu=0),
    params:
        files=files_param,
        job=job(
            "score_acebench",
            config=lambda w: {
                "acebench": subtree("evaluate", "acebench"),
                "protocol": protocol_spec(w.protocol, w.seed, w.model),
                "model": EXP.model_spec(w.model),
            },
            seeds=lambda w: {"eval": int(w.seed)},
            threads=THREADS,
        ),
    shell:
        JOB


rule summarise_acebench:
    input:
        seeds=lambda w: EXP.seed_files("acebench", w.model, w.protocol),
    output:
        summary=R("eval", "acebench", "{model}", "{protocol}", "summary.json"),
        manifest=manifest("summarise_acebench", "{model}-{protocol}"),
    log:
        R("logs", "summarise_acebench", "{model}-{protocol}.log"),
    benchmark:
        R("benchmarks", "summarise_acebench", "{model}-{protocol}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "summarise_acebench",
            config={"seeds": subtree("evaluate", "seeds")},
            seeds={"eval": subtree("evaluate", "seeds")},
        ),
    shell:
        JOB


rule check_general_capability:
    input:
        model=lambda w: EXP.model_dir(w.model),
        samples=R("data", "normalised", "xlam.parquet"),
        lm_eval_data=EXP.lm_eval_data(),
    output:
        summary=R("eval", "general", "{model}", "summary.json"),
        manifest=manifest("check_general_capability", "{model}"),
    log:
        R("logs", "check_general_capability", "{model}.log"),
    benchmark:
        R("benchmarks", "check_general_capability", "{model}.tsv")
    conda:
        env("eval-vllm")
    threads: THREADS
    resources:
        **stage_resources("evaluate", gpu=0),
    params:
        files=files_param,
        job=job(
            "check_general_capability",
            config=lambda w: {
                "general": subtree("evaluate", "general"),
                "model": EXP.model_spec(w.model),
            },
            seeds={"eval": subtree("evaluate", "seeds")[0]},
            backend=config["engines"]["generation"],
        ),
    shell:
        # Offline: the task data was fetched on the submit host (download_lm_eval_data) or is local.
        f"HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 {JOB}"


# --- each study is one named target: study_<name> (evaluate.studies), and one per benchmark ----------------


for _study in EXP.studies:

    rule:
        name:
            f"study_{_study}"
        input:
            EXP.study_outputs(_study),


rule bfcl_all:
    input:
        paths(EXP.bfcl_scores()),


rule acebench_all:
    input:
        paths(EXP.acebench_scores()),


rule general_all:
    input:
        paths(EXP.general_scores()),
