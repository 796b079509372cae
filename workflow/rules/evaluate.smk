# Evaluation: BFCL (seeds from config, every score with its protocol card), ACEBench, general
# capability (lm-eval); the paper's sensitivity studies are named targets at the end. The benchmarks are one
# registry (src/toolcall_repro/benchmarks.py): their score files, seeds and targets come from it.


localrules:
    locate_vllm,
    score_bfcl,
    summarise_bfcl,
    summarise_bfcl_variance,
    summarise_acebench,


# BFCL's env cannot hold vLLM (numpy), so generate_bfcl serves with the vLLM env's `vllm`: locate_vllm runs
# inside eval-vllm.yaml, or its CUDA 12 twin with engines.cuda: 12 (deployed by --sdm conda; else VLLM_BIN /
# VERL_PYTHON) and records where it is.
rule locate_vllm:
    output:
        vllm=LAYOUT.vllm_record(),
        manifest=LAYOUT.manifest("locate_vllm"),
    log:
        LAYOUT.log("locate_vllm"),
    benchmark:
        LAYOUT.benchmark("locate_vllm")
    conda:
        rule_env("locate_vllm")
    threads: 1
    resources:
        gpu=0,
    params:
        **job("locate_vllm", config={}, seeds={}),
    shell:
        JOB


# One process per (model, protocol, seed): bfcl-eval caches backend instances per process. With vLLM it
# starts `vllm serve` from the vLLM env, as locate_vllm recorded it (input.vllm). The raw results (bfcl's
# layout, the card, the expected entry ids) are its output; score_bfcl reads them.
use rule job_frame as generate_bfcl with:
    input:
        model=lambda w: EXP.models.model_dir(w.model),
        vllm=(
            rules.locate_vllm.output.vllm
            if config["engines"]["generation"] == "vllm"
            else []
        ),
    output:
        results=directory(
            LAYOUT.raw_generations("bfcl", "{model}", "{protocol}", "{seed}")
        ),
        manifest=LAYOUT.manifest("generate_bfcl", "{model}", "{protocol}", "{seed}"),
    log:
        LAYOUT.log("generate_bfcl", "{model}", "{protocol}", "{seed}"),
    benchmark:
        LAYOUT.benchmark("generate_bfcl", "{model}", "{protocol}", "{seed}")
    conda:
        rule_env("generate_bfcl")
    threads: THREADS
    resources:
        **rule_resources("generate_bfcl"),
    params:
        **job(
            "generate_bfcl",
            config=lambda w: {
                "bfcl": subtree("evaluate", "bfcl"),
                "protocol": protocol_spec(w.protocol, w.seed, w.model),
                "model": EXP.models.model_spec(w.model),
            },
            seeds=lambda w: {"eval": int(w.seed)},
            threads=THREADS,
        ),


# bfcl-eval's own checkers over one seed's raw results (no model, no GPU): the seed's score file. Local at
# paper scale: seconds of CPU, less than a SLURM queue wait.
use rule job_frame as score_bfcl with:
    input:
        results=rules.generate_bfcl.output.results,
    output:
        score=LAYOUT.seed_score("bfcl", "{model}", "{protocol}", "{seed}"),
        manifest=LAYOUT.manifest("score_bfcl", "{model}", "{protocol}", "{seed}"),
    log:
        LAYOUT.log("score_bfcl", "{model}", "{protocol}", "{seed}"),
    benchmark:
        LAYOUT.benchmark("score_bfcl", "{model}", "{protocol}", "{seed}")
    conda:
        rule_env("score_bfcl")
    params:
        **job(
            "score_bfcl",
            config=lambda w: {"protocol": protocol_spec(w.protocol, w.seed, w.model)},
            seeds=lambda w: {"eval": int(w.seed)},
        ),


