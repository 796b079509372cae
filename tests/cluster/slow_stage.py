"""A stage for the kill-the-head test (tests/cluster/test_head_killed.py): it appends one line a second to
its output, each naming the SLURM job that wrote it, so two writers of one output would interleave."""

from __future__ import annotations

import os
import time
from pathlib import Path


def slow_write(j) -> None:
    out = Path(j.out("out"))
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = os.environ.get("SLURM_JOB_ID", f"pid{os.getpid()}")
    with open(out, "a") as f:  # appending: a second writer's lines would land among the first's
        for i in range(int(j.option("lines"))):
            f.write(f"{writer} {i}\n")
            f.flush()
            time.sleep(1.0)
