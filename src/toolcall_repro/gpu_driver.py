"""Does this node's NVIDIA driver run the GPU environments? One line that says so, before a GPU job starts.

The GPU locks come in two CUDA majors, chosen by the config's engines.cuda (docs/cluster.md):
- 13 (the default): requirements/train-verl.lock, eval-vllm.lock: torch 2.11.0 and vLLM 0.24.0 wheels built
  on nvidia-cuda-runtime 13.0 (nvidia-*-cu13), which need a driver of the CUDA 13 branch, 580 or newer;
- 12: requirements/train-verl-cu12.lock, eval-vllm-cu12.lock: torch 2.10.0 and vLLM 0.19.1 wheels built on
  nvidia-cuda-runtime-cu12 12.8, for nodes whose driver is older than 580 (525 or newer).
On a driver older than its lock's CUDA needs, torch only says, at the first CUDA call, "The NVIDIA driver on
your system is too old", typically minutes into a job. Here it is said first, with what to do:

    python -m toolcall_repro.gpu_driver [--cuda 13|12 | --lock requirements/train-verl.lock] [--nvidia-smi nvidia-smi]

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
REQUIREMENTS = REPO / "requirements"
# The envs that come in one build per CUDA major (engines.cuda): <env> is the CUDA 13 build, <env>-cu12 the
# CUDA 12 one. The other envs (cpu, eval-bfcl) have one build: eval-bfcl's torch never touches the GPU (it
# sets CPU threads; BFCL's `vllm serve` is eval-vllm's), so its CUDA build does not meet the driver.
CUDA_ENVS = ("train-verl", "eval-vllm")
# The oldest driver branch of each CUDA major (minor-version compatibility: any 13.x runtime runs on a
# 580+ driver; 12.x on 525+; 11.x on 450+). The 13.0 GA toolkit names 580.65.06 on Linux.
MIN_DRIVER = {11: 450, 12: 525, 13: 580}
_RUNTIME = re.compile(r"^nvidia-cuda-runtime(?:-cu\d+)?==(\d+)\.", re.MULTILINE)


# engines.cuda's default, and the locks' CUDA major where no lock is at hand (a package installed without
# this checkout). CUDA_CHOICES: the majors that have locks (the config schema's enum is the same list).
CUDA_MAJOR = 13
CUDA_CHOICES = (12, 13)


def env_name(env: str, cuda: int = CUDA_MAJOR) -> str:
    """The env of `env` built for CUDA `cuda` (requirements/<name>.lock, workflow/envs/<name>.yaml):
    train-verl and eval-vllm have a CUDA 12 twin, <env>-cu12; every other env is the same for both."""
    if cuda not in CUDA_CHOICES:
        raise ValueError(f"engines.cuda must be one of {list(CUDA_CHOICES)}, got {cuda!r}")
    return f"{env}-cu12" if env in CUDA_ENVS and cuda == 12 else env


def gpu_lock(cuda: int = CUDA_MAJOR) -> Path:
    """The training lock of CUDA major `cuda`, whose nvidia-cuda-runtime pin the driver is checked against
    (its eval-vllm twin pins the same runtime: tests/test_locks.py)."""
    return REQUIREMENTS / f"{env_name('train-verl', cuda)}.lock"


LOCK = gpu_lock(CUDA_MAJOR)


def lock_cuda_major(lock: Path = LOCK, absent: int = CUDA_MAJOR) -> int:
    """The CUDA major of a lock: the version of its nvidia-cuda-runtime pin (13 for 13.0.96, 12 for
    nvidia-cuda-runtime-cu12 12.8.90); `absent` when the lock file is absent."""
    if not Path(lock).exists():
        return absent
    m = _RUNTIME.search(Path(lock).read_text())
    if not m:
        raise ValueError(f"{lock} pins no nvidia-cuda-runtime: no CUDA major to check the driver against")
    return int(m.group(1))


def requirement(cuda: int = CUDA_MAJOR, lock: Path | None = None) -> str:
    """What the GPU nodes need for engines.cuda `cuda` (or a given lock), in words (for `toolcall-repro
    plan` and gpu_smoke.sh)."""
    lock = gpu_lock(cuda) if lock is None else Path(lock)
    major = lock_cuda_major(lock, absent=cuda)
    return (
        f"the GPU envs are CUDA {major} builds ({_rel(lock)} pins nvidia-cuda-runtime {major}.x): every GPU "
        f"node needs an NVIDIA driver >= {MIN_DRIVER[major]} (check one: python -m toolcall_repro.gpu_driver "
        f"--cuda {major})"
    )


def way_out(major: int, oldest: int) -> str:
    """What to do where the driver (its oldest major, `oldest`) is older than CUDA `major` needs: the
    CUDA 12 locks where the driver runs them, else other nodes or a newer driver."""
    need = MIN_DRIVER[major]
    nodes = (
        f"send the GPU jobs to nodes with driver >= {need} (a partition or -C constraint in the site "
        f"settings of profiles/slurm/config.yaml), or ask the admins for a {need}+ driver"
    )
    lower = [m for m in CUDA_CHOICES if m < major and oldest >= MIN_DRIVER[m]]
    if lower:
        m = max(lower)
        locks = ", ".join(_rel(REQUIREMENTS / f"{env_name(e, m)}.lock") for e in CUDA_ENVS)
        return (
            f"set engines.cuda: {m} in the config to use the CUDA {m} locks ({locks}), which run on this "
            f"driver (>= {MIN_DRIVER[m]}; a venv: scripts/install-verl-env.sh --gpu --cuda {m}; "
            f"docs/cluster.md), or {nodes}"
        )
    oldest_lock = min(CUDA_CHOICES)
    return (
        f"{nodes}: no lock here runs on it (the oldest, CUDA {oldest_lock}, needs {MIN_DRIVER[oldest_lock]})"
    )


def check(
    nvidia_smi: str = "nvidia-smi", lock: Path | None = None, cuda: int = CUDA_MAJOR
) -> tuple[int, str]:
    """(exit code, one line): 0 the driver is new enough for the CUDA major of engines.cuda `cuda`'s lock
    (or of a given lock), 1 it is not (or its version cannot be read), 2 there is no nvidia-smi."""
    lock = gpu_lock(cuda) if lock is None else Path(lock)
    major = lock_cuda_major(lock, absent=cuda)
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
            f'driver on your system is too old"). {_capital(way_out(major, oldest))}'
        )
    return 0, f"gpu driver: found {found}; {what}: ok"


def _major(version: str) -> int | None:
    m = re.match(r"(\d+)\.", version)
    return int(m.group(1)) if m else None


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


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
        "--cuda", type=int, choices=CUDA_CHOICES, default=CUDA_MAJOR,
        help="the config's engines.cuda: check against that CUDA major's lock (default %(default)s)",
    )  # fmt: skip
    p.add_argument("--lock", type=Path, help="a GPU lock whose CUDA major counts (instead of --cuda's)")
    p.add_argument(
        "--nvidia-smi", default="nvidia-smi", help="the nvidia-smi to ask (default: the one on PATH)"
    )
    args = p.parse_args(argv)
    code, line = check(args.nvidia_smi, args.lock, args.cuda)
    print(line, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
