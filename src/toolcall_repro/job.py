"""The one job entry of the workflow: `python -m toolcall_repro.job SPEC [FILES]` (jobspec.py: the spec).

The entry imports the stage's function (the job sheet's: sheet.py), calls it with a `Job` (the stage
reads typed values from it; no argv is rebuilt on the way), checks that every declared output exists,
then writes the manifest from the same spec: what ran is what is recorded. When the stage raises or an
output is missing, nothing is written and the exit status is not 0 (Snakemake then removes the outputs).
The job holds its outputs' lease while it runs (lease.py: one writer per output). By hand, outside the
workflow: `toolcall-repro stage NAME ...` (stage.py).
"""

from __future__ import annotations

import importlib
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

from toolcall_repro.jobspec import Job, JobError
from toolcall_repro.sheet import STAGES


def stage_function(stage: str, module: str | None = None) -> Callable[[Job], object]:
    """The stage's function: STAGES' module, or the one a job names (options.module: the score stage of a
    benchmark registered outside the package, benchmarks.py)."""
    return getattr(importlib.import_module(STAGES.get(stage) or module), stage)


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (bfcl's scorer, verl's launcher)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _driver_ok(job: Job) -> bool:
    """A GPU job first asks the node's NVIDIA driver whether it runs the CUDA of the GPU locks the config
    chose (engines.cuda, job.cuda; gpu_driver): too old, or unreadable, fails the job here in one line, not
    at the first CUDA call minutes in. Where there is no nvidia-smi at all (the paper path on a CPU,
    train.verl.device: cpu) nothing is checked."""
    from toolcall_repro.gpu_driver import CUDA_MAJOR, check

    code, line = check(cuda=CUDA_MAJOR if job.cuda is None else job.cuda)
    if code == 1:
        print(f"{job.rule}: {line}", file=sys.stderr)
        return False
    if code == 0:
        print(f"{job.rule}: {line}", flush=True)
    return True


def run(job: Job) -> int:
    """Run the job under its lease (toolcall_repro.lease: one writer per output); 6 when another job,
    still alive, holds it, before anything is written."""
    from toolcall_repro import lease

    if job.manifest is None:
        return _run(job)
    outputs = [o for o in job.files.get("output", []) if Path(o) != Path(job.manifest)]
    try:
        held = lease.acquire(job.manifest, job.rule, outputs, log=lambda line: print(line, flush=True))
    except lease.LeaseHeld as exc:
        print(f"{job.rule}: not started: {exc}", file=sys.stderr)
        return lease.HELD_EXIT
    try:
        return _run(job)
    finally:
        lease.release(held)


def _run(job: Job) -> int:
    """Run the job's stage, then write its manifest; on failure write nothing.

    The CPU kernels are pinned (options.cpu_capability, engines.cpu_capability in config) before the
    stage imports torch, and checked after it ran: a CPU that cannot run them fails the job (4). A job
    that holds GPUs checks the node's driver before anything else (5: too old for the GPU locks).
    """
    from toolcall_repro.io import atomic_write_json
    from toolcall_repro.machine import KernelPinError, check_kernels, pin_kernels
    from toolcall_repro.provenance import build_manifest

    if job.gpus and not _driver_ok(job):
        return 5
    capability = job.options.get("cpu_capability")
    if capability is not None:
        pin_kernels(str(capability))
    start = time.perf_counter()
    rc = stage_function(job.stage, job.options.get("module"))(job)
    if rc not in (None, 0):
        return int(rc)
    if capability is not None:
        try:
            check_kernels(str(capability))
        except KernelPinError as exc:
            print(f"{job.rule}: {exc}", file=sys.stderr)
            return 4
    # CPU of the whole job process (imports included), as a job's own process is the job.
    wall, cpu = time.perf_counter() - start, cpu_seconds()
    outputs = [o for o in job.files.get("output", []) if job.manifest is None or Path(o) != Path(job.manifest)]
    missing = [o for o in outputs if not Path(o).exists()]
    if missing:
        print(f"{job.rule}: the stage finished but did not write {missing}", file=sys.stderr)
        return 3
    if job.manifest is None:
        return 0
    atomic_write_json(
        job.manifest,
        build_manifest(
            rule=job.rule,
            config_subtree=job.config,
            inputs=job.files.get("input", []),
            outputs=outputs,
            seeds=job.seeds,
            wall_s=wall,
            cpu_s=cpu,
            # GPU-seconds at paper scale are the job's wall-clock x GPUs it held.
            device_s=round(wall * job.gpus, 3) if job.gpus else round(cpu, 3),
            command=["python", "-m", "toolcall_repro.job", job.stage],
            options=job.options,
        ),
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) not in (1, 2):
        print("usage: python -m toolcall_repro.job SPEC_JSON [FILES_JSON] (a rule's params.job, params.files)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        job = Job.from_json(*argv)
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(job)


if __name__ == "__main__":
    sys.exit(main())
