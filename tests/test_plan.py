"""The plan's arithmetic and its reading of a dry-run (pure parts; the CLI is tested on the paper DAG)."""

import json
import shlex
from pathlib import Path

import yaml

from toolcall_repro.experiment import Experiment
from toolcall_repro.plan import PlannedJob, bfcl_vllm, format_plan, gpu_jobs_plan, parse_dryrun, training_plan

RUN = {"batch_size": 256, "n": 16, "epochs": 4, "downsample": {"m": 8}, "filter": {"k": 1}}

# The job entry's line as Snakemake prints it: `python -m toolcall_repro.job SPEC FILES > log 2>&1`.
SPEC = {
    "stage": "train_grpo",
    "config": {"batch_size": 256, "n": 16, "epochs": 4, "downsample": {"m": 8}},
    "seeds": {"train": 0},
    "options": {"engine": "verl", "nodes": 2},
}
FILES = {"rule": "train_grpo", "input": {}, "output": {}, "files": {"input": [], "output": []}, "gpus": 0}
SHELL = (
    f"python -m toolcall_repro.job {shlex.quote(json.dumps(SPEC))} {shlex.quote(json.dumps(FILES))}"
    " > results/p/logs/t.log 2>&1"
)

DRYRUN = f"""[Tue Dec  1 10:20:45 2026]
rule train_grpo:
    input: results/p/data/train/multi_turn.parquet
    output: results/p/train/multi_turn/efficient/summary.json
    wildcards: dataset=multi_turn, variant=efficient
    resources: tmpdir=/tmp, mem_mb=480000, runtime=2880, gpu=0, gres=gpu:a100:8, nodes=2, tasks=2
Shell command: {SHELL}

[Tue Dec  1 10:20:45 2026]
rule normalise_source:
    input: results/p/data/raw/xlam.jsonl
    wildcards: source=xlam
    resources: tmpdir=/tmp, gpu=0
"""


def test_training_plan_counts_drop_last_batches_and_caps_at_max_steps():
    plan = training_plan(RUN, 2600)
    assert (plan["steps_per_epoch"], plan["steps"]) == (10, 40)
    assert (plan["rollouts_per_step"], plan["update_rows_per_step"]) == (4096, 2048)
    assert plan["rollouts_total"] == 40 * 4096
    assert training_plan({**RUN, "max_steps": 80, "downsample": None}, 63_000)["steps"] == 80
    unknown = training_plan({**RUN, "max_steps": 80}, None)
    assert unknown["steps"] == 80 and unknown["steps_per_epoch"] is None
    assert training_plan(RUN, None)["steps"] is None


def test_dryrun_blocks_and_multi_node_gpus():
    jobs = parse_dryrun(DRYRUN)
    assert [j.rule for j in jobs] == ["train_grpo", "normalise_source"]
    train = jobs[0]
    assert train.gpus == 16  # GRES per node x nodes
    assert train.run_config == SPEC["config"] and train.name == "multi_turn/efficient"
    assert train.spec["options"]["engine"] == "verl" and jobs[1].spec is None
    assert jobs[1].gpus == 0 and PlannedJob(rule="x", resources={"gpu": "1"}).gpus == 1
    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "paper.yaml").read_text())
    config["run_id"] = "p"
    config["filter"]["single_turn"]["target_size"], config["filter"]["multi_turn"]["target_size"] = 2300, 2600
    config["filter"]["format_study"]["size"] = 700
    plan = gpu_jobs_plan(jobs, Experiment(config), retries=1)
    assert plan["gpu_job_count"] == 1
    assert plan["max_gpu_hours"] == 16 * 48 * 2
    assert plan["gpu_jobs"][0]["training"]["steps"] == 40
    rows = dict(single_turn=2300, multi_turn=2600, format_single=700, format_multi=700, tooln1=None)
    assert plan["train_rows"] == {k: {"rows": v, "from": "config target"} for k, v in rows.items()}
    text = format_plan(plan)
    assert "multi_turn/efficient" in text and "4,096" in text and "1,536 GPU-hours" in text
    # the driver the GPU locks need, said before the bill (gpu_driver); no GPU job, no line
    assert "Driver: the GPU envs are CUDA 13 builds" in text and "NVIDIA driver >= 580" in text
    assert gpu_jobs_plan([jobs[1]], Experiment(config))["gpu_driver"] is None
    # engines.cuda: 12 (drivers older than 580): the plan names CUDA 12, its lock and its minimum driver
    config["engines"]["cuda"] = 12
    cu12 = format_plan(gpu_jobs_plan(jobs, Experiment(config), retries=1))
    assert "Driver: the GPU envs are CUDA 12 builds (requirements/train-verl-cu12.lock" in cu12
    assert "NVIDIA driver >= 525" in cu12 and ">= 580" not in cu12


def test_bfcl_serves_with_the_vllm_of_the_chosen_cuda_majors_env_under_conda():
    locate = [PlannedJob(rule="locate_vllm")]
    conda = {"software-deployment-method": "conda"}
    assert bfcl_vllm(locate, conda)["vllm"] == "the vllm of workflow/envs/eval-vllm.yaml"
    assert bfcl_vllm(locate, conda, cuda=12)["vllm"] == "the vllm of workflow/envs/eval-vllm-cu12.yaml"
    assert bfcl_vllm([], conda, cuda=12) is None


def test_plan_warns_when_a_paper_scale_speedup_may_run_on_sdpa():
    """The down-sampling speedup grows with the update's share of a step, which sdpa (no padding removal)
    inflates: a paper-scale comparison not pinned to flash_attention_2 is said before the bill."""
    from toolcall_repro.plan import attention_warning

    repo = Path(__file__).resolve().parents[1]
    base = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    paper = {**base, **yaml.safe_load((repo / "config" / "paper.yaml").read_text())}
    line = attention_warning(Experiment(paper))
    assert line and "attn_implementation is auto" in line and "efficient against vanilla" in line
    assert "FLASH_ATTN=1 scripts/install-verl-env.sh --gpu" in line
    paper["train"]["verl"]["attn_implementation"] = "flash_attention_2"
    assert attention_warning(Experiment(paper)) is None
    assert attention_warning(Experiment(base)) is None  # the local engine: no verl kernel to choose
