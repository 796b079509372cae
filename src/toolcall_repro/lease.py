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
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LeaseHeld", "acquire", "check_run", "lease_path", "release"]

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
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None if no such PID."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


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
    path = lease_path(manifest)
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
            return acquire(manifest, rule, outputs, log)
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


def main_check(run_dir: str) -> None:
    """onstart: stop the run, naming every job that still writes into it."""
    lines = check_run(run_dir)
    if lines:
        print("\n".join(["Not starting: jobs of an earlier run of this workflow still write its outputs."] + lines),
              file=sys.stderr)  # fmt: skip
        raise SystemExit(HELD_EXIT)
