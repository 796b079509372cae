# Training: GRPO (vanilla vs efficient vs each speed-up alone) per setting, from the models of models.smk.


# One rule for both engines: local CPU GRPO on the embedded default, verl on SLURM at paper scale
# (1 node x 8 GPUs, or several nodes with Ray started through srun: train.verl.nodes).
use rule job_frame as train_grpo with:
    input:
        train=LAYOUT.train_set("{dataset}"),
        heldout=lambda w: EXP.heldout_split(w.dataset),
        base=lambda w: EXP.models.policy_start_dir(w.dataset),
    output:
        metrics=LAYOUT.training_file("{dataset}", "{variant}", "metrics"),
        curve=LAYOUT.training_file("{dataset}", "{variant}", "curve"),
        summary=LAYOUT.training_file("{dataset}", "{variant}", "summary"),
        final=directory(LAYOUT.training_file("{dataset}", "{variant}", "final")),
        manifest=LAYOUT.manifest("train_grpo", "{dataset}", "{variant}"),
    log:
        LAYOUT.log("train_grpo", "{dataset}", "{variant}"),
    benchmark:
        LAYOUT.benchmark("train_grpo", "{dataset}", "{variant}")
    # The longest jobs, and the last: started as soon as their data exist, so that the run ends on short
    # jobs on every core rather than on one training with the other cores idle (scheduling only).
    priority: 2
    conda:
        rule_env("train_grpo")
    threads: THREADS
    resources:
        **rule_resources("train_grpo"),
    params:
        **train_job("train_grpo", {"train": subtree("train", "seed")}),


# The efficiency experiment: the same training rule at other seeds (train.efficiency.runs); seed
# train.seed is the run above, so every seed of a variant shares one held-out set and one start.
use rule train_grpo as train_grpo_seed with:
    output:
        metrics=LAYOUT.training_file("{dataset}", "{variant}", "metrics", "{seed}"),
        curve=LAYOUT.training_file("{dataset}", "{variant}", "curve", "{seed}"),
        summary=LAYOUT.training_file("{dataset}", "{variant}", "summary", "{seed}"),
        final=directory(
            LAYOUT.training_file("{dataset}", "{variant}", "final", "{seed}")
        ),
        manifest=LAYOUT.manifest(
            "train_grpo_seed", LAYOUT.training_key("{dataset}", "{variant}", "{seed}")
        ),
    log:
        LAYOUT.log(
            "train_grpo_seed", LAYOUT.training_key("{dataset}", "{variant}", "{seed}")
        ),
    benchmark:
        LAYOUT.benchmark(
            "train_grpo_seed", LAYOUT.training_key("{dataset}", "{variant}", "{seed}")
        )
    params:
        **train_job("train_grpo_seed", lambda w: {"train": int(w.seed)}),


localrules:
    report_efficiency,
    evidence_unit,
    efficiency,


# The efficiency report: time to vanilla's peak with intervals, the noise floor, non-inferiority,
# per-epoch group types and costs, figures; its own target so it runs without the evaluation stage.
use rule job_frame as report_efficiency with:
    input:
        training=[f for run in EXP.efficiency_runs() for f in run.files],
        manifests=EXP.result_manifests(runs=EXP.efficiency_runs()),
    output:
        index=report(
            LAYOUT.efficiency_report(),
            caption="../report/tables.rst",
            category="Efficiency",
        ),
        manifest=LAYOUT.manifest("report_efficiency"),
    log:
        LAYOUT.log("report_efficiency"),
    benchmark:
        LAYOUT.benchmark("report_efficiency")
    params:
        **job(
            "report_efficiency",
            config={
                "efficiency": config["train"].get("efficiency") or {},
                "variants": subtree("train", "variants"),
                "runs": [r.unit() for r in EXP.efficiency_runs()],
            },
            seeds={},
            run_dir=RUN,
        ),


# One seed-pair unit of the efficiency evidence (docs/efficiency.md, pre-registration 3): the pair's analysis
# inputs and its identity (every job's digests, the machine, the jobs' times), which `make evidence-unit`
# checks and commits under docs/evidence/units/.
use rule job_frame as evidence_unit with:
    input:
        training=lambda w: [
            f for run in EXP.evidence_pair(w.setting, int(w.seed)) for f in run.files
        ],
        manifests=lambda w: EXP.result_manifests(
            runs=EXP.evidence_pair(w.setting, int(w.seed))
        ),
    output:
        unit=directory(LAYOUT.evidence_unit("{setting}", "{seed}")),
        manifest=LAYOUT.manifest("evidence_unit", "{setting}", "{seed}"),
    log:
        LAYOUT.log("evidence_unit", "{setting}", "{seed}"),
    benchmark:
        LAYOUT.benchmark("evidence_unit", "{setting}", "{seed}")
    params:
        **job(
            "evidence_unit",
            config=lambda w: {
                "setting": w.setting,
                "seed": int(w.seed),
                "efficiency": config["train"].get("efficiency") or {},
                "runs": [r.unit() for r in EXP.evidence_pair(w.setting, int(w.seed))],
            },
            seeds={},
            run_dir=RUN,
        ),


rule efficiency:
    input:
        LAYOUT.efficiency_report(),
        EFFICIENCY_ARCHIVE,
