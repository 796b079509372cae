"""One writer per output: the job's lease on its outputs, and the head's check before a run starts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from toolcall_repro import lease
from toolcall_repro.job import run
from toolcall_repro.jobspec import Job

RUN = "results/r"


def manifest(root: Path, rule: str = "train_grpo", key: str = "multi_turn-vanilla") -> Path:
    return root / RUN / "manifests" / rule / f"{key}.json"


def record_of(pid: int, **over) -> dict:
    return {
        "rule": "train_grpo", "outputs": ["results/r/train/multi_turn/vanilla/summary.json"], "slurm_job_id": None,
        "host": socket.gethostname(), "boot_id": lease._boot_id(), "pid": pid, "start_ticks": lease._start_ticks(pid),
        "since": "2026-12-07 15:00:00", **over,
    }  # fmt: skip


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def hold(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_the_lease_lies_beside_the_manifests_and_is_given_back_whole(tmp_path):
    m = manifest(tmp_path)
    path = lease.acquire(m, "train_grpo", ["out"])
    assert path == tmp_path / RUN / "leases" / "train_grpo" / "multi_turn-vanilla.json"
    held = json.loads(path.read_text())
    assert held["pid"] == os.getpid() and held["outputs"] == ["out"] and held["rule"] == "train_grpo"
    lease.release(path)
    assert not (tmp_path / RUN / "leases").exists()  # the run's tree as the job found it


def test_a_live_holder_stops_the_job_naming_it_and_what_to_do(tmp_path, sleeper):
    m = manifest(tmp_path)
    hold(lease.lease_path(m), record_of(sleeper.pid))
    with pytest.raises(lease.LeaseHeld) as err:
        lease.acquire(m, "train_grpo", ["out"])
    text = str(err.value)
    assert "results/r/train/multi_turn/vanilla/summary.json is being written by PID" in text
    assert f"kill {sleeper.pid}" in text and "alive" in text
    assert lease.check_run(tmp_path / RUN) == [text]


def test_a_gone_holder_is_taken_over_and_said(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    m = manifest(tmp_path)
    hold(lease.lease_path(m), record_of(gone.pid, start_ticks=12345))
    lines = []
    path = lease.acquire(m, "train_grpo", ["out"], log=lines.append)
    assert json.loads(path.read_text())["pid"] == os.getpid()
    assert len(lines) == 1 and "taking over the lease of PID" in lines[0] and "gone" in lines[0]
    assert len(lease.check_run(tmp_path / RUN)) == 1  # now this test holds it, alive
    lease.release(path)
    assert lease.check_run(tmp_path / RUN) == []


def test_a_reused_pid_is_not_the_holder(tmp_path, sleeper):
    """A PID alive now but started at another time than the lease says is another process."""
    m = manifest(tmp_path)
    hold(lease.lease_path(m), record_of(sleeper.pid, start_ticks=1))
    lease.release(lease.acquire(m, "train_grpo", ["out"], log=lambda _: None))


def test_a_half_written_lease_is_taken_over(tmp_path):
    m = manifest(tmp_path)
    lease.lease_path(m).parent.mkdir(parents=True)
    lease.lease_path(m).write_text("{")
    lines = []
    lease.release(lease.acquire(m, "r", [], log=lines.append))
    assert "half written" in lines[0]


def test_another_hosts_holder_counts_as_alive_with_how_to_check(tmp_path):
    m = manifest(tmp_path)
    hold(lease.lease_path(m), record_of(4242, host="node-elsewhere"))
    with pytest.raises(lease.LeaseHeld, match="check PID 4242 on node-elsewhere; if it is gone, remove the lease"):
        lease.acquire(m, "train_grpo", [])


def fake_squeue(tmp_path: Path, monkeypatch, out: str, rc: int = 0, err: str = "") -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "squeue").write_text(f"#!/bin/sh\nprintf '%s' '{out}'\nprintf '%s' '{err}' >&2\nexit {rc}\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_a_running_slurm_job_holds_it_until_squeue_no_longer_has_it(tmp_path, monkeypatch):
    m = manifest(tmp_path)
    hold(lease.lease_path(m), record_of(1, slurm_job_id="1234", host="n1"))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    fake_squeue(tmp_path, monkeypatch, "RUNNING\n")
    with pytest.raises(lease.LeaseHeld, match=r"SLURM job 1234 .*RUNNING.*squeue -j 1234.*scancel 1234"):
        lease.acquire(m, "train_grpo", [])
    fake_squeue(tmp_path, monkeypatch, "", rc=1, err="slurm_load_jobs error: Invalid job id specified")
    lines = []
    lease.release(lease.acquire(m, "train_grpo", [], log=lines.append))
    assert "taking over the lease of SLURM job 1234" in lines[0]


def test_a_requeued_slurm_job_takes_over_its_own_earlier_attempt(tmp_path, monkeypatch):
    """After a node failure SLURM requeues the job under the same id: squeue says RUNNING (itself)."""
    m = manifest(tmp_path)
    hold(lease.lease_path(m), record_of(1, slurm_job_id="77", host="n1"))
    fake_squeue(tmp_path, monkeypatch, "RUNNING\n")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    lines = []
    lease.release(lease.acquire(m, "train_grpo", [], log=lines.append))
    assert "this same SLURM job 77's earlier attempt (requeued)" in lines[0]


def test_the_slurm_job_id_is_found_in_an_ancestors_environment():
    """Snakemake's jobstep keeps SLURM_JOB_ID, but a launcher may strip it: the batch script's is found."""
    code = "from toolcall_repro.lease import slurm_job_id; print(slurm_job_id())"
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    out = subprocess.run(
        ["bash", "-c", f'SLURM_JOB_ID=9876 bash -c \'env -u SLURM_JOB_ID {sys.executable} -c "{code}"; true\''],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()  # fmt: skip
    assert out == "9876"


def test_the_job_entry_writes_nothing_while_another_job_holds_the_lease(tmp_path, sleeper, capsys):
    """A real stage (synthesize_source) under the job entry: refused with exit 6 and its line, no output and
    no manifest; once the holder is gone, the same job runs, takes the lease over and gives it back."""
    out = tmp_path / RUN / "data" / "raw" / "xlam.jsonl"
    m = manifest(tmp_path, "synthesize_source", "xlam")
    spec = {
        "stage": "synthesize_source",
        "config": {"rows": 4, "malformed": 0},
        "seeds": {"data": 0},
        "options": {"source": "xlam"},
        "output": {"raw": str(out), "manifest": str(m)},
        "files": {"input": [], "output": [str(out), str(m)]},
    }
    hold(lease.lease_path(m), record_of(sleeper.pid, rule="synthesize_source", outputs=[str(out)]))
    assert run(Job.from_json(json.dumps(spec))) == lease.HELD_EXIT
    assert "not started:" in capsys.readouterr().err and not out.exists() and not m.exists()
    sleeper.kill()
    sleeper.wait()
    assert run(Job.from_json(json.dumps(spec))) == 0
    assert out.exists() and m.exists() and not lease.lease_path(m).exists()
    assert "taking over the lease" in capsys.readouterr().out


def test_the_leases_command_lists_live_holders_and_waits_for_them(tmp_path, sleeper, capsys):
    results = tmp_path / "results"
    assert lease.main([str(results)]) == 0 and "no job holds a lease" in capsys.readouterr().out
    hold(lease.lease_path(manifest(tmp_path)), record_of(sleeper.pid))
    assert lease.main([str(results)]) == 1 and "is being written by PID" in capsys.readouterr().out
    killer = subprocess.Popen(["bash", "-c", f"sleep 1; kill {sleeper.pid}"])
    assert lease.main([str(results), "--wait", "20", "--every", "0.5"]) == 0
    killer.wait()


def test_a_second_head_is_refused_while_the_first_heads_slurm_job_runs(tmp_path, monkeypatch, capsys):
    """scripts/cluster-head.sh: each head takes .snakemake/toolcall-head.json in its SLURM job."""
    fake_squeue(tmp_path, monkeypatch, "RUNNING\n")
    head = tmp_path / ".snakemake" / "toolcall-head.json"
    monkeypatch.setenv("SLURM_JOB_ID", "55")
    assert lease.main(["--head", str(head)]) == 0 and "head lease taken" in capsys.readouterr().out
    monkeypatch.setenv("SLURM_JOB_ID", "56")
    assert lease.main(["--head", str(head)]) == 1
    assert "another Snakemake head still runs this workflow" in capsys.readouterr().out
    fake_squeue(tmp_path, monkeypatch, "", rc=1, err="Invalid job id specified")  # the first head ended
    assert lease.main(["--head", str(head)]) == 0 and "taking over the lease of SLURM job 55" in capsys.readouterr().out
