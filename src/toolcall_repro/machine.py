"""The machine a job runs on: the CPU kernel pin that makes its numbers machine-independent, and the
facts a manifest records so that two runs that differ can be told apart.

torch picks its vectorised CPU kernels by the machine's instruction set (AVX-512 on one machine, AVX2 on
another), and MKL and oneDNN pick their own code paths the same way; each choice changes float sums, and
800 warm-start steps amplify a last-bit difference into another model. `engines.cpu_capability` names one
capability for every job; `pin_kernels` sets it before torch loads, overriding whatever the caller's shell
says, and `check_kernels` refuses a job whose torch did not run at that capability (a CPU that lacks it).
`native` leaves the choice to the machine (the numbers then depend on it).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

# capability -> the environment that selects it: torch's dispatch (ATEN_CPU_CAPABILITY), MKL's code path
# (MKL_CBWR: one branch on Intel and AMD alike) and oneDNN's instruction set cap (ONEDNN_MAX_CPU_ISA).
KERNEL_ENV: dict[str, dict[str, str]] = {
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
}
CAPABILITIES = (*KERNEL_ENV, "native")
# numpy dispatches its own SIMD loops (float reductions too) by the CPU: the dispatch targets above the
# capability are disabled (NPY_DISABLE_CPU_FEATURES). Which names exist depends on numpy's version and a
# name it does not dispatch is an ImportWarning, so they are read from the installed numpy (numpy_targets).
NUMPY_ABOVE = {"default": ("AVX", "F16C", "FMA3"), "avx2": ("AVX512",), "avx512": ()}
NUMPY_VAR = "NPY_DISABLE_CPU_FEATURES"
# OMP_WAIT_POLICY is left to the caller: PASSIVE (threads sleep between parallel regions) ran a loaded
# machine's 2-thread jobs 3-4x faster but the warm start alone ~20% slower (benchmarks/kernel_pin.py), and
# the warm start runs alone in the DAG. It changes no number either way.
# Set by nobody but pin_kernels: an inherited value would make a job's numbers the caller's shell's.
PINNED_VARS = sorted({k for env in KERNEL_ENV.values() for k in env} | {NUMPY_VAR})
LOCK_MARKER = "toolcall-repro-lock.json"  # written into a venv by the install scripts


class KernelPinError(RuntimeError):
    """The configured capability is not what torch runs here."""


def pin_kernels(capability: str, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the kernel environment of `capability` in environ (os.environ); return what was set.

    Call before torch is imported (torch reads ATEN_CPU_CAPABILITY once). `native` removes every
    variable, so the machine chooses and no inherited setting leaks in.
    """
    env = os.environ if environ is None else environ
    if capability not in CAPABILITIES:
        raise KernelPinError(f"engines.cpu_capability: {capability!r} is not one of {list(CAPABILITIES)}")
    for var in PINNED_VARS:
        env.pop(var, None)
    chosen = dict(KERNEL_ENV.get(capability, {}))
    above = NUMPY_ABOVE.get(capability, ())
    disabled = [t for t in numpy_targets() if t.startswith(above)] if above else []
    if disabled:
        chosen[NUMPY_VAR] = " ".join(disabled)
    env.update(chosen)
    return chosen


@functools.cache
def numpy_targets() -> tuple[str, ...]:
    """The SIMD targets the installed numpy dispatches to at run time (read in a child: importing numpy
    here would fix its choice before the pin is set). Empty where numpy is absent."""
    probe = (
        "try:\n from numpy._core._multiarray_umath import __cpu_dispatch__ as d\n"
        "except ImportError:\n from numpy.core._multiarray_umath import __cpu_dispatch__ as d\n"
        "print(' '.join(d))"
    )
    env = {k: v for k, v in os.environ.items() if k != NUMPY_VAR}
    try:
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return ()
    return tuple(out.stdout.split())


def torch_capability() -> str | None:
    """The capability torch dispatches to in this process (None when torch has not been imported)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return str(torch.backends.cpu.get_cpu_capability()).lower()


def supported(capability: str) -> bool | None:
    """Whether this CPU can run torch's kernels of `capability` (None: torch not imported).

    torch reports the capability its environment asks for even where the CPU lacks it (its dispatch then
    falls back to a lower kernel per op), so the hardware is asked separately.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    probe = {"avx2": "_is_avx2_supported", "avx512": "_is_avx512_supported"}.get(capability)
    return True if probe is None else bool(getattr(torch.cpu, probe)())


