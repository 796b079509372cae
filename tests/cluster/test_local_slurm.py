"""The slurm profile, the executor plugin and the multi-node launch script against a real SLURM (22.05,
scripts/local_slurm.sh: two nodes shaped like the paper's on this host), where tests/workflow only has
recording fakes of sbatch/squeue/sacct.

(a) the plugin's exact sbatch line of a training job (recorded from the paper DAG with the fake cluster)
    is accepted, and its job sees the GPUs; (b) a one-rule workflow runs through `--executor slurm` with
    the profile and its job is in sacct; (c) a scancelled job does not hang Snakemake, and is resubmitted
    once (`retries: 1`); (d) the multi-node launch script's srun steps get 8 GPUs each, from a plain
    `sbatch` and under Snakemake.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from _workflow_helpers import FAKE_SLURM, make_workdir, snakemake, write_config, write_fake_cluster

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm"
LOCAL_SLURM = REPO / "scripts" / "local_slurm.sh"
MULTI_NODE = REPO / "workflow" / "scripts" / "verl" / "launch_verl_multi_node.sh"
EIGHT = "0,1,2,3,4,5,6,7"
cluster = pytest.mark.workflow  # real daemons, sbatch and Snakemake in subprocesses: out of `make test-fast`

# The verl interpreter's stand-in for the launch script: records where each command ran with which GPUs;
# `ray start ... --block` is a sleeper that `ray stop` on the same node ends; `wait-ray` waits for the
# sleepers of --nodes nodes; `train` returns at once.
VERL_STANDIN = r"""#!/usr/bin/env bash
node=${SLURMD_NODENAME:-none}
echo "$node|$*|CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}|RAY_ADDRESS=${RAY_ADDRESS:-}" >> "$REC/calls"
case "$*" in
  *"ray.scripts.scripts start"*) echo $$ > "$REC/ray.$node.pid"; exec sleep 300 ;;
  *"ray.scripts.scripts stop"*) [ -s "$REC/ray.$node.pid" ] && kill "$(cat "$REC/ray.$node.pid")"; exit 0 ;;
  *wait-ray*)
    n=$(sed -n 's/.*--nodes \([0-9]*\).*/\1/p' <<< "$*")
    for _ in $(seq 150); do [ "$(ls "$REC"/ray.*.pid 2>/dev/null | wc -l)" -ge "$n" ] && exit 0; sleep 0.2; done
    echo "wait-ray: $n node(s) not up" >&2; exit 1 ;;
esac
"""


def head_iface() -> str | None:
    """An interface with a non-loopback IPv4 address (head_address.sh refuses 127.x), for VERL_HEAD_IFACE:
    the local nodes n1, n2 are no host names that `getent` resolves."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and not parts[3].startswith("127."):
            return parts[1]
    return None


def write_standin(tmp_path: Path) -> tuple[Path, Path]:
    rec = tmp_path / "rec"
    rec.mkdir()
    py = tmp_path / "verlpy"
    py.write_text(VERL_STANDIN)
    py.chmod(0o755)
    return py, rec


def fake_conda_bin(tmp_path: Path) -> dict:
    """The profile deploys conda envs, and Snakemake asks `conda info --json` before it submits (without
    conda on PATH it logs `conda: command not found` and waits for ever): the fake conda of tests/workflow."""
    bin_dir = tmp_path / "condabin"
    bin_dir.mkdir()
    (bin_dir / "conda").write_text(FAKE_SLURM["conda"])
    (bin_dir / "conda").chmod(0o755)
    (tmp_path / "conda").mkdir()
    return {
        "PATH": f"{Path(sys.executable).parent}:{bin_dir}:{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(tmp_path),
    }


def run_snakemake(local_slurm, workdir: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    """snakemake --profile profiles/slurm in workdir against the local cluster, under an outer `timeout`
    (SIGKILL 10 s after its TERM: a hung Snakemake ignores TERM). The profile as shipped, but for a first
    status check after 3 s instead of 70 (squeue stays the status command: MinJobAge is 300 here)."""
    (workdir / "empty.yaml").write_text("{}\n")
    env = {**local_slurm.env, **fake_conda_bin(workdir)}
    cmd = ["timeout", "-k", "10", str(timeout), sys.executable, "-m", "snakemake", "--profile", str(PROFILE),
           "--configfile", "empty.yaml", "--slurm-init-seconds-before-status-checks", "3", "--latency-wait", "5",
           *args]  # fmt: skip
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout + 30)


