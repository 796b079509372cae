"""What the slurm profile would submit for a training job, recorded by fake SLURM commands on PATH."""

from pathlib import Path

import pytest


def prepare_inputs(workdir: Path, run_id: str) -> Path:
    """Touch the inputs of one multi-turn training job so that it is the only job to submit."""
    run = workdir / "results" / run_id
    for rel in ["data/train/multi_turn.parquet", "data/train/heldout_multi_turn.parquet"]:
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(b"")
    (run / "models" / "hub" / "Qwen--Qwen3-4B").mkdir(parents=True, exist_ok=True)
    return run


def submissions(record_dir: Path) -> list[list[str]]:
    return [p.read_text().splitlines() for p in sorted(record_dir.glob("submission-*.args"))]


@pytest.mark.parametrize(
    ("nodes", "rule", "seed"),
    # train_grpo_seed (the efficiency experiment's other seeds) went out with the 120-min, 16 GB, no-GPU
    # defaults while the profile listed train_grpo alone
    [(1, "train_grpo", None), (2, "train_grpo", None), (1, "train_grpo_seed", 1)],
)
def test_training_job_submission(tmp_path, workdir, smk, make_config, fake_cluster, nodes, rule, seed):
    env, record_dir = fake_cluster
    run_id = f"slurmtest-{nodes}node-{rule}"
    cfg = make_config(tmp_path, "config/paper.yaml", {"run_id": run_id, "train": {"verl": {"nodes": nodes}}, "allow_unpinned_revisions": True})
    prepare_inputs(workdir, run_id)
    res = smk(
        "--profile", "profiles/slurm", "--configfile", str(cfg),
        "--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "1", "--retries", "0",
        "--allowed-rules", rule, "--",
        f"results/{run_id}/train/multi_turn/vanilla/{'' if seed is None else f'seed{seed}/'}summary.json",
        env=env, timeout=300,
    )  # fmt: skip
    subs = submissions(record_dir)
    assert len(subs) == 1, res.stdout + res.stderr
    args = " ".join(subs[0])
    if nodes == 1:
        assert "--gpus=a100:8" in args and "--nodes=1" in args
    else:  # the total over the nodes, one task per node (the Ray head and worker, 8 GPUs each)
        assert "--gpus=a100:16" in args and "--nodes=2" in args and "--ntasks=2" in args
    assert "-p gpu-a100" in args and "-A proj123" in args
    assert "-t 2880" in args and "--mem 480000" in args and "--cpus-per-task=64" in args
    assert "-C a100" in args or "--constraint" in args
    assert "--ntasks-per-gpu" not in args  # tasks_per_gpu: 0, Ray/srun place the workers
    wildcards = "dataset=multi_turn,variant=vanilla" + ("" if seed is None else f",seed={seed}")
    assert f"--target-jobs '{rule}:{wildcards}'" in args
    # the profile deployed the training job's conda env: its post-deploy step installed the package from
    # the env's lock (scripts/install-from-lock.sh --package-only) into the env's own python
    calls = (record_dir / "python.calls").read_text()
    assert "-m pip install -q --no-deps --no-build-isolation -e ." in calls
    assert "- train-verl requirements/train-verl.lock" in calls


def test_a_plug_in_benchmark_score_job_gets_the_sheets_gpu_resources(tmp_path, workdir, smk, make_config, fake_cluster):
    """A benchmark registered from outside the package (tests/toy_benchmark.py) scores at paper scale through
    the sheet's score_benchmark row: one evaluation GPU of the site's type, its time, memory and CPUs. Before
    the sheet its rule (score_<name>) was in no list of the profile's and went out with the CPU defaults."""
    env, record_dir = fake_cluster
    env = {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # toy_benchmark
    run_id = "slurmtest-plugin"
    toy = {"toy": {"module": "toy_benchmark", "models": ["base"], "protocols": ["default"]}}
    cfg = make_config(tmp_path, "config/paper.yaml", {"run_id": run_id, "evaluate": {"benchmarks": toy},
                                                      "allow_unpinned_revisions": True})  # fmt: skip
    (workdir / "results" / run_id / "models" / "hub" / "Qwen--Qwen3-4B").mkdir(parents=True)
    res = smk(
        "--profile", "profiles/slurm", "--configfile", str(cfg),
        "--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "1", "--retries", "0",
        "--allowed-rules", "score_benchmark", "--", f"results/{run_id}/eval/toy/base/default/summary.json",
        env=env, timeout=300,
    )  # fmt: skip
    subs = submissions(record_dir)
    assert len(subs) == 1, res.stdout + res.stderr
    args = " ".join(subs[0])
    assert "--gpus=a100:1" in args and "-t 480" in args and "--mem 64000" in args, args
    assert "--cpus-per-task=8" in args and ("-C a100" in args or "--constraint" in args), args
    assert "--target-jobs 'score_benchmark:benchmark=toy,model=base,protocol=default'" in args, args
