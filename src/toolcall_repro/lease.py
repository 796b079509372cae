"""One writer per output: a job holds a lease on its outputs for as long as it runs.

Why: Snakemake's slurm executor tracks jobs by its own run's id, so a new run cannot see an old run's jobs.
After the submit host's Snakemake dies (kill -9, a dropped ssh session, a rebooted login node) and is
started again (`--unlock`, `--rerun-incomplete`), it submitted a second job for an output whose first job
was still RUNNING; both wrote it, and Snakemake said success. Two guards close that:

- the job entry (`toolcall_repro.job.run`) takes the job's lease before anything is written, and gives it
  back when the job ends, whether it succeeded or not. The lease, `results/<run>/leases/<rule>/<key>.json`
  (beside the manifest's path; never an output, so Snakemake never removes it), names its holder: the SLURM
  job id where there is one (the job's own environment, or its processes' ancestors', since SLURM sets it
  for the batch script), else the host, boot and PID. A job that finds a lease whose holder is alive stops
  with one line naming that job and what to do, before it writes anything (exit 6). A lease whose holder
  is gone (a killed job, a failed node) is taken over, and the job says so; so is one held by this same
  SLURM job id (SLURM requeued it after a node failure: the earlier attempt is gone).
- the Snakefile's `onstart` (`check_run`), in the head, before Snakemake removes or submits anything:
  a live lease under the run stops the whole run with the same line. Snakemake removes an incomplete
  job's outputs before it starts it again, so the job's own check alone would come too late for the
  running job's files.

Alive: SLURM's `squeue` has the job in a state that still runs or will (pending, running, suspended,
completing, requeued, ...); off a cluster, a process with that PID on this host since this boot, started
when the lease says. Where neither can be asked (another host, no squeue), the holder counts as alive and
the line says how to check by hand and remove the lease.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LeaseHeld", "acquire", "acquire_at", "check_run", "lease_path", "release"]

LEASES = "leases"
# squeue states of a job that runs, or will (everything else, or no line at all, is an ended job)
ACTIVE = {
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD",
    "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD",
}  # fmt: skip
HELD_EXIT = 6  # the job entry's exit status when another job holds the lease


class LeaseHeld(RuntimeError):
    """Another job, still alive, holds the lease: the message names it and what to do."""


def lease_path(manifest: str | Path) -> Path:
    """The lease of the job whose manifest is results/<run>/manifests/<rule>/<key>.json:
    results/<run>/leases/<rule>/<key>.json."""
    m = Path(manifest)
    return m.parent.parent.parent / LEASES / m.parent.name / m.name


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None if no such PID,
    or if it has exited and waits to be reaped (a zombie writes nothing more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def slurm_job_id(pid: int | None = None) -> str | None:
    """The SLURM job this process runs in: SLURM_JOB_ID of its environment or, where a launcher stripped
    it, of the nearest ancestor's (/proc/PID/environ); None off a cluster."""
    if pid is None and os.environ.get("SLURM_JOB_ID"):
        return os.environ["SLURM_JOB_ID"]
    pid = os.getppid() if pid is None else pid
    for _ in range(64):
        if pid <= 1:
            return None
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        for item in env:
            if item.startswith(b"SLURM_JOB_ID="):
                return item.split(b"=", 1)[1].decode() or None
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return None


def me(rule: str, outputs: list[str]) -> dict:
    """This job's holder record."""
    pid = os.getpid()
    return {
        "rule": rule,
        "outputs": outputs,
        "slurm_job_id": slurm_job_id(),
        "slurm_restart_count": os.environ.get("SLURM_RESTART_COUNT"),
        "host": socket.gethostname(),
        "boot_id": _boot_id(),
        "pid": pid,
        "start_ticks": _start_ticks(pid),
        "since": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()),
    }


@dataclass(frozen=True)
class Holder:
    record: dict
    state: str  # "gone", a squeue state, "alive" (this host's process), or "unknown: <why>"

    @property
    def alive(self) -> bool:
        return self.state != "gone"

    def describe(self) -> str:
        r = self.record
        who = f"SLURM job {r['slurm_job_id']}" if r.get("slurm_job_id") else f"PID {r.get('pid')} on {r.get('host')}"
        return f"{who} ({r.get('rule')}, since {r.get('since')}; {self.state})"

    def what_to_do(self) -> str:
        r = self.record
        if r.get("slurm_job_id"):
            j = r["slurm_job_id"]
            return f"wait for it to end (squeue -j {j}) or cancel it (scancel {j}), then run again"
        if self.state.startswith("unknown"):
            return (f"check PID {r.get('pid')} on {r.get('host')}; if it is gone, remove the lease and run again")  # fmt: skip
        return f"wait for it to end or stop it (kill {r.get('pid')}), then run again"


def _squeue_state(job_id: str) -> str:
    try:
        res = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return "unknown: no squeue on this host to ask"
    except subprocess.TimeoutExpired:
        return "unknown: squeue did not answer within 60 s"
    states = [s.strip() for s in res.stdout.split() if s.strip()]
    if res.returncode == 0 and any(s in ACTIVE for s in states):
        return next(s for s in states if s in ACTIVE)
    if res.returncode == 0 or "Invalid job id" in res.stderr:
        return "gone"
    return f"unknown: squeue failed ({res.stderr.strip()[:200]})"


