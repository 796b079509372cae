"""A real two-node Ray cluster through launch_verl_multi_node.sh on the local SLURM (scripts/local_slurm.sh):
the Ray head in an srun step on n1, a worker in an srun step on n2, `wait-ray` until both answer, then the
script's bring-up probe (VERL_RAY_CHECK=1: a task pinned to each Ray node reports the SLURM node it ran
on) instead of verl's driver. From a plain `sbatch --nodes=2` script (SLURM_GPUS=a100:16 set) and from a
two-node rule under Snakemake's slurm executor and jobstep.

Both slurmd run on this host, so both Ray nodes have one IP: Ray 2.60 takes a second node on the same
address (its own raylet, object store and ports; the head's temp dir, which the worker takes from the
GCS). The test-only settings, all knobs of the script: a free GCS port, the head's temp dir in a short
private folder (Unix socket paths), no dashboard, a small object store, and VERL_RAY_STOP_ALL=0, so the
job ends its own Ray steps instead of `ray stop --force`, which would stop every Ray on this host. Every
process of the test carries a marker in its environment; whatever is left of them at the end is killed
by PID and fails the test.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helpers of test_local_slurm.py beside this file
from test_local_slurm import MULTI_NODE, head_iface, job_ids, run_snakemake  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
VERL_PY = Path(os.environ.get("VERL_PYTHON") or REPO / ".venv-verl" / "bin" / "python")
cluster = pytest.mark.workflow
MARK = "TOOLCALL_RAY_TEST_MARK"


def marked_pids(mark: str) -> list[int]:
    """Processes whose environment holds MARK=mark (this test's job steps, Ray daemons and workers)."""
    needle = f"{MARK}={mark}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_env(local_slurm):
    """The environment of the launch script for a real Ray (VERL_RAY_CHECK), and the check afterwards that
    no process of it is left (killed by PID if one is, and the test fails)."""
    if not (VERL_PY.exists() and (VERL_PY.parent / "ray").exists()):
        pytest.skip(f"no Ray at {VERL_PY} (make install-verl)")
    iface = head_iface()
    if not iface:
        pytest.skip("no interface with a non-loopback IPv4 address here for the Ray head (VERL_HEAD_IFACE)")
    mark = uuid.uuid4().hex[:12]
    tmp = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))  # short: Ray's Unix sockets live under it
    addr = next(
        p.split("/")[0] for p in os.popen(f"ip -4 -o addr show dev {iface}").read().split() if "/" in p
    )
    env = {
        MARK: mark,
        "VERL_PYTHON": str(VERL_PY),
        "VERL_HEAD_IFACE": iface,
        "VERL_RAY_CHECK": "1",
        "VERL_RAY_STOP_ALL": "0",
        "VERL_RAY_PORT": str(free_port(addr)),
        "VERL_RAY_WAIT_S": "180",
        "VERL_RAY_START_ARGS": "--object-store-memory=100000000 --disable-usage-stats",
        "VERL_RAY_HEAD_ARGS": f"--temp-dir={tmp}/ray --include-dashboard=false",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    yield env
    left = []
    for _ in range(60):
        left = marked_pids(mark)
        if not left:
            break
        time.sleep(0.5)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)
    assert not left, f"processes of the Ray cluster left 30 s after the job: {left}"


def check_log(text: str) -> None:
    assert "ray at " in text and ": 2 node(s), 16 GPU(s)" in text, text[-4000:]  # wait-ray
    line = next((x for x in text.splitlines() if "[multi_node] ray check:" in x), "")
    assert "2 alive node(s), 16 GPU(s)" in line, text[-4000:]
    assert "n1 (node " in line and "n2 (node " in line, line  # a task ran in each node's srun step
    # SLURM sets ROCR_VISIBLE_DEVICES in every GPU step (the local gres.conf names no vendor); verl's workers
    # refuse it beside CUDA_VISIBLE_DEVICES, so no Ray process of ours has it
    assert line.count("ROCR_VISIBLE_DEVICES unset") == 2, line
    assert "Invalid" not in text and "Authentication" not in text, text[-4000:]


@cluster
def test_two_ray_nodes_from_a_plain_sbatch(local_slurm, ray_env, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(
        f'#!/bin/bash\necho "SLURM_GPUS=$SLURM_GPUS ROCR_VISIBLE_DEVICES=${{ROCR_VISIBLE_DEVICES:-unset}}"\n'
        f"exec bash {MULTI_NODE} {tmp_path}/out 2 8\n"
    )
    log = tmp_path / "job.log"
    env = {**local_slurm.env, **ray_env}
    part, acct = env["TOOLCALL_SLURM_PARTITION"], env["TOOLCALL_SLURM_ACCOUNT"]
    t0 = time.monotonic()
    res = local_slurm.run("sbatch", "--parsable", "-A", acct, "-p", part, "--nodes=2", "--ntasks=2", "--gpus=a100:16",
                          "-C", "a100", "--cpus-per-task=64", "--mem", "480000", "-t", "10", "-o", str(log),
                          str(script), env=env)  # fmt: skip
    job = res.stdout.strip().split(";")[0]
    state = local_slurm.wait(job, timeout=300)
    text = log.read_text() if log.exists() else ""
    assert state == "COMPLETED", text[-4000:]
    assert "SLURM_GPUS=a100:16" in text
    assert "ROCR_VISIBLE_DEVICES=unset" not in text  # SLURM set it in the job: the case the script handles
    check_log(text)
    print(f"two-node Ray from sbatch: {time.monotonic() - t0:.1f} s")


@cluster
def test_two_ray_nodes_from_a_two_node_rule_under_snakemake(local_slurm, ray_env, tmp_path):
    """train_grpo's two-node resources; the jobstep hands the rule no SLURM_JOB_NODELIST and no
    SLURM_GPUS (the script asks scontrol)."""
    env_file = tmp_path / "ray_env.sh"
    env_file.write_text("".join(f"export {k}='{v}'\n" for k, v in ray_env.items()))
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(f"""
        rule train:
            output: "ray.log"
            resources: nodes=2, tasks=2, mpi="srun", gpu=16, gpu_model="a100", tasks_per_gpu=0,
                       cpus_per_task=64, mem_mb=480000, constraint="a100", runtime=10
            shell: ". {env_file}; bash {MULTI_NODE} out 2 8 > {{output}}.tmp 2>&1; rc=$?; "
                   "mv {{output}}.tmp {{output}}; exit $rc"
    """)
    )
    t0 = time.monotonic()
    res = run_snakemake(local_slurm, tmp_path, timeout=360)
    log = res.stdout + res.stderr
    text = (tmp_path / "ray.log").read_text() if (tmp_path / "ray.log").exists() else ""
    assert res.returncode == 0, log[-3000:] + text[-3000:]
    check_log(text)
    (job,) = job_ids(log)
    tres = local_slurm.wait_sacct(job, "State,AllocTRES")
    assert tres.startswith("COMPLETED|") and "gres/gpu=16" in tres and "node=2" in tres, tres
    print(f"two-node Ray under Snakemake: {time.monotonic() - t0:.1f} s")
