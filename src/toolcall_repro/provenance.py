"""Provenance: per-job manifests and the run-level record (archives: toolcall_repro.archive).

Every Snakemake job runs through the job entry (`python -m toolcall_repro.job`), which runs the stage,
then builds the job's manifest here (`build_manifest`: config and its sha256, seeds, options, input and
output checksums, git state, package versions, wall-clock and CPU seconds). One mechanism for all rules,
so no stage can forget its manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import platform
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from toolcall_repro.io import atomic_write_json
from toolcall_repro.machine import installed_distributions, machine_facts

TRACKED_PACKAGES = (
    "toolcall-repro",
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "numpy",
    "pandas",
    "pyarrow",
    "bfcl-eval",
    "lm-eval",
    "snakemake",
    "verl",
    "vllm",
)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def config_hash(subtree: object) -> str:
    """sha256 of the canonical JSON of a config subtree (key order never matters)."""
    blob = json.dumps(subtree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def iter_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files named directly, plus every file below each named directory, in a stable order."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.is_file()))
        elif p.is_file():
            files.append(p)
    return files


def checksums(paths: Iterable[str | Path]) -> dict[str, str]:
    return {str(f): sha256_file(f) for f in iter_files(paths)}


def model_sha256(model_dir: str | Path) -> str | None:
    """A model's identity on every score card (BFCL, ACEBench, held-out, general): one sha256 over the
    folder's files, each as its relative POSIX name and its own sha256, in name order. Hidden paths (a
    part starting with '.') are left out: Snakemake's `.snakemake_timestamp`, the Hub's
    `.cache/huggingface` download records (with their timestamps) say nothing of the model. None when
    `model_dir` is not a folder (a Hub id, an API model)."""
    root = Path(model_dir)
    if not root.is_dir():
        return None
    h = hashlib.sha256()
    for f in iter_files([root]):
        rel = f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        h.update(f"{rel}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(cwd: str | Path = ".") -> dict[str, object]:
    """Commit and dirty flag of the code that ran; results/ is ignored by git, so it never counts as dirty."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            return None
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def build_manifest(
    *,
    rule: str,
    config_subtree: object,
    inputs: Iterable[str],
    outputs: Iterable[str],
    seeds: Mapping[str, object] | None,
    wall_s: float,
    cpu_s: float,
    device_s: float | None = None,
    command: list[str] | None = None,
    options: Mapping[str, object] | None = None,
) -> dict:
    return {
        "rule": rule,
        "config": config_subtree,
        "config_sha256": config_hash(config_subtree),
        "git": git_state(),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "host": platform.node(),
        "machine": machine_facts(options),
        "inputs": checksums(inputs),
        "outputs": checksums(outputs),
        "seeds": dict(seeds or {}),
        "wall_clock_s": round(wall_s, 3),
        "cpu_s": round(cpu_s, 3),
        "device_s": device_s,
        "command": command,
        "options": dict(options or {}),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# --- run-level record, archive, verify -------------------------------------------------------------


def collect_manifests(run_dir: str | Path) -> list[dict]:
    root = Path(run_dir) / "manifests"
    return [json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))]


def run_record(run_dir: str | Path, config: Mapping) -> dict:
    manifests = collect_manifests(run_dir)
    return {
        "run_dir": str(run_dir),
        "config": config,
        "config_sha256": config_hash(config),
        "git": git_state(),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        # Every installed distribution of the environment that wrote this record: `compare` names the
        # packages that differ when two runs' jobs carry different distribution digests.
        "distributions": installed_distributions(),
        "machines": _machines(manifests),
        "jobs": len(manifests),
        "wall_clock_s": round(sum(m["wall_clock_s"] for m in manifests), 3),
        "cpu_s": round(sum(m["cpu_s"] for m in manifests), 3),
        "device_s": round(sum(m.get("device_s") or 0.0 for m in manifests), 3),
        "per_rule": _per_rule(manifests),
    }


def write_record(run_dir: str | Path, config: Mapping, out: str | Path) -> dict:
    """The run-level record (run_record) written atomically to out."""
    record = run_record(run_dir, config)
    atomic_write_json(out, record)
    return record


def write_provenance(j) -> None:
    """The write_provenance job (toolcall_repro.job): config is the whole config, the record's own.

    It sums every manifest under the run's manifests/ (collect_manifests), not only declared inputs:
    naming the manifest of every job of the DAG in the rule's input would need a second copy of every
    rule's wildcard values (Snakemake gives an input function no view of the DAG it is building).
    """
    write_record(j.option("run_dir"), j.config, j.out("record"))


def _machines(manifests: list[dict]) -> list[dict]:
    """The distinct machine/environment records of the run's jobs (one per kind of job environment)."""
    seen: dict[str, dict] = {}
    for m in manifests:
        facts = m.get("machine")
        if facts:
            seen.setdefault(config_hash(facts), facts)
    return [seen[k] for k in sorted(seen)]


def _per_rule(manifests: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for m in manifests:
        r = out.setdefault(m["rule"], {"jobs": 0, "wall_clock_s": 0.0, "cpu_s": 0.0})
        r["jobs"] += 1
        r["wall_clock_s"] = round(r["wall_clock_s"] + m["wall_clock_s"], 3)
        r["cpu_s"] = round(r["cpu_s"] + m["cpu_s"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m toolcall_repro.provenance record`: the run-level record (archives: `toolcall_repro.archive`)."""
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.provenance")
    sub = p.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="write the run-level provenance record")
    rec.add_argument("--run-dir", required=True)
    rec.add_argument("--config", required=True, help="the whole config as JSON")
    rec.add_argument("--out", required=True)
    args = p.parse_args(argv)
    write_record(args.run_dir, json.loads(args.config), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
