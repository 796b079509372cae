"""The SLURM launch scripts, run for real with stand-ins for srun, scontrol and the verl interpreter.

Each stand-in appends its command line to a log, so the test reads exactly what a cluster would run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

SCRIPTS = Path(__file__).resolve().parents[3] / "workflow" / "scripts" / "verl"

FAKES = {
    # srun: log, drop its own options (-w takes a value), run the command
    "srun": """echo "srun $*" >> "$CALLS"
while [ $# -gt 0 ]; do
  case "$1" in -w) shift 2 ;; -*) shift ;; *) break ;; esac
done
exec "$@"
""",
    "scontrol": """echo "scontrol $*" >> "$CALLS"
case "$1 $2" in
  "show job") echo "   JobId=$3 JobName=train"; echo "   NodeList=gpu[07-08] BatchHost=gpu07" ;;
  "show hostnames") [ "$3" = "gpu[07-08]" ] && printf 'gpu07\\ngpu08\\n' ;;
esac
""",
    # a Debian-style host: `hostname --ip-address` starts with 127.0.1.1; the route to the worker is right
    "hostname": 'echo "127.0.1.1 10.1.2.3"\n',
    "getent": '[ "$2" = gpu08 ] && echo "10.1.2.4 STREAM gpu08"\n',
    "ip": '[ "$*" = "-4 route get 10.1.2.4" ] && echo "10.1.2.4 dev ib0 src 10.1.2.3 uid 0"\n',
    "verlpy": 'echo "python $* RAY_ADDRESS=${RAY_ADDRESS:-unset}" >> "$CALLS"\n',
}


@pytest.fixture
def fake_env(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in FAKES.items():
        path = bin_dir / name
        path.write_text("#!/usr/bin/env bash\n" + body)
        path.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_"))}
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        CALLS=str(tmp_path / "calls.log"),
        VERL_PYTHON=str(bin_dir / "verlpy"),
        VERL_RAY_CPUS_PER_NODE="32",
    )
    return env


def launch(env, tmp_path, nodes, gpus=8, extra=(), **extra_env):
    args = [
        *extra,
        "--train",
        "t.parquet",
        "--heldout",
        "h.parquet",
        "--base",
        "/models/qwen",
        "--config",
        '{"n": 8}',
    ]
    args += [
        "--out",
        str(tmp_path / "out"),
        "--seed",
        "0",
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        str(gpus),
    ]
    proc = subprocess.run(
        ["bash", str(SCRIPTS / "launch_verl.sh"), *args],
        env={**env, **extra_env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls = Path(env["CALLS"]).read_text().splitlines() if Path(env["CALLS"]).exists() else []
    return proc, calls


def test_one_node_runs_prepare_train_finalize_without_srun(fake_env, tmp_path):
    proc, calls = launch(fake_env, tmp_path, nodes=1, extra=["--verl", '{"nodes": 1}'])
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[3] for c in calls] == ["prepare", "train", "finalize"]
    assert "--nodes 1 --gpus-per-node 8" in calls[0] and "--base /models/qwen" in calls[0]
    assert '--verl-config {"nodes": 1}' in calls[0]
    assert calls[1].endswith(f"train --out {tmp_path / 'out'} RAY_ADDRESS=unset")
    assert "--job-start-s" in calls[2]


def test_two_nodes_start_a_ray_head_and_a_worker_then_the_driver(fake_env, tmp_path):
    proc, calls = launch(fake_env, tmp_path, nodes=2, SLURM_JOB_ID="4242")
    assert proc.returncode == 0, proc.stderr
    text = "\n".join(calls)
    assert "scontrol show job 4242" in text and "scontrol show hostnames gpu[07-08]" in text
    head = next(c for c in calls if c.startswith("srun") and "--head" in c)
    assert "-w gpu07" in head and "--overlap" in head and "--gpus-per-node=8" in head
    assert "--node-ip-address=10.1.2.3 --port=6379 --num-cpus=32 --num-gpus=8 --block" in head
    worker = next(c for c in calls if c.startswith("srun") and "--address=10.1.2.3:6379" in c)
    assert "-w gpu08" in worker and "--num-gpus=8" in worker
    waits = [c for c in calls if "wait-ray" in c]
    assert "--nodes 1 --gpus 0" in waits[0] and "--nodes 2 --gpus 16" in waits[1]
    train = next(c for c in calls if " train --out " in c)
    assert train.endswith("RAY_ADDRESS=10.1.2.3:6379")
    assert calls.index(train) > calls.index(waits[1])
    stops = [c for c in calls if "ray.scripts.scripts stop" in c and c.startswith("python")]
    assert len(stops) == 2  # Ray stopped on both nodes when the job ends
    assert calls[-1].split()[3] == "finalize"


def test_two_nodes_outside_slurm_fail_with_a_reason(fake_env, tmp_path):
    proc, _ = launch(fake_env, tmp_path, nodes=2)
    assert proc.returncode != 0 and "SLURM_JOB_ID is unset" in proc.stderr


def test_an_allocation_too_small_is_refused(fake_env, tmp_path):
    proc, _ = launch(fake_env, tmp_path, nodes=3, SLURM_JOB_ID="1")
    assert proc.returncode != 0 and "allocation has 2 node(s)" in proc.stderr


def test_bad_arguments_are_refused(fake_env, tmp_path):
    proc = subprocess.run(
        ["bash", str(SCRIPTS / "launch_verl.sh"), "--out"], env=fake_env, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "needs a value" in proc.stderr