use rule job_frame as score_heldout with:
    input:
        model=lambda w: EXP.models.model_dir(w.model),
        samples=[LAYOUT.samples(source) for source in SOURCES],
        exclude=EXP.training_sets(),
    output:
        seeds=LAYOUT.score("heldout", "{model}", "{protocol}", "seeds"),
        summary=LAYOUT.score("heldout", "{model}", "{protocol}", "summary"),
        variance=LAYOUT.score("heldout", "{model}", "{protocol}", "variance"),
        manifest=LAYOUT.manifest("score_heldout", "{model}", "{protocol}"),
    log:
        LAYOUT.log("score_heldout", "{model}", "{protocol}"),
    benchmark:
        LAYOUT.benchmark("score_heldout", "{model}", "{protocol}")
    conda:
        rule_env("score_heldout")
    threads: THREADS
    resources:
        **rule_resources("score_heldout"),
    params:
        **job(
            "score_heldout",
            config=lambda w: {
                "heldout": EXP.heldout,
                "reserve": {
                    "fraction": subtree("filter", "reserve_fraction"),
                    "seed": subtree("filter", "seed"),
                },
                "protocol": protocol_spec(w.protocol, 0, w.model),
                "seeds": EXP.heldout_seeds(w.model, w.protocol),
                "model": EXP.models.model_spec(w.model),
            },
            seeds=lambda w: {"eval": EXP.heldout_seeds(w.model, w.protocol)},
            threads=THREADS,
        ),


use rule job_frame as summarise_bfcl with:
    input:
        seeds=lambda w: EXP.seed_files("bfcl", w.model, w.protocol),
    output:
        summary=LAYOUT.score("bfcl", "{model}", "{protocol}", "summary"),
        manifest=LAYOUT.manifest("summarise_bfcl", "{model}", "{protocol}"),
    log:
        LAYOUT.log("summarise_bfcl", "{model}", "{protocol}"),
    benchmark:
        LAYOUT.benchmark("summarise_bfcl", "{model}", "{protocol}")
    params:
        **job(
            "summarise_bfcl",
            config={"seeds": EXP.benchmark_seeds("bfcl")},
            seeds={"eval": EXP.benchmark_seeds("bfcl")},
        ),


# The seed-variance study's summary: the same job over that study's seeds (evaluate.studies.seed_variance).
use rule summarise_bfcl as summarise_bfcl_variance with:
    input:
        seeds=lambda w: EXP.seed_files(
            "bfcl", w.model, w.protocol, EXP.variance_seeds()
        ),
    output:
        summary=LAYOUT.score("bfcl", "{model}", "{protocol}", "variance"),
        manifest=LAYOUT.manifest("summarise_bfcl_variance", "{model}", "{protocol}"),
    log:
        LAYOUT.log("summarise_bfcl_variance", "{model}", "{protocol}"),
    benchmark:
        LAYOUT.benchmark("summarise_bfcl_variance", "{model}", "{protocol}")
    params:
        **job(
            "summarise_bfcl_variance",
            config={"seeds": EXP.variance_seeds()},
            seeds={"eval": EXP.variance_seeds()},
        ),


localrules:
    download_acebench,


# ACEBench's data: the pinned download (paper scale) or the synthetic twins (embedded default), each at
# a path of its own; score_acebench reads EXP.acebench_dir() (evaluate.acebench.source) and pulls in one.
use rule job_frame as download_acebench with:
    output:
        data=directory(LAYOUT.acebench_data("download")),
        manifest=LAYOUT.manifest("download_acebench"),
    log:
        LAYOUT.log("download_acebench"),
    benchmark:
        LAYOUT.benchmark("download_acebench")
    params:
        **job(
            "download_acebench",
            config=lambda w: {
                "repo": ACEBENCH.get("repo"),
                "commit": ACEBENCH.get("commit"),
            },
            seeds={},
        ),


use rule job_frame as synthesize_acebench with:
    output:
        data=directory(LAYOUT.acebench_data("synthetic")),
        manifest=LAYOUT.manifest("synthesize_acebench"),
    log:
        LAYOUT.log("synthesize_acebench"),
    benchmark:
        LAYOUT.benchmark("synthesize_acebench")
    params:
        **job(
            "synthesize_acebench",
            config=lambda w: {"synthetic": ACEBENCH.get("synthetic")},
            seeds=lambda w: {"data": ACEBENCH["synthetic"]["seed"]},
        ),