def holder_state(record: dict) -> str:
    """Whether the lease's holder still runs: see the module's docstring."""
    if record.get("slurm_job_id"):
        return _squeue_state(record["slurm_job_id"])
    if record.get("host") == socket.gethostname() and record.get("boot_id") == _boot_id():
        pid = record.get("pid")
        ticks = _start_ticks(int(pid)) if isinstance(pid, int) else None
        return "alive" if ticks is not None and ticks == record.get("start_ticks") else "gone"
    return f"unknown: held on host {record.get('host')}, which cannot be asked from {socket.gethostname()}"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # half written by a holder killed while writing it: no live holder can be named


def _held_line(path: Path, holder: Holder) -> str:
    outputs = ", ".join(holder.record.get("outputs") or []) or str(path)
    return f"{outputs} is being written by {holder.describe()}: {holder.what_to_do()} (lease {path})"


def _write(path: Path, record: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, sort_keys=True, indent=1) + "\n")
    os.replace(tmp, path)


def acquire(manifest: str | Path, rule: str, outputs: list[str], log=print) -> Path:
    """Take the lease of the job whose manifest path is `manifest`; raise LeaseHeld when a live holder
    has it. A gone holder's lease, or this same SLURM job's (requeued), is taken over, with a line."""
    return acquire_at(lease_path(manifest), rule, outputs, log)


def acquire_at(path: Path, rule: str, outputs: list[str], log=print) -> Path:
    """`acquire` for a lease at any path (the cluster head's own: scripts/cluster-head.sh)."""
    path = Path(path)
    mine = me(rule, outputs)
    taken = False
    for _ in range(10):  # another job's release may remove the empty folder between the two calls
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(mine, sort_keys=True, indent=1) + "\n")
            os.link(tmp, path)  # exclusive and whole: a reader never sees a lease half written
            tmp.unlink()
            return path
        except FileNotFoundError:
            continue
        except FileExistsError:
            tmp.unlink(missing_ok=True)
            taken = True
            break
    if taken:
        record = _read(path)
        if record is None:  # given back between our two looks
            return acquire_at(path, rule, outputs, log)
        if record.get("slurm_job_id") and record.get("slurm_job_id") == mine["slurm_job_id"]:
            log(f"{rule}: taking over the lease of this same SLURM job {mine['slurm_job_id']}'s earlier attempt (requeued)")
        else:
            holder = Holder(record, holder_state(record) if record else "gone")
            if holder.alive:
                raise LeaseHeld(_held_line(path, holder)) from None
            log(f"{rule}: taking over the lease of {holder.describe() if record else 'a holder that left it half written'}")
        _write(path, mine)
        if (_read(path) or {}).get("pid") != mine["pid"] or (_read(path) or {}).get("host") != mine["host"]:
            raise LeaseHeld(_held_line(path, Holder(_read(path) or {}, "taken over by another job at the same moment")))
        return path
    raise OSError(f"could not create the lease {path}")


def release(path: str | Path) -> None:
    """Give the lease back, if it is still this process's (a takeover by another job is left alone)."""
    p = Path(path)
    record = _read(p)
    if record is not None and record.get("pid") == os.getpid() and record.get("host") == socket.gethostname():
        p.unlink(missing_ok=True)
        for folder in (p.parent, p.parent.parent):  # leave the run's tree as the job found it
            try:
                folder.rmdir()
            except OSError:
                break


def check_run(run_dir: str | Path) -> list[str]:
    """The head's check before a run starts (the Snakefile's onstart): one line per live lease under
    run_dir/leases (none: the run may start). A lease whose holder is gone is left for its job to take over."""
    root = Path(run_dir) / LEASES
    lines = []
    for path in sorted(root.rglob("*.json")) if root.is_dir() else []:
        record = _read(path)
        if not record:
            continue
        holder = Holder(record, holder_state(record))
        if holder.alive:
            lines.append(_held_line(path, holder))
    return lines


def live_leases(results: str | Path = "results") -> list[str]:
    """check_run over every run under `results` (results/<run_id>)."""
    root = Path(results)
    runs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return [line for run in runs for line in check_run(run)]


def main(argv: list[str] | None = None) -> int:
    """`toolcall-repro leases [--wait SECONDS] [RESULTS]`: the jobs that still write under RESULTS (default
    results/), one line each; exit 1 while any does. --wait: poll every 30 s until none does (exit 0) or
    SECONDS pass (exit 1): a restarted head waits for its predecessor's jobs instead of starting them again."""
    import argparse

    p = argparse.ArgumentParser(prog="toolcall-repro leases", description=main.__doc__.split("\n")[0])
    p.add_argument("results", nargs="?", default="results")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--every", type=float, default=30.0, help=argparse.SUPPRESS)
    p.add_argument("--head", metavar="PATH", help="take the Snakemake head's own lease at PATH, or stop (exit 1) "
                   "naming the head that is still alive (scripts/cluster-head.sh)")  # fmt: skip
    a = p.parse_args(argv)
    if a.head:
        try:
            acquire_at(Path(a.head), "snakemake head", [], log=print)
        except LeaseHeld as exc:
            print(f"another Snakemake head still runs this workflow: {exc}")
            return 1
        print(f"head lease taken: {a.head}")
        return 0
    deadline = time.monotonic() + a.wait
    while True:
        lines = live_leases(a.results)
        if not lines:
            print(f"no job holds a lease under {a.results}")
            return 0
        print("\n".join(lines), flush=True)
        if time.monotonic() + a.every > deadline:
            return 1
        time.sleep(a.every)
