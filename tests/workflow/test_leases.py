"""The head's side of one writer per output (toolcall_repro.lease): a Snakemake run whose tree holds a live
lease of an earlier run's job stops before it removes or runs anything, naming that job; once the holder
is gone the same command runs."""

from __future__ import annotations

import json
import socket
import subprocess

from _workflow_helpers import make_workdir, snakemake

from toolcall_repro import lease

TARGET = "results/ci-smoke/data/raw/xlam.jsonl"


def test_a_live_job_of_an_earlier_run_stops_the_head_before_anything_runs(tmp_path):
    work = make_workdir(tmp_path)
    manifest = work / "results" / "ci-smoke" / "manifests" / "synthesize_source" / "xlam.json"
    path = lease.lease_path(manifest)
    path.parent.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        path.write_text(json.dumps({
            "rule": "synthesize_source", "outputs": [TARGET], "slurm_job_id": None, "host": socket.gethostname(),
            "boot_id": lease._boot_id(), "pid": sleeper.pid, "start_ticks": lease._start_ticks(sleeper.pid),
            "since": "2026-12-07 15:00:00",
        }))  # fmt: skip
        res = snakemake(TARGET, "--cores", "1", "--configfile", ".test/config.yaml", cwd=work, timeout=300)
        assert res.returncode != 0
        err = res.stdout + res.stderr
        assert "jobs of an earlier run of this workflow still write its outputs" in err
        assert f"{TARGET} is being written by PID {sleeper.pid}" in err and f"kill {sleeper.pid}" in err
        assert not (work / TARGET).exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    res = snakemake(TARGET, "--cores", "1", "--configfile", ".test/config.yaml", cwd=work, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (work / TARGET).exists() and not path.exists()
