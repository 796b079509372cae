"""toolcall_repro.gpu_driver: the one line a GPU job prints about the node's driver, with stand-ins for
nvidia-smi on PATH (an old driver, a new one, none, a broken one), against the lock of the CUDA major the
config chose (engines.cuda: 13, the default, or 12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolcall_repro import gpu_driver

REPO = Path(__file__).resolve().parents[2]


def standin(tmp_path: Path, body: str) -> dict:
    """A PATH whose nvidia-smi runs body (and records its arguments)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f'#!/usr/bin/env bash\necho "$*" > "{tmp_path}/args"\n{body}\n')
    exe.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolcall_repro.gpu_driver", *args], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def test_the_locks_are_cuda_13_and_need_driver_580():
    assert gpu_driver.lock_cuda_major() == 13  # requirements/train-verl.lock: nvidia-cuda-runtime 13.0.96
    for lock in ("train-verl", "eval-vllm"):
        assert gpu_driver.lock_cuda_major(REPO / "requirements" / f"{lock}.lock") == 13
    assert gpu_driver.MIN_DRIVER[13] == 580
    assert "CUDA 13" in gpu_driver.requirement() and "driver >= 580" in gpu_driver.requirement()


def test_the_cuda_12_locks_are_cuda_12_and_need_driver_525():
    """engines.cuda: 12 picks the *-cu12 locks, whose nvidia-cuda-runtime-cu12 pin says CUDA 12."""
    assert gpu_driver.gpu_lock(12) == REPO / "requirements" / "train-verl-cu12.lock"
    assert gpu_driver.gpu_lock(13) == gpu_driver.LOCK == REPO / "requirements" / "train-verl.lock"
    for lock in ("train-verl-cu12", "eval-vllm-cu12"):
        assert gpu_driver.lock_cuda_major(REPO / "requirements" / f"{lock}.lock") == 12
    assert gpu_driver.MIN_DRIVER[12] == 525
    need = gpu_driver.requirement(12)
    assert "CUDA 12" in need and "driver >= 525" in need and "requirements/train-verl-cu12.lock" in need
    # the env names engines.cuda picks: only the GPU envs have a twin
    assert [gpu_driver.env_name(e, 12) for e in ("train-verl", "eval-vllm", "eval-bfcl", "cpu")] == [
        "train-verl-cu12", "eval-vllm-cu12", "eval-bfcl", "cpu"]  # fmt: skip
    assert [gpu_driver.env_name(e, 13) for e in ("train-verl", "eval-vllm")] == ["train-verl", "eval-vllm"]
    with pytest.raises(ValueError, match=r"engines.cuda must be one of \[12, 13\], got 11"):
        gpu_driver.env_name("train-verl", 11)


def test_a_550_driver_runs_the_cuda_12_locks_and_the_cuda_13_refusal_names_them(tmp_path):
    """Driver 550 (the CUDA 12 branch): --cuda 12 passes; the default CUDA 13 check fails and says to set
    engines.cuda: 12, naming the CUDA 12 locks."""
    env = standin(tmp_path, "echo 550.54.15")
    res = cli(env, "--cuda", "12")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ("gpu driver: found 550.54.15; CUDA 12 (requirements/train-verl-cu12.lock) needs "
                                  "an NVIDIA driver >= 525: ok")  # fmt: skip
    res = cli(env)
    assert res.returncode == 1 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert "found 550.54.15" in line and "CUDA 13 (requirements/train-verl.lock)" in line and ">= 580" in line
    assert "Set engines.cuda: 12 in the config" in line
    assert "requirements/train-verl-cu12.lock" in line and "requirements/eval-vllm-cu12.lock" in line
    assert "install-verl-env.sh --gpu --cuda 12" in line
    # the same through the function a GPU job calls
    assert gpu_driver.check(str(tmp_path / "bin" / "nvidia-smi"), cuda=12)[0] == 0
    assert gpu_driver.check(str(tmp_path / "bin" / "nvidia-smi"), cuda=13)[0] == 1


def test_a_driver_older_than_525_is_told_that_no_lock_runs_on_it(tmp_path):
    env = standin(tmp_path, "echo 470.256.02")
    res = cli(env)
    assert res.returncode == 1 and "engines.cuda: 12" not in res.stderr
    assert "no lock here runs on it (the oldest, CUDA 12, needs 525)" in res.stderr
    res = cli(env, "--cuda", "12")
    assert res.returncode == 1
    assert "CUDA 12 (requirements/train-verl-cu12.lock) needs an NVIDIA driver >= 525" in res.stderr


