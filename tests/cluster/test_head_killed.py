"""The submit host's Snakemake killed (kill -9) while its job runs, then `--unlock` and a rerun, against
the local SLURM through profiles/slurm: before the lease (toolcall_repro.lease) the rerun submitted a
second job for the output while the first still ran, both wrote it, and Snakemake said success. Now the
rerun stops before it removes or submits anything, naming the running job, and the output is exactly one
job's; once that job has ended the rerun runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the helpers of test_local_slurm.py (pytest imports test files by path)
from test_local_slurm import PROFILE, cluster, fake_conda_bin, job_ids  # noqa: E402

LINES = 90  # seconds the job writes: room for the kill, the unlock and the refused rerun on a loaded machine

SNAKEFILE = textwrap.dedent(
    """
    import json

    # the project's head check, as workflow/Snakefile's onstart runs it
    onstart:
        from toolcall_repro.lease import check_run

        held = check_run("results/t")
        if held:
            raise WorkflowError("\\n".join(["jobs of an earlier run of this workflow still write its outputs:", *held]))

    rule slow:
        output:
            out="results/t/out.txt",
            manifest="results/t/manifests/slow/all.json",
        params:
            job=lambda w, output: json.dumps({
                "stage": "slow_write", "options": {"module": "slow_stage", "lines": LINES},
                "output": {"out": output.out, "manifest": output.manifest},
                "files": {"input": [], "output": [output.out, output.manifest]},
            }),
        shell:
            "python -m toolcall_repro.job {params.job:q}"
    """
).replace("LINES", str(LINES))


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--profile", str(PROFILE), "--configfile", "empty.yaml",
            "--slurm-init-seconds-before-status-checks", "3", "--latency-wait", "5", *args]  # fmt: skip


@cluster
def test_a_rerun_after_the_head_was_killed_never_adds_a_second_writer(local_slurm, tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "empty.yaml").write_text("{}\n")
    env = {**local_slurm.env, **fake_conda_bin(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    log = open(tmp_path / "head1.log", "w")
    head = subprocess.Popen(snakemake_cmd(), cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    out = tmp_path / "results" / "t" / "out.txt"
    try:
        while time.monotonic() - t0 < 300 and not (out.exists() and out.read_text().count("\n") >= 3):
            time.sleep(0.5)
        assert out.exists(), (tmp_path / "head1.log").read_text()[-3000:]
        head.send_signal(signal.SIGKILL)  # the login node's Snakemake dies; its job does not
        head.wait()
    finally:
        log.close()
    (first,) = job_ids((tmp_path / "head1.log").read_text())
    try:
        check_one_writer(local_slurm, tmp_path, env, first, out)
    finally:
        local_slurm.run("scancel", first, check=False)


def check_one_writer(local_slurm, tmp_path: Path, env: dict, first: str, out: Path) -> None:
    assert local_slurm.state_of(first) == "RUNNING"

    unlock = subprocess.run(snakemake_cmd("--unlock"), cwd=tmp_path, env=env, capture_output=True, text=True)
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    rerun = subprocess.run(snakemake_cmd("--rerun-incomplete"), cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=180)  # fmt: skip
    said = rerun.stdout + rerun.stderr
    assert rerun.returncode != 0, said[-3000:]
    assert f"results/t/out.txt is being written by SLURM job {first}" in said, said[-3000:]
    assert f"scancel {first}" in said and job_ids(said) == []  # nothing submitted
    queued = local_slurm.run("squeue", "-h", "-o", "%i").stdout.split()
    assert queued == [first]

    assert local_slurm.wait(first, timeout=LINES + 60) == "COMPLETED"
    lines = out.read_text().splitlines()
    assert lines == [f"{first} {i}" for i in range(LINES)]  # one writer, every line, in order

    # the holder is gone: the rerun keeps its output (the job's own Snakemake on the node recorded it
    # complete in .snakemake/, which the killed head could not), submits nothing and succeeds
    again = subprocess.run(snakemake_cmd("--rerun-incomplete"), cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=LINES + 180)  # fmt: skip
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert job_ids(again.stdout + again.stderr) == [] and "Nothing to be done" in again.stdout + again.stderr
    assert out.read_text().splitlines() == lines
    manifest = json.loads((tmp_path / "results" / "t" / "manifests" / "slow" / "all.json").read_text())
    assert manifest["rule"] == "slow_write"  # the job entry's manifest: written by the one job that ran
    assert not (tmp_path / "results" / "t" / "leases").exists()


HEAD_SNAKEFILE = textwrap.dedent(
    """
    rule slow:
        output: "out.txt"
        shell: "for i in $(seq SECONDS); do echo $SLURM_JOB_ID $i >> {output}; sleep 1; done"
    """
)
HEAD_SCRIPT = HERE.parents[1] / "scripts" / "cluster-head.sh"


def submit_head(local_slurm, tmp_path: Path, seconds: int) -> str:
    """scripts/cluster-head.sh from a copy of this checkout's layout in tmp_path (its Snakefile the toy's)."""
    (tmp_path / "scripts").mkdir(exist_ok=True)
    if not (tmp_path / "scripts" / "cluster-head.sh").exists():
        (tmp_path / "scripts" / "cluster-head.sh").symlink_to(HEAD_SCRIPT)
    (tmp_path / "Snakefile").write_text(HEAD_SNAKEFILE.replace("SECONDS", str(seconds)))
    (tmp_path / "empty.yaml").write_text("{}\n")
    conda = (
        fake_conda_bin(tmp_path)
        if not (tmp_path / "condabin").exists()  # a second head from the same folder: the same fake conda
        else {"PATH": f"{Path(sys.executable).parent}:{tmp_path / 'condabin'}:{os.environ['PATH']}",
              "FAKE_SLURM_DIR": str(tmp_path)}
    )  # fmt: skip
    env = {**local_slurm.env, **conda, "HEAD_PYTHON": sys.executable, "PROFILE": str(PROFILE),
           "HEAD_PARTITION": local_slurm.env["TOOLCALL_SLURM_PARTITION"],
           "HEAD_ACCOUNT": local_slurm.env["TOOLCALL_SLURM_ACCOUNT"], "HEAD_TIME": "30:00"}  # fmt: skip
    res = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "cluster-head.sh"), "--configfile", "empty.yaml",
         "--slurm-init-seconds-before-status-checks", "3"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    (head,) = re.findall(r"Snakemake's head is SLURM job (\d+)", res.stdout)
    assert f"logs/head/head-{head}.log" in res.stdout and f"scancel --batch --signal=INT {head}" in res.stdout
    return head


@cluster
def test_the_head_runs_as_a_slurm_job_to_the_end_and_submits_the_rules_jobs(local_slurm, tmp_path):
    head = submit_head(local_slurm, tmp_path, seconds=3)
    assert local_slurm.wait(head, timeout=240) == "COMPLETED", (tmp_path / f"logs/head/head-{head}.log").read_text()
    log = (tmp_path / "logs" / "head" / f"head-{head}.log").read_text()
    assert f"snakemake head: SLURM job {head}" in log and "head lease taken" in log
    assert "no job holds a lease under results" in log
    (rule_job,) = job_ids(log)
    assert rule_job != head
    assert (tmp_path / "out.txt").read_text().split() == [rule_job, "1", rule_job, "2", rule_job, "3"]


@cluster
def test_a_second_head_stops_while_the_first_runs_and_scancel_stops_the_first_and_its_jobs(local_slurm, tmp_path):
    (tmp_path / "a").mkdir()
    head = submit_head(local_slurm, tmp_path / "a", seconds=300)
    jobs = [head]
    try:
        log = tmp_path / "a" / "logs" / "head" / f"head-{head}.log"
        t0 = time.monotonic()
        while time.monotonic() - t0 < 300 and not job_ids(log.read_text() if log.exists() else ""):
            time.sleep(1)
        (rule_job,) = job_ids(log.read_text())
        jobs.append(rule_job)
        # a second head from the same folder: refused by the first's lease, while the first runs
        second = submit_head(local_slurm, tmp_path / "a", seconds=300)
        jobs.append(second)
        assert local_slurm.wait(second, timeout=120) == "FAILED"
        said = (tmp_path / "a" / "logs" / "head" / f"head-{second}.log").read_text()
        assert "another Snakemake head still runs this workflow" in said and f"SLURM job {head}" in said
        assert local_slurm.state_of(head) == "RUNNING" and local_slurm.state_of(rule_job) == "RUNNING"
        local_slurm.run("scancel", "--batch", "--signal=INT", head)  # the stop the script prints
        assert local_slurm.wait(rule_job, timeout=120).startswith("CANCELLED")  # the head cancelled its job
        assert local_slurm.wait(head, timeout=120) in ("COMPLETED", "FAILED")  # and ended by itself
    finally:  # nothing left running on a failure (the daemons' `down` does not stop jobs' processes)
        local_slurm.run("scancel", *jobs, check=False)
