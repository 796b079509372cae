"""scripts/install-verl-env.sh and install-cluster-envs.sh take `--cuda 12` (the config's engines.cuda: 12)
to install the CUDA 12 lock, and refuse what has no lock before installing anything.

Nothing is installed: each script runs as a copy beside a stand-in scripts/install-from-lock.sh that
records which lock it was asked for (and writes the lock marker the real one writes), with a stand-in
PYTHON whose `-m venv DIR` makes a DIR/bin/python that answers anything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FROM_LOCK = """#!/usr/bin/env bash
# stand-in for scripts/install-from-lock.sh PYTHON ENV: records the call, writes the lock marker
echo "$1 $2" >> "$INSTALL_RECORD"
prefix=$(dirname "$(dirname "$1")")
printf '{"env": "%s", "lock": "requirements/%s.lock"}\\n' "$2" "$2" > "$prefix/toolcall-repro-lock.json"
"""
PYTHON = """#!/usr/bin/env bash
# stand-in python: `-m venv DIR` makes DIR/bin/python, a python that answers anything
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin"
  printf '#!/usr/bin/env bash\\necho stand-in python "$@"\\n' > "$3/bin/python"
  chmod 755 "$3/bin/python"
fi
"""


@pytest.fixture
def checkout(tmp_path):
    """A copy of scripts/ with the stand-in install-from-lock.sh; run(script, *args) -> (result, calls)."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "scripts", repo / "scripts")
    (repo / "scripts" / "install-from-lock.sh").write_text(FROM_LOCK)
    python = tmp_path / "python"
    python.write_text(PYTHON)
    python.chmod(0o755)
    record = tmp_path / "installs"
    env = {
        **os.environ,
        "PYTHON": str(python),
        "INSTALL_RECORD": str(record),
        "VERL_VENV": str(tmp_path / "verl"),
    }

    def run(script: str, *args: str):
        record.unlink(missing_ok=True)
        res = subprocess.run(["bash", str(repo / "scripts" / script), *args], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        calls = [line.split() for line in record.read_text().splitlines()] if record.exists() else []
        return res, [(Path(py).parent.parent.name, lock) for py, lock in calls]

    return run


@pytest.mark.parametrize(
    ("args", "lock"),
    [((), "verl-cpu"), (("--gpu",), "train-verl"), (("--gpu", "--cuda", "13"), "train-verl"),
     (("--gpu", "--cuda", "12"), "train-verl-cu12"), (("--cuda", "12", "--gpu"), "train-verl-cu12")],
)  # fmt: skip
def test_install_verl_env_installs_the_lock_of_the_chosen_cuda_major(checkout, args, lock):
    res, calls = checkout("install-verl-env.sh", *args)
    assert res.returncode == 0, res.stderr
    assert calls == [("verl", lock)]
    assert (REPO / "requirements" / f"{lock}.lock").is_file()
    assert f"ready ({lock})" in res.stdout


def test_a_venv_of_the_other_cuda_major_is_made_anew(checkout, tmp_path):
    assert checkout("install-verl-env.sh", "--gpu")[0].returncode == 0
    res, calls = checkout("install-verl-env.sh", "--gpu", "--cuda", "12")
    assert res.returncode == 0 and calls == [("verl", "train-verl-cu12")]
    assert "was installed from another lock" in res.stderr and "making it anew" in res.stderr
    marker = json.loads((tmp_path / "verl" / "toolcall-repro-lock.json").read_text())
    assert marker["env"] == "train-verl-cu12"


@pytest.mark.parametrize(
    ("args", "said"),
    [(("--cuda", "12"), "--cuda 12 is for --gpu"), (("--gpu", "--cuda", "11"), "--cuda must be 13 or 12"),
     (("--gpu", "--cuda"), "usage:"), (("--gpus",), "usage:")],
)  # fmt: skip
def test_install_verl_env_refuses_a_cuda_without_a_lock_and_installs_nothing(checkout, args, said):
    res, calls = checkout("install-verl-env.sh", *args)
    assert res.returncode == 2 and said in res.stderr and calls == []


def test_install_cluster_envs_builds_main_and_the_cuda_12_verl_venv(checkout, tmp_path):
    prefix = tmp_path / "envs"
    res, calls = checkout("install-cluster-envs.sh", str(prefix), "--gpu", "--cuda", "12")
    assert res.returncode == 0, res.stderr
    assert calls == [("main", "main"), ("verl", "train-verl-cu12")]
    assert (prefix / "verl" / "bin" / "python").exists() and (prefix / "bin" / "python").exists()
    res, calls = checkout("install-cluster-envs.sh", str(tmp_path / "default"), "--gpu")
    assert res.returncode == 0 and calls == [("main", "main"), ("verl", "train-verl")]


@pytest.mark.parametrize("args", [("--cuda", "12"), ("--gpu", "--cuda", "11"), ("--gpu", "--cuda")])
def test_install_cluster_envs_refuses_before_building_anything(checkout, tmp_path, args):
    res, calls = checkout("install-cluster-envs.sh", str(tmp_path / "envs"), *args)
    assert res.returncode == 2 and "usage:" in res.stderr and calls == []
    assert not (tmp_path / "envs" / "main").exists()


def test_make_cluster_envs_passes_cuda_through():
    def make(*args):
        res = subprocess.run(["make", "-n", "-C", str(REPO), "cluster-envs", "PREFIX=/shared/envs", *args],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert res.returncode == 0, res.stderr
        return [
            line
            for line in res.stdout.splitlines()
            if "install-cluster-envs.sh" in line and "usage" not in line
        ]

    assert make("CUDA=12") == ['bash scripts/install-cluster-envs.sh "/shared/envs" --gpu --cuda 12']
    assert make()[0].split() == ["bash", "scripts/install-cluster-envs.sh", '"/shared/envs"', "--gpu"]
