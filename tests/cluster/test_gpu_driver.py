"""toolcall_repro.gpu_driver: the one line a GPU job prints about the node's driver, with stand-ins for
nvidia-smi on PATH (an old driver, a new one, none, a broken one)."""

from __future__ import annotations

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


def cli(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolcall_repro.gpu_driver"], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def test_the_locks_are_cuda_13_and_need_driver_580():
    assert gpu_driver.lock_cuda_major() == 13  # requirements/train-verl.lock: nvidia-cuda-runtime 13.0.96
    for lock in ("train-verl", "eval-vllm"):
        assert gpu_driver.lock_cuda_major(REPO / "requirements" / f"{lock}.lock") == 13
    assert gpu_driver.MIN_DRIVER[13] == 580
    assert "CUDA 13" in gpu_driver.requirement() and "driver >= 580" in gpu_driver.requirement()


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
