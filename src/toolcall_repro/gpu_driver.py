"""Does this node's NVIDIA driver run the GPU environments? One line that says so, before a GPU job starts.

The GPU locks (requirements/train-verl.lock, eval-vllm.lock: torch 2.11.0 and vLLM 0.24.0 wheels built on
nvidia-cuda-runtime 13.0, nvidia-*-cu13) need a driver of the CUDA 13 branch, 580 or newer. On an older
driver torch only says, at the first CUDA call, "The NVIDIA driver on your system is too old", typically
minutes into a job. Here it is said first, with what to do:

    python -m toolcall_repro.gpu_driver [--lock requirements/train-verl.lock] [--nvidia-smi nvidia-smi]

prints one line and exits 0 (the driver is new enough), 1 (too old, or none readable), 2 (no nvidia-smi).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "train-verl.lock"
# The oldest driver branch of each CUDA major (minor-version compatibility: any 13.x runtime runs on a
# 580+ driver; 12.x on 525+; 11.x on 450+). The 13.0 GA toolkit names 580.65.06 on Linux.
MIN_DRIVER = {11: 450, 12: 525, 13: 580}
_RUNTIME = re.compile(r"^nvidia-cuda-runtime(?:-cu\d+)?==(\d+)\.", re.MULTILINE)


# The locks' CUDA major where no lock is at hand (a package installed without this checkout).
CUDA_MAJOR = 13


def lock_cuda_major(lock: Path = LOCK) -> int:
    """The CUDA major of a lock: the version of its nvidia-cuda-runtime pin (13 for 13.0.96); CUDA_MAJOR
    when the lock file is absent."""
    if not Path(lock).exists():
        return CUDA_MAJOR
    m = _RUNTIME.search(Path(lock).read_text())
    if not m:
        raise ValueError(f"{lock} pins no nvidia-cuda-runtime: no CUDA major to check the driver against")
    return int(m.group(1))


def requirement(lock: Path = LOCK) -> str:
    """What the GPU nodes need, in words (for `toolcall-repro plan` and gpu_smoke.sh)."""
    major = lock_cuda_major(lock)
    return (
        f"the GPU envs are CUDA {major} builds ({_rel(lock)} pins nvidia-cuda-runtime {major}.x): every GPU "
        f"node needs an NVIDIA driver >= {MIN_DRIVER[major]} (check one: python -m toolcall_repro.gpu_driver)"
    )


def check(nvidia_smi: str = "nvidia-smi", lock: Path = LOCK) -> tuple[int, str]:
    """(exit code, one line): 0 the driver is new enough for the lock's CUDA major, 1 it is not (or its
    version cannot be read), 2 there is no nvidia-smi."""
    major = lock_cuda_major(lock)
    need = MIN_DRIVER[major]
    what = f"CUDA {major} ({_rel(lock)}) needs an NVIDIA driver >= {need}"
    exe = shutil.which(nvidia_smi)
    if exe is None:
        return 2, (
            f"gpu driver: no {nvidia_smi} on PATH (not a GPU node, or no NVIDIA driver here); {what}: "
            "run this on a GPU node of the partition the jobs go to"
        )
    cmd = [exe, "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 1, f"gpu driver: `{' '.join(cmd)}` did not answer within 60 s; {what}"
    versions = sorted({line.strip() for line in res.stdout.splitlines() if line.strip()})
    parsed = [(v, _major(v)) for v in versions]
    if res.returncode != 0 or not parsed or any(m is None for _, m in parsed):
        said = (res.stderr.strip() or res.stdout.strip() or "nothing").splitlines()[0]
        return (
            1,
            f"gpu driver: could not read the driver version (`{' '.join(cmd)}`, rc {res.returncode}: {said}); {what}",
        )
    found = ", ".join(versions)
    oldest = min(m for _, m in parsed)
    if oldest < need:
        return 1, (
            f'gpu driver: found {found}, but {what}: torch and vLLM will not start on this node ("The NVIDIA '
            f'driver on your system is too old"). Send the GPU jobs to nodes with driver >= {need} (a '
            f"partition or -C constraint in the site settings of profiles/slurm/config.yaml), or ask the "
            f"admins for a {need}+ driver; the locks cannot be moved to an older CUDA by a setting"
        )
    return 0, f"gpu driver: found {found}; {what}: ok"


def _major(version: str) -> int | None:
    m = re.match(r"(\d+)\.", version)
    return int(m.group(1)) if m else None


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m toolcall_repro.gpu_driver", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--lock", type=Path, default=LOCK, help="the GPU lock whose CUDA major counts (%(default)s)"
    )
    p.add_argument(
        "--nvidia-smi", default="nvidia-smi", help="the nvidia-smi to ask (default: the one on PATH)"
    )
    args = p.parse_args(argv)
    code, line = check(args.nvidia_smi, args.lock)
    print(line, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
