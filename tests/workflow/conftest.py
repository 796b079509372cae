"""Fixtures of the tests that drive the real Snakemake CLI (helpers: _workflow_helpers.py)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

# This folder has no __init__.py: make its helpers importable (as tests/engines/verl does).
sys.path.insert(0, str(Path(__file__).parent))
from _workflow_helpers import make_workdir, snakemake, write_config, write_fake_cluster  # noqa: E402


@pytest.fixture
def workdir(tmp_path):
    """This test's own Snakemake working directory (see make_workdir)."""
    return make_workdir(tmp_path / "tree")


@pytest.fixture
def smk(workdir):
    """Run the Snakemake CLI in this test's own working directory: smk("-n", ...)."""
    return functools.partial(snakemake, cwd=workdir)


@pytest.fixture(scope="session")
def make_config():
    """Write a complete config from a shipped one plus overrides: make_config(tmp_path, base, overrides)."""
    return write_config


@pytest.fixture
def fake_cluster(tmp_path):
    """A PATH directory with recording fakes of the SLURM client commands (and conda)."""
    bin_dir = tmp_path / "fakebin"
    record_dir = tmp_path / "slurm"
    bin_dir.mkdir()
    record_dir.mkdir()
    write_fake_cluster(bin_dir, record_dir)
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(record_dir),
        "TOOLCALL_SLURM_PARTITION": "gpu-a100",
        "TOOLCALL_SLURM_ACCOUNT": "proj123",
    }
    return env, record_dir


@pytest.fixture(scope="module")
def fake_cluster_env(tmp_path_factory):
    """The fake SLURM client commands (and conda) on PATH, once per module: the env to run the CLI with."""
    bin_dir = tmp_path_factory.mktemp("fakebin")
    record_dir = tmp_path_factory.mktemp("slurm")
    write_fake_cluster(bin_dir, record_dir)
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(record_dir),
        "TOOLCALL_SLURM_PARTITION": "gpu-a100",
        "TOOLCALL_SLURM_ACCOUNT": "proj123",
    }
