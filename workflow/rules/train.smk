# Training: GRPO (vanilla vs efficient vs each speed-up alone) per setting, from the models of models.smk.


# One rule for both engines: local CPU GRPO on the embedded default, verl on SLURM at paper scale
# (1 node x 8 GPUs, or several nodes with Ray started through srun: train.verl.nodes).
rule train_grpo:
    input:
        train=R("data", "train", "{dataset}.parquet"),
        heldout=lambda w: EXP.heldout_split(w.dataset),
        base=lambda w: EXP.policy_start_dir(w.dataset),
    output:
        metrics=R("train", "{dataset}", "{variant}", "metrics.jsonl"),
        curve=R("train", "{dataset}", "{variant}", "curve.jsonl"),
        summary=R("train", "{dataset}", "{variant}", "summary.json"),
        final=directory(R("train", "{dataset}", "{variant}", "final")),
        manifest=manifest("train_grpo", "{dataset}-{variant}"),
    log:
        R("logs", "train_grpo", "{dataset}-{variant}.log"),
    benchmark:
        R("benchmarks", "train_grpo", "{dataset}-{variant}.tsv")
    conda:
        env("train-verl")
    threads: THREADS
    resources:
        **EXP.train_resources(),
    params:
        files=files_param,
        job=train_job({"train": subtree("train", "seed")}),
    shell:
        JOB


# The efficiency experiment: the same training rule at other seeds (train.efficiency.runs); seed
# train.seed is the run above, so every seed of a variant shares one held-out set and one start.
use rule train_grpo as train_grpo_seed with:
    output:
        metrics=R("train", "{dataset}", "{variant}", "seed{seed}", "metrics.jsonl"),
        curve=R("train", "{dataset}", "{variant}", "seed{seed}", "curve.jsonl"),
        summary=R("train", "{dataset}", "{variant}", "seed{seed}", "summary.json"),
        final=directory(R("train", "{dataset}", "{variant}", "seed{seed}", "final")),
        manifest=manifest("train_grpo_seed", "{dataset}-{variant}-seed{seed}"),
    log:
        R("logs", "train_grpo_seed", "{dataset}-{variant}-seed{seed}.log"),
    benchmark:
        R("benchmarks", "train_grpo_seed", "{dataset}-{variant}-seed{seed}.tsv")
    params:
        files=files_param,
        job=train_job(lambda w: {"train": int(w.seed)}, twin="train_grpo_seed"),


localrules:
    report_efficiency,
    efficiency,


# The efficiency report: time to vanilla's peak with intervals, the noise floor, non-inferiority,
# per-epoch group types and costs, figures; its own target so it runs without the evaluation stage.
rule report_efficiency:
    input:
        training=[f for run in EXP.efficiency_runs() for f in run.files],
        manifests=EXP.result_manifests(runs=EXP.efficiency_runs()),
    output:
        index=report(
            R("efficiency", "index.md"),
            caption="../report/tables.rst",
            category="Efficiency",
        ),
        manifest=manifest("report_efficiency"),
    log:
        R("logs", "report_efficiency.log"),
    benchmark:
        R("benchmarks", "report_efficiency.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=files_param,
        job=job(
            "report_efficiency",
            config={
                "efficiency": config["train"].get("efficiency") or {},
                "variants": subtree("train", "variants"),
                "runs": [r.unit() for r in EXP.efficiency_runs()],
            },
            seeds={},
            run_dir=RUN,
        ),
    shell:
        JOB


rule efficiency:
    input:
        R("efficiency", "index.md"),
        EFFICIENCY_ARCHIVE,