def test_a_gpu_job_checks_the_lock_of_its_runs_engines_cuda(tmp_path, monkeypatch, capsys):
    """The job entry's check (toolcall_repro.job._driver_ok) reads engines.cuda from params.files (files_param,
    what common.smk's job_files passes): on driver 550 a cu12 job starts, a cu13 one (or one that names
    none: the default) stops in one line."""
    from toolcall_repro import job as job_mod
    from toolcall_repro import jobspec, stage

    monkeypatch.setenv("PATH", standin(tmp_path, "echo 550.54.15")["PATH"])
    files = jobspec.files_param({}, {"a": "x"}, {"o": "y"}, {"gpu": 8}, cuda=12)
    assert json.loads(files)["cuda"] == 12 and "cuda" not in json.loads(jobspec.files_param({}, {}, {}, {}))
    spec = json.dumps({"stage": "pool_tooln1"})
    cu12 = jobspec.Job.from_json(spec, files)
    assert cu12.cuda == 12 and cu12.gpus == 8
    assert job_mod._driver_ok(cu12) is True
    assert (
        "CUDA 12 (requirements/train-verl-cu12.lock) needs an NVIDIA driver >= 525: ok"
        in capsys.readouterr().out
    )
    for cuda in (13, None):
        job = jobspec.Job(rule="train_grpo", stage="train_grpo", gpus=8, cuda=cuda)
        assert job_mod._driver_ok(job) is False
        assert "train_grpo: gpu driver: found 550.54.15, but CUDA 13" in capsys.readouterr().err
    # by hand: `toolcall-repro stage ... --gpus 1 --cuda 12` (scripts/gpu_smoke.sh's generate_bfcl)
    assert stage.job_from_argv(["pool_tooln1", "--gpus", "1", "--cuda", "12"]).cuda == 12
    assert stage.job_from_argv(["pool_tooln1"]).cuda is None


def test_an_old_driver_is_refused_in_one_line_that_says_what_to_do(tmp_path):
    env = standin(tmp_path, "printf '535.104.05\\n535.104.05\\n'")  # two GPUs, one line each
    res = cli(env)
    assert res.returncode == 1 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert "found 535.104.05" in line and "CUDA 13" in line and "driver >= 580" in line
    assert "too old" in line and "profiles/slurm/config.yaml" in line
    assert (tmp_path / "args").read_text().split() == ["--query-gpu=driver_version", "--format=csv,noheader"]


def test_a_580_driver_passes(tmp_path):
    res = cli(standin(tmp_path, "echo 580.82.07"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ("gpu driver: found 580.82.07; CUDA 13 (requirements/train-verl.lock) needs an "
                                  "NVIDIA driver >= 580: ok")  # fmt: skip


@pytest.mark.parametrize(
    ("body", "code", "said"),
    [
        ("echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9",
         1, "rc 9: NVIDIA-SMI has failed"),
        ("echo '[N/A]'", 1, "rc 0: [N/A]"),
        ("printf '535.104.05\\n580.65.06\\n'", 1, "found 535.104.05, 580.65.06"),  # the oldest counts
    ],
)  # fmt: skip
def test_a_driver_that_cannot_be_read_or_mixed_is_not_ok(tmp_path, body, code, said):
    res = cli(standin(tmp_path, body))
    assert res.returncode == code and said in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr


def test_no_nvidia_smi_says_so():
    code, line = gpu_driver.check(nvidia_smi="no-such-nvidia-smi-here")
    assert code == 2 and "no no-such-nvidia-smi-here on PATH" in line and "driver >= 580" in line


def test_gpu_smoke_checks_the_driver_before_anything_else():
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu_smoke.sh"), "--dry-run"], cwd=REPO, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    commands = [line for line in res.stdout.splitlines() if line.startswith("+ ")]
    assert commands[0].split()[2:] == ["-m", "toolcall_repro.gpu_driver", "--lock",
                                       f"{REPO}/requirements/train-verl.lock"]  # fmt: skip
    assert "CUDA 13: driver >= 580" in res.stdout


@pytest.mark.parametrize("cuda", [12, 13])
def test_gpu_smoke_names_the_cuda_major_and_driver_of_the_chosen_lock(cuda):
    """--cuda as engines.cuda: the driver check takes that lock, the header says its CUDA major and the
    minimum driver (gpu_driver's own numbers), the verl env must be that lock's, and the BFCL job (the
    one stage run with --gpus) checks the same."""
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu_smoke.sh"), "--dry-run", "--cuda", str(cuda)], cwd=REPO,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    lock = gpu_driver.gpu_lock(cuda)
    major = gpu_driver.lock_cuda_major(lock)
    assert major == cuda
    assert f"CUDA {major}: driver >= {gpu_driver.MIN_DRIVER[major]}, requirements/{lock.name}" in res.stdout
    commands = [line for line in res.stdout.splitlines() if line.startswith("+ ")]
    assert commands[0].split()[2:] == ["-m", "toolcall_repro.gpu_driver", "--lock", str(lock)]
    assert commands[1] == f"+ check: {REPO}/.venv-verl/bin/python was installed from requirements/{lock.name}"
    (bfcl,) = [c for c in commands if " generate_bfcl " in c]
    assert f"--gpus 1 --cuda {cuda} " in bfcl


def test_gpu_smoke_refuses_a_cuda_major_without_a_lock():
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu_smoke.sh"), "--dry-run", "--cuda", "11"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 2 and "--cuda must be 12 or 13" in res.stderr and res.stdout == ""