def job_ids(log: str) -> list[str]:
    return re.findall(r"submitted with SLURM jobid (\d+)", log)


# --- the profile's status settings (no cluster needed) --------------------------------------------------


def test_profile_polls_with_squeue_often_enough_never_to_miss_an_ended_job():
    """squeue, not sacct (sacct hangs Snakemake on `CANCELLED by <uid>`, and without slurmdbd); and the
    plugin keeps squeue only while MinJobAge >= 3 x the first delay, which must exceed its longest wait
    between checks, or an ended job could leave squeue unseen."""
    import snakemake_executor_plugin_slurm as plugin

    cfg = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert cfg["slurm-status-command"] == "squeue"
    source = inspect.getsource(plugin.Executor.check_active_jobs)
    max_sleep = int(re.search(r"max_sleep_time = (\d+)", source).group(1))
    assert "min_job_age < dynamic_check_threshold" in source and "3 * initial_interval" in source, source
    assert 3 * cfg["slurm-init-seconds-before-status-checks"] > max_sleep
    # the reason for squeue: the plugin matches failed states exactly (a change here: revisit the choice)
    assert '"CANCELLED",' in source and "status in fail_stati" in source


def test_the_script_looks_for_the_daemons_in_sbin_whatever_path_says():
    """Debian's slurmctld, slurmd, slurmdbd, munged and mariadbd live in /usr/sbin; a shell under `env -i`
    (PATH=/usr/bin:/bin) finds none of them with `command -v`, and `up` then failed at the first daemon."""
    res = subprocess.run(["bash", "-c", f'. "{LOCAL_SLURM}"; echo "$PATH"'], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"}, check=True)  # fmt: skip
    assert res.stdout.strip() == "/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
    kept = subprocess.run(["bash", "-c", f'. "{LOCAL_SLURM}"; echo "$PATH"'], capture_output=True, text=True,
                          env={"PATH": "/usr/sbin:/usr/bin:/bin"}, check=True)  # fmt: skip
    assert kept.stdout.strip() == "/usr/sbin:/usr/bin:/bin:/usr/local/sbin:/sbin"  # the caller's order first


def test_up_replaces_only_a_link_whose_cluster_has_no_live_daemon(tmp_path):
    """/run/slurm/conf/slurm.conf left by a cluster that is gone (its machine restarted or copied with /run
    and /tmp, as a CI checkout of this host is) must not stop the next `up`; a live cluster's link, or one
    this script did not make, must. Runs the script's own check on a link in tmp_path, no daemons."""

    def state(name: str, pids: str | None) -> Path:
        (tmp_path / name / "etc").mkdir(parents=True)
        (tmp_path / name / "etc" / "slurm.conf").write_text("")
        if pids is not None:
            (tmp_path / name / "pids").write_text(pids)
        return tmp_path / name / "etc" / "slurm.conf"

    live = subprocess.Popen(["sleep", "60"])
    try:
        ended = subprocess.Popen(["true"])
        ended.wait()
        dead = ended.pid  # a process that has ended and been reaped
        cases = {  # target -> kept?
            state("dead", f"{dead} slurmctld\n"): False,
            state("reused", f"{live.pid} slurmctld\n"): False,  # a live PID that is not the daemon recorded
            state("live", f"{dead} munged\n{live.pid} sleep\n"): True,
            state("foreign", None): True,
            tmp_path / "gone" / "etc" / "slurm.conf": False,  # a dangling link
        }
        for target, kept in cases.items():
            link = tmp_path / "run" / "slurm.conf"
            link.parent.mkdir(exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(target)
            res = subprocess.run(["bash", "-c", f'. "{LOCAL_SLURM}"; RUN_LINK="{link}"; drop_stale_link'],
                                 capture_output=True, text=True, timeout=30)  # fmt: skip
            assert res.returncode == 0, res.stderr
            assert link.is_symlink() == kept, (target, res.stdout)
            assert ("stale" in res.stdout) == (not kept), res.stdout
    finally:
        live.kill()
        live.wait()


# --- (a) the training job's sbatch line, as the plugin builds it -------------------------------------------


def training_sbatch_args(tmp_path: Path, nodes: int, partition: str, account: str) -> list[str]:
    """The plugin's sbatch arguments for one train_grpo job of config/paper.yaml with train.verl.nodes =
    nodes, recorded by the fake sbatch of tests/workflow (as test_slurm_submission does), less --wrap."""
    work = make_workdir(tmp_path / "tree")
    run_id = f"localslurm-{nodes}node"
    cfg = write_config(tmp_path, "config/paper.yaml", {"run_id": run_id, "train": {"verl": {"nodes": nodes}},
                                                       "allow_unpinned_revisions": True})  # fmt: skip
    run = work / "results" / run_id
    for rel in ["data/train/multi_turn.parquet", "data/train/heldout_multi_turn.parquet"]:
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(b"")
    (run / "models" / "hub" / "Qwen--Qwen3-4B").mkdir(parents=True, exist_ok=True)
    bin_dir, record = tmp_path / "fakebin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    write_fake_cluster(bin_dir, record)
    env = {"PATH": f"{Path(sys.executable).parent}:{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM_DIR": str(record),
           "TOOLCALL_SLURM_PARTITION": partition, "TOOLCALL_SLURM_ACCOUNT": account}  # fmt: skip
    res = snakemake("--profile", "profiles/slurm", "--configfile", str(cfg), "--slurm-init-seconds-before-status-checks",
                    "1", "--latency-wait", "1", "--retries", "0", "--allowed-rules", "train_grpo", "--",
                    f"results/{run_id}/train/multi_turn/vanilla/summary.json", cwd=work, env=env, timeout=300)  # fmt: skip
    subs = sorted(record.glob("submission-*.args"))
    assert len(subs) == 1, res.stdout[-3000:] + res.stderr[-3000:]
    args = subs[0].read_text().splitlines()
    wrap = next(i for i, a in enumerate(args) if a.startswith("--wrap="))
    return args[:wrap]


def replay(local_slurm, args: list[str], log: Path, script: str) -> str:
    """Submit `args` (the plugin's line) with its --output replaced by log and --wrap by script; the job id."""
    args = list(args)
    args[args.index("--output") + 1] = str(log)
    res = local_slurm.run("sbatch", *args, f"--wrap={script}")
    return res.stdout.strip().split(";")[0]


PROBE = "env | grep -E '^(SLURM_GPUS|SLURM_JOB_GPUS|CUDA_VISIBLE_DEVICES|SLURM_NNODES|SLURM_JOB_NODELIST)=' | sort"


@cluster
@pytest.mark.parametrize("nodes", [1, 2])
def test_the_training_jobs_sbatch_line_is_accepted_and_gets_its_gpus(local_slurm, tmp_path, nodes):
    env = local_slurm.env
    args = training_sbatch_args(
        tmp_path, nodes, env["TOOLCALL_SLURM_PARTITION"], env["TOOLCALL_SLURM_ACCOUNT"]
    )
    line = " ".join(args)
    assert f"--gpus=a100:{8 * nodes}" in line and f"--nodes={nodes}" in line and "-C a100" in line
    assert "--mem 480000" in line and "--cpus-per-task=64" in line and "-t 2880" in line
    log = tmp_path / "job.log"
    job = replay(local_slurm, args, log, PROBE)
    assert local_slurm.wait(job) == "COMPLETED", log.read_text() if log.exists() else ""
    seen = dict(line.split("=", 1) for line in log.read_text().splitlines() if "=" in line)
    assert seen["SLURM_GPUS"] == f"a100:{8 * nodes}" and seen["SLURM_NNODES"] == str(nodes)
    assert seen["CUDA_VISIBLE_DEVICES"] == EIGHT and seen["SLURM_JOB_GPUS"] == EIGHT  # the batch node's 8
    tres = local_slurm.wait_sacct(job, "State,AllocTRES")
    assert f"gres/gpu={8 * nodes}" in tres and f"node={nodes}" in tres, tres


# --- (d) the multi-node launch: srun steps inside a 2-node allocation --------------------------------------


@cluster
def test_multi_node_launch_from_a_plain_sbatch_gets_8_gpus_per_step(local_slurm, tmp_path):
    """launch_verl_multi_node.sh in the batch script of `sbatch --nodes=2 --ntasks=2 --gpus=a100:16`, where
    SLURM_GPUS=a100:16 is set: the Ray head and worker steps (srun --nodes=1 --gpus-per-node=8) and the
    Ray stop steps all start (before the script unset SLURM_GPUS: "srun: error: Invalid GRES specification
    (with and without type identification)"; before --gres=none on the stop steps: "Unable to create step
    for job N: Invalid generic resource (gres) specification")."""
    iface = head_iface()
    if not iface:
        pytest.skip("no interface with a non-loopback IPv4 address here for the Ray head (VERL_HEAD_IFACE)")
    py, rec = write_standin(tmp_path)
    script = tmp_path / "job.sh"
    script.write_text(
        f'#!/bin/bash\necho "SLURM_GPUS=$SLURM_GPUS"\nexec bash {MULTI_NODE} {tmp_path}/out 2 8\n'
    )
    log = tmp_path / "job.log"
    env = {**local_slurm.env, "REC": str(rec), "VERL_PYTHON": str(py), "VERL_HEAD_IFACE": iface}
    part, acct = env["TOOLCALL_SLURM_PARTITION"], env["TOOLCALL_SLURM_ACCOUNT"]
    res = local_slurm.run("sbatch", "--parsable", "-A", acct, "-p", part, "--nodes=2", "--ntasks=2", "--gpus=a100:16",
                          "-C", "a100", "--cpus-per-task=64", "--mem", "480000", "-t", "10", "-o", str(log),
                          str(script), env=env)  # fmt: skip
    job = res.stdout.strip().split(";")[0]
    assert local_slurm.wait(job, timeout=90) == "COMPLETED", log.read_text() if log.exists() else ""
    text = log.read_text()
    assert "SLURM_GPUS=a100:16" in text and "Invalid" not in text, text
    calls = [c.split("|") for c in (rec / "calls").read_text().splitlines()]
    starts = {c[0]: c for c in calls if "ray.scripts.scripts start" in c[1]}
    assert set(starts) == {"n1", "n2"}, calls
    assert all(c[2] == f"CUDA_VISIBLE_DEVICES={EIGHT}" for c in starts.values()), calls
    assert "--head" in starts["n1"][1] and "--num-gpus=8" in starts["n2"][1]
    assert {c[0] for c in calls if "ray.scripts.scripts stop" in c[1]} == {"n1", "n2"}, calls
    train = next(c for c in calls if " train --out " in f" {c[1]}")
    assert train[3].startswith("RAY_ADDRESS=") and train[3].endswith(":6379")


# --- (b), (c), (d): Snakemake through the profile ----------------------------------------------------------


@cluster
def test_a_snakemake_job_runs_through_the_profile_and_is_in_sacct(local_slurm, tmp_path):
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent("""
        rule hello:
            output: "out.txt"
            shell: "echo $SLURMD_NODENAME $SLURM_JOB_ID > {output}"
    """)
    )
    t0 = time.monotonic()
    res = run_snakemake(local_slurm, tmp_path, timeout=150)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert "Falling back to 'sacct'" not in log  # squeue, the profile's status command, was used
    (job,) = job_ids(log)
    node, slurm_job = (tmp_path / "out.txt").read_text().split()
    assert node in ("n1", "n2") and slurm_job == job
    env = local_slurm.env
    state = local_slurm.wait_sacct(job, "State,Partition,Account,ReqMem")
    assert state == f"COMPLETED|{env['TOOLCALL_SLURM_PARTITION']}|{env['TOOLCALL_SLURM_ACCOUNT']}|16000M", (
        state
    )
    print(f"one-job workflow through the slurm profile: {time.monotonic() - t0:.1f} s")


@cluster
def test_a_cancelled_job_fails_is_resubmitted_once_and_snakemake_ends(local_slurm, tmp_path):
    """scancel of a running job: squeue says CANCELLED, the plugin fails the job, `retries: 1` submits it
    again; that one cancelled too, Snakemake ends with an error instead of waiting. sacct calls the same
    state `CANCELLED by 0`, the string the plugin's sacct mode never counts as failed (the hang)."""
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent("""
        rule slow:
            output: "out.txt"
            shell: "sleep 300; touch {output}"
    """)
    )
    (tmp_path / "empty.yaml").write_text("{}\n")
    env = {**local_slurm.env, **fake_conda_bin(tmp_path)}
    cmd = ["timeout", "-k", "10", "180", sys.executable, "-m", "snakemake", "--profile", str(PROFILE),
           "--configfile", "empty.yaml", "--slurm-init-seconds-before-status-checks", "3"]  # fmt: skip
    out = open(tmp_path / "snakemake.log", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    cancelled = []
    try:
        for _ in range(2):
            job = None
            while job is None and time.monotonic() - t0 < 120:
                running = local_slurm.run("squeue", "-h", "-t", "R", "-o", "%i|%k").stdout.split()
                job = next(
                    (j.split("|")[0] for j in running if "slow" in j and j.split("|")[0] not in cancelled),
                    None,
                )
                time.sleep(0.5)
            assert job, (tmp_path / "snakemake.log").read_text()[-3000:]
            local_slurm.run("scancel", job)
            cancelled.append(job)
        rc = proc.wait(timeout=200)
    finally:
        if proc.poll() is None:
            proc.kill()
        out.close()
    log = (tmp_path / "snakemake.log").read_text()
    assert rc == 1, (rc, log[-4000:])  # 124/137: the outer timeout, i.e. Snakemake hung
    assert job_ids(log) == cancelled, log[-4000:]
    assert log.count("SLURM status is: 'CANCELLED'") == 2 and "Trying to restart job" in log
    assert local_slurm.wait_sacct(cancelled[0]) == "CANCELLED by 0"
    print(f"two cancels seen and the run ended in {time.monotonic() - t0:.1f} s")


@cluster
def test_a_two_node_rule_under_snakemake_runs_the_launch_scripts_steps(local_slurm, tmp_path):
    """A rule with train_grpo's two-node resources (workflow/rules/common.smk: train_resources, and the
    profile's) running launch_verl_multi_node.sh: Snakemake's jobstep hands the rule SLURM_JOB_ID but not
    SLURM_GPUS or SLURM_JOB_NODELIST, and the script's steps get 8 GPUs on each node."""
    iface = head_iface()
    if not iface:
        pytest.skip("no interface with a non-loopback IPv4 address here for the Ray head (VERL_HEAD_IFACE)")
    py, rec = write_standin(tmp_path)
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(f"""
        rule train:
            output: env="slurm_env.txt", calls="calls.txt"
            resources: nodes=2, tasks=2, mpi="srun", gpu=16, gpu_model="a100", tasks_per_gpu=0,
                       cpus_per_task=64, mem_mb=480000, constraint="a100", runtime=10
            shell: "env | grep ^SLURM_ | sort > {{output.env}}; "
                   "REC={rec} VERL_PYTHON={py} VERL_HEAD_IFACE={iface} bash {MULTI_NODE} out 2 8; "
                   "cp {rec}/calls {{output.calls}}"
    """)
    )
    res = run_snakemake(local_slurm, tmp_path, timeout=180)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    names = {line.split("=", 1)[0] for line in (tmp_path / "slurm_env.txt").read_text().splitlines()}
    assert "SLURM_JOB_ID" in names and not names & {"SLURM_GPUS", "SLURM_JOB_NODELIST", "SLURM_CONF"}, names
    calls = [c.split("|") for c in (tmp_path / "calls.txt").read_text().splitlines()]
    starts = {c[0]: c[2] for c in calls if "ray.scripts.scripts start" in c[1]}
    assert starts == {"n1": f"CUDA_VISIBLE_DEVICES={EIGHT}", "n2": f"CUDA_VISIBLE_DEVICES={EIGHT}"}, calls
    (job,) = job_ids(log)
    tres = local_slurm.wait_sacct(job, "State,AllocTRES")
    assert tres.startswith("COMPLETED|") and "gres/gpu=16" in tres and "node=2" in tres, tres