def check_kernels(capability: str) -> None:
    """Raise when this process's torch does not run at the configured capability."""
    used = torch_capability()
    if capability == "native" or used is None or (used == capability and supported(capability)):
        return
    raise KernelPinError(
        f"engines.cpu_capability: {capability!r} was asked for, but torch runs {used!r} kernels on this "
        f"CPU ({cpu_model()}); allowed: {list(CAPABILITIES)}. Choose one this CPU supports (x86-64 machines "
        "since 2013 have avx2), or native (the numbers then depend on the machine)."
    )


def cpu_vendor() -> str:
    """The CPU's vendor string (/proc/cpuinfo vendor_id: GenuineIntel, AuthenticAMD, ...), "" if unknown."""
    for line in _cpuinfo_lines():
        if line.lower().startswith("vendor_id"):
            return line.split(":", 1)[1].strip()
    return ""


def mkl_branch(kernel_env: Mapping[str, str | None], vendor: str | None = None, model: str = "") -> str:
    """The MKL code branch a job with this kernel environment ran (lower case: auto, compatible, avx2, ...;
    native where MKL_CBWR is unset).

    MKL takes an ISA branch (MKL_CBWR=AVX2, AVX512) on Intel CPUs only: elsewhere it runs its AUTO branch
    instead (oneMKL Developer Guide, "Getting Started with Conditional Numerical Reproducibility"); only
    COMPATIBLE is one branch on every vendor. So `avx2` gives two sets of bytes, Intel's and the others'
    (docs/reproducibility.md). `vendor` defaults to this CPU's; records without one pass the model name."""
    if not kernel_env.get("MKL_CBWR"):
        return "native"  # no reproducibility mode: MKL dispatches by the machine
    wanted = kernel_env["MKL_CBWR"].split(",")[0].strip().upper().removeprefix("BRANCH=")
    if wanted in ("AUTO", "COMPATIBLE"):
        return wanted.lower()
    vendor = cpu_vendor() if vendor is None else vendor
    intel = vendor == "GenuineIntel" or (not vendor and "intel" in model.lower())
    return wanted.lower() if intel else "auto"


def cpu_model() -> str:
    for line in _cpuinfo_lines():
        if line.lower().startswith(("model name", "cpu model", "hardware")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The instruction-set flags the kernel choices read (a subset of /proc/cpuinfo's, sorted)."""
    for line in _cpuinfo_lines():
        if line.lower().startswith(("flags", "features")):
            flags = set(line.split(":", 1)[1].split())
            return sorted(f for f in flags if f.startswith(("avx", "sse", "fma", "amx", "f16c", "bmi", "asimd", "sve")))
    return []


def _cpuinfo_lines() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def installed_distributions() -> list[str]:
    """Every installed distribution of this environment as `name==version`, sorted."""
    return sorted(
        {f"{(d.metadata['Name'] or '').lower().replace('_', '-')}=={d.version}" for d in importlib.metadata.distributions()}
    )


def distributions_digest() -> tuple[str, int]:
    """sha256 over installed_distributions() (one line each), and their count."""
    names = installed_distributions()
    return hashlib.sha256("\n".join(names).encode()).hexdigest(), len(names)


def lock_record(prefix: str | Path | None = None) -> dict | None:
    """The lock this environment was installed from (the install scripts' marker), or None."""
    marker = Path(prefix or sys.prefix) / LOCK_MARKER
    try:
        return json.loads(marker.read_text())
    except (OSError, ValueError):
        return None


def machine_facts(options: Mapping[str, object] | None = None) -> dict:
    """What a manifest records of the machine and environment a job ran in."""
    digest, count = distributions_digest()
    facts: dict = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_vendor": cpu_vendor(),
        "cpu_flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "kernel_env": {k: os.environ.get(k) for k in PINNED_VARS},
        "mkl_branch": mkl_branch(os.environ),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "cpu_capability": (options or {}).get("cpu_capability"),
        "torch_capability": torch_capability(),
        "threads": (options or {}).get("threads"),
        "lock": lock_record(),
        "distributions_sha256": digest,
        "distributions": count,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        facts["torch"] = {
            "version": torch.__version__,
            "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "mkl": bool(torch.backends.mkl.is_available()),
            "mkldnn": bool(torch.backends.mkldnn.is_available()),
            "config_sha256": hashlib.sha256(torch.__config__.show().encode()).hexdigest(),
        }
    return facts


def describe() -> str:
    """One line naming the machine and kernels a measurement was taken with (benchmarks print it first)."""
    torch = sys.modules.get("torch")
    build = f"torch {torch.__version__} at {torch_capability()} kernels" if torch is not None else "torch not loaded"
    pinned = os.environ.get("ATEN_CPU_CAPABILITY") or "native (not pinned)"
    return (
        f"machine: {cpu_model()} ({os.cpu_count()} cores; {' '.join(cpu_flags()) or 'flags unknown'}); "
        f"{build}; capability asked: {pinned}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}"
    )
