"""What the CPU kernel pin (engines.cpu_capability) costs, and which settings move the warm start's bytes.

    python benchmarks/kernel_pin.py --samples results/ci-smoke/data/normalised/*.parquet --steps 30 --repeats 2

Runs the warm start as the workflow does (the job entry, `python -m toolcall_repro.job`) for a few steps
under each setting, interleaved (A B C A B C ...) so that a machine's changing load falls on every setting
alike, and prints per setting: seconds a step (median), the weights' sha256, and the CPU the figures were
taken on (model, flags, torch's native capability). Settings:
  pin=<cap>               the job spec pins <cap> (what the workflow does with engines.cpu_capability)
  pin=<cap> shell=<cap2>  the same, with the caller's shell asking for <cap2> (the pin must win)
  unpinned shell=<cap>    no pin (every job before the pin): the shell, i.e. the machine, decides
and single-variable probes (MKL_CBWR, ONEDNN_MAX_CPU_ISA, NPY_DISABLE_CPU_FEATURES, TOKENIZERS_PARALLELISM)
on an unpinned job, to show which ones move the bytes on this machine; the pin's torch and oneDNN
settings under each MKL branch (AVX2, AUTO, COMPATIBLE: which one the bytes follow; MKL takes AVX2 on
Intel CPUs only); and OMP_WAIT_POLICY (left to the caller by the job entry: it moves the time, not the
bytes). Prints only; asserts nothing (tests/engines/local/test_local_warmstart.py holds the pin's test).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PINNED = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "NPY_DISABLE_CPU_FEATURES",
    "TOKENIZERS_PARALLELISM",
    "OMP_WAIT_POLICY",
)


def settings() -> dict[str, tuple[str | None, dict[str, str]]]:
    """name -> (pinned capability or None, the caller's shell environment)."""
    return {
        "pin=avx2": ("avx2", {}),
        "pin=avx2 shell=default": ("avx2", {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}),
        "pin=avx2 shell=avx512": ("avx2", {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX512"}),
        "unpinned (native)": (None, {}),
        "unpinned shell=default": (None, {"ATEN_CPU_CAPABILITY": "default"}),
        "unpinned shell=avx2": (None, {"ATEN_CPU_CAPABILITY": "avx2"}),
        "unpinned MKL_CBWR=COMPATIBLE": (None, {"MKL_CBWR": "COMPATIBLE"}),
        "unpinned ONEDNN_MAX_CPU_ISA=SSE41": (None, {"ONEDNN_MAX_CPU_ISA": "SSE41"}),
        "unpinned TOKENIZERS_PARALLELISM=false": (None, {"TOKENIZERS_PARALLELISM": "false"}),
        "unpinned OMP_WAIT_POLICY=PASSIVE": (None, {"OMP_WAIT_POLICY": "PASSIVE"}),
        "unpinned MKL_CBWR=AVX2": (None, {"MKL_CBWR": "AVX2"}),
        # the pin's torch and oneDNN settings with each MKL branch: which branch the bytes follow (MKL takes
        # AVX2 on Intel CPUs only and runs AUTO elsewhere; docs/reproducibility.md)
        **{
            f"avx2 kernels MKL_CBWR={branch}": (
                None,
                {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": branch},
            )
            for branch in ("AVX2", "AUTO", "COMPATIBLE")
        },
    }


def run_once(work: Path, name: str, capability: str | None, shell: dict, samples: list[str], tiny: dict, threads: int):
    out, manifest = work / name.replace(" ", "_").replace("=", "-"), work / f"{abs(hash(name))}.json"
    spec = {
        "rule": "warmstart_base_model",
        "stage": "warmstart_base_model",
        "config": {"model.tiny": tiny, "filter.reserve_fraction": 0.3, "engines.warmstart_threads": threads},
        "seeds": {"model": 0, "reserve": 0},
        "options": {} if capability is None else {"cpu_capability": capability},
        "input": {"samples": samples},
        "output": {"model": str(out), "manifest": str(manifest)},
        "files": {"input": samples, "output": [str(out), str(manifest)]},
    }
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    env.update(shell)
    done = subprocess.run([sys.executable, "-m", "toolcall_repro.job", json.dumps(spec)], env=env,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{name}: rc {done.returncode}\n{done.stderr[-2000:]}")
    record = json.loads(manifest.read_text())
    # the warm start prints its report (with the training's own wall time) as its last JSON line
    report = next(json.loads(line) for line in reversed(done.stdout.splitlines()) if line.startswith("{"))
    wall = report["wall_s"]
    digest = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    return wall / tiny["sft_steps"], digest, record["machine"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", nargs="+", required=True, help="normalised source parquet files (a run's data/normalised)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--only", nargs="*", help="setting names to run (default: all)")
    args = p.parse_args(argv)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    tiny = dict(config["model"]["tiny"], sft_steps=args.steps)
    tiny.pop("early_step", None)
    chosen = {k: v for k, v in settings().items() if not args.only or k in args.only}
    if not chosen:
        raise SystemExit(f"--only {args.only}: no such setting; the settings: {', '.join(settings())}")
    times: dict[str, list[float]] = {k: [] for k in chosen}
    digests: dict[str, set[str]] = {k: set() for k in chosen}
    caps: dict[str, str] = {}
    machine = None
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name, (cap, shell) in chosen.items():
                per_step, digest, facts = run_once(Path(tmp) / f"r{r}", name, cap, shell, args.samples, tiny, args.threads)
                times[name].append(per_step)
                digests[name].add(digest)
                caps[name] = str(facts.get("torch_capability"))
                machine = machine or facts
    print(f"CPU: {machine['cpu_model']} ({machine['cpu_count']} cores); flags: {' '.join(machine['cpu_flags'])}; "
          f"python {machine['python']}; torch {(machine.get('torch') or {}).get('version')}")  # fmt: skip
    print(f"warm start, {args.steps} steps, {args.threads} thread(s), {args.repeats} interleaved repeats\n")
    print("| setting | s/step (median) | weights sha256 | torch capability |\n|---|---|---|---|")
    first = None
    for name in chosen:
        d = sorted(digests[name])
        first = first or d[0]
        same = "same as first row" if d == [first] else ("REPEATS DIFFER" if len(d) > 1 else "differs from first row")
        print(f"| {name} | {statistics.median(times[name]):.3f} | {d[0][:12]} ({same}) | {caps[name]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
