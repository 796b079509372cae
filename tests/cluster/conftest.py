"""A real SLURM for the tests of this folder: scripts/local_slurm.sh up, once per session, and down at the end.

Two nodes on this host, shaped like the paper's GPU nodes (64 CPUs, 480 GB, 8 x a100 GRES whose files are
links to /dev/null), with slurmdbd accounting. It needs root (munge and MariaDB users, slurmd as root) and
Debian's packages (installed with apt-get when missing): where either is lacking the tests skip in one
line, a failure under TOOLCALL_REQUIRE_FIXTURES=1 (tests/conftest.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCAL_SLURM = REPO / "scripts" / "local_slurm.sh"
# the helpers of the tests that drive the Snakemake CLI (fake SLURM, working directories, configs)
sys.path.insert(0, str(REPO / "tests" / "workflow"))

TOOLS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "sbatch", "sacct")
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE")


@dataclass
class Cluster:
    state: Path
    env: dict  # os.environ plus SLURM_CONF, TOOLCALL_SLURM_PARTITION, TOOLCALL_SLURM_ACCOUNT

    def run(self, *cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        res = subprocess.run(
            cmd, env=kw.pop("env", self.env), capture_output=True, text=True, timeout=60, **kw
        )
        if check and res.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: rc {res.returncode}\n{res.stdout}\n{res.stderr}")
        return res

    def state_of(self, job: str) -> str:
        """The job's state as squeue has it (slurmctld's, at once), else sacct's (slurmdbd's)."""
        out = self.run("squeue", "-h", "--states=all", "-j", job, "-o", "%T", check=False).stdout.strip()
        return out or self.sacct(job)

    def sacct(self, job: str, fields: str = "State") -> str:
        return self.run("sacct", "-X", "-n", "-P", "-j", job, "-o", fields, check=False).stdout.strip()

    def wait(self, job: str, timeout: float = 60) -> str:
        """Wait until the job has ended; its final state."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            state = self.state_of(job)
            if state.startswith(FINAL):
                return state
            time.sleep(0.5)
        raise AssertionError(f"job {job} not ended within {timeout} s: {self.state_of(job)}")

    def wait_sacct(self, job: str, fields: str = "State", timeout: float = 20) -> str:
        """sacct's line for an ended job (slurmdbd records it a moment after slurmctld)."""
        t0 = time.monotonic()
        out = ""
        while time.monotonic() - t0 < timeout:
            out = self.sacct(job, fields)
            if out and out.split("|")[0].startswith(FINAL):
                return out
            time.sleep(0.5)
        raise AssertionError(f"sacct has no final state for job {job} within {timeout} s: {out!r}")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "a local SLURM cluster (scripts/local_slurm.sh) needs root: run these tests as root"
    if not all(shutil.which(t) for t in TOOLS) and not shutil.which("apt-get"):
        return "no SLURM here (slurm-wlm, slurmdbd, munge, mariadb-server) and no apt-get to install it"
    if Path("/etc/slurm/slurm.conf").exists():
        return (
            "this host has a SLURM of its own (/etc/slurm/slurm.conf): scripts/local_slurm.sh would not start"
        )
    return None


@pytest.fixture(scope="session")
def local_slurm():
    """The cluster (Cluster), up for the session. Its state folder is a fresh temp dir (world-traversable:
    munged runs as the munge user), removed after `down`."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    state = Path(tempfile.mkdtemp(prefix="toolcall-local-slurm-"))
    state.chmod(0o755)
    t0 = time.monotonic()
    # as from a shell whose PATH has no sbin (env -i, many users' and tools' shells): the script finds
    # Debian's daemons in /usr/sbin by itself
    bare = ":".join(p for p in os.environ.get("PATH", "").split(":") if not p.rstrip("/").endswith("sbin"))
    up = subprocess.run(
        ["bash", str(LOCAL_SLURM), "up", str(state)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PATH": bare},
    )
    if up.returncode != 0:
        shutil.rmtree(state, ignore_errors=True)
        if "apt-get install failed" in up.stderr:
            pytest.skip(f"could not install SLURM with apt-get: {up.stderr.strip().splitlines()[-1]}")
        if "another local cluster is up" in up.stderr:
            pytest.skip(up.stderr.strip().splitlines()[-1])
        raise AssertionError(
            f"scripts/local_slurm.sh up failed (rc {up.returncode}):\n{up.stdout}\n{up.stderr}"
        )
    print(f"local SLURM up in {time.monotonic() - t0:.1f} s: {up.stdout.strip().splitlines()[0]}")
    env = dict(os.environ)
    for line in (state / "env.sh").read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    try:
        yield Cluster(state=state, env=env)
    finally:
        down = subprocess.run(
            ["bash", str(LOCAL_SLURM), "down", str(state)], capture_output=True, text=True, timeout=120
        )
        if down.returncode == 0:
            shutil.rmtree(state, ignore_errors=True)
        else:
            print(f"scripts/local_slurm.sh down failed; state kept in {state}:\n{down.stdout}\n{down.stderr}")