use rule job_frame as score_acebench with:
    input:
        model=lambda w: EXP.models.model_dir(w.model),
        data=EXP.acebench_dir(),
    output:
        score=LAYOUT.seed_score("acebench", "{model}", "{protocol}", "{seed}"),
        manifest=LAYOUT.manifest("score_acebench", "{model}", "{protocol}", "{seed}"),
    log:
        LAYOUT.log("score_acebench", "{model}", "{protocol}", "{seed}"),
    benchmark:
        LAYOUT.benchmark("score_acebench", "{model}", "{protocol}", "{seed}")
    conda:
        rule_env("score_acebench")
    threads: THREADS
    resources:
        **rule_resources("score_acebench"),
    params:
        **job(
            "score_acebench",
            config=lambda w: {
                "acebench": subtree("evaluate", "acebench"),
                "protocol": protocol_spec(w.protocol, w.seed, w.model),
                "model": EXP.models.model_spec(w.model),
            },
            seeds=lambda w: {"eval": int(w.seed)},
            threads=THREADS,
        ),


use rule job_frame as summarise_acebench with:
    input:
        seeds=lambda w: EXP.seed_files("acebench", w.model, w.protocol),
    output:
        summary=LAYOUT.score("acebench", "{model}", "{protocol}", "summary"),
        manifest=LAYOUT.manifest("summarise_acebench", "{model}", "{protocol}"),
    log:
        LAYOUT.log("summarise_acebench", "{model}", "{protocol}"),
    benchmark:
        LAYOUT.benchmark("summarise_acebench", "{model}", "{protocol}")
    params:
        **job(
            "summarise_acebench",
            config={"seeds": EXP.benchmark_seeds("acebench")},
            seeds={"eval": EXP.benchmark_seeds("acebench")},
        ),


# A rule of its own, not the frame: its body runs the job entry offline.
rule check_general_capability:
    input:
        model=lambda w: EXP.models.model_dir(w.model),
        samples=LAYOUT.samples("xlam"),
        lm_eval_data=EXP.lm_eval_data(),
    output:
        summary=LAYOUT.score("general", "{model}", None),
        manifest=LAYOUT.manifest("check_general_capability", "{model}"),
    log:
        LAYOUT.log("check_general_capability", "{model}"),
    benchmark:
        LAYOUT.benchmark("check_general_capability", "{model}")
    conda:
        rule_env("check_general_capability")
    threads: THREADS
    resources:
        **rule_resources("check_general_capability"),
    params:
        **job(
            "check_general_capability",
            config=lambda w: {
                "general": subtree("evaluate", "general"),
                "model": EXP.models.model_spec(w.model),
            },
            seeds={"eval": EXP.benchmark_seeds("general")[0]},
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


# --- benchmarks from outside the package (benchmarks.py, evaluate.benchmarks.<name>.module): one rule for all
# of them, a job a (benchmark, model, protocol) that runs the benchmark's score_<name> stage and writes its
# summary; its manifests and logs are score_<name>'s (the benchmark's score rule).
PLUGINS = {b.name: b for b in EXP.benchmarks.values() if b.stage_module}

if PLUGINS:

    use rule job_frame as score_benchmark with:
        input:
            model=lambda w: EXP.models.model_dir(w.model),
        output:
            summary=LAYOUT.score("{benchmark}", "{model}", "{protocol}", "summary"),
            manifest=LAYOUT.manifest("score_{benchmark}", "{model}", "{protocol}"),
        log:
            LAYOUT.log("score_{benchmark}", "{model}", "{protocol}"),
        benchmark:
            LAYOUT.benchmark("score_{benchmark}", "{model}", "{protocol}")
        wildcard_constraints:
            benchmark="|".join(PLUGINS),
        conda:
            rule_env("score_benchmark")
        resources:
            **rule_resources("score_benchmark"),
        params:
            **job(
                "score_benchmark",
                stage=lambda w: plugin_rule(w.benchmark),
                config=lambda w: {
                    "benchmark": subtree("evaluate", "benchmarks", w.benchmark),
                    "protocol": protocol_spec(w.protocol, 0, w.model),
                    "model": EXP.models.model_spec(w.model),
                },
                seeds=lambda w: {"eval": EXP.benchmark_seeds(w.benchmark)},
                module=lambda w: PLUGINS[w.benchmark].stage_module,
            ),


# --- each benchmark's scores are one named target: <name>_all (benchmarks.py) --------------------------


for _bench in EXP.benchmarks.values():
    if _bench.all_target:

        rule:
            name:
                f"{_bench.name}_all"
            input:
                paths(_bench.target(EXP)),
            localrule: True
