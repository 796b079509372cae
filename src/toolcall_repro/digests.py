"""Reference digests: what a run computed, as sha256s that ignore how long it took.

A run's science is its outputs: normalised data, the warm start's weights, the filters' samples, every
training's final weights and metrics, every table's cells. Their raw sha256s (in the job manifests) also
move with wall-clock and CPU seconds written beside the numbers, so `science_digest` hashes each output
with its timing fields dropped: JSON keys, JSONL keys and table columns named like a time (TIMING). Files
that are renderings of digested data (figures, Markdown and HTML tables, logs) or resume state (training
checkpoints: optimizer and RNG) are not digested (SKIPPED says why).

`digest_run` reads a results tree's manifests and returns, per job in DAG order, its outputs' digests with
the job's config sha256 and machine facts. `check_run` holds a run against a committed reference (for the
CI-size run, `.test/expected/digests/mkl-<branch>.json`: one per MKL code branch, the one machine choice
the kernel pin cannot fix, see `mkl_class`) and says which job is the first, in DAG order, whose
outputs differ while its inputs matched: the stage that computed something else, with what its manifest
says differs (config, code, machine, packages). Rewriting the reference is `toolcall-repro digests RUN
--write FILE`, a deliberate commit that says which change moved which numbers.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from toolcall_repro.provenance import config_hash

# A key or column that records time, not a result: wall/CPU/GPU seconds, timestamps, throughput, latency,
# and the figures derived from them (time to a target, speedups, costs and hours, the update's share of a
# step and the cost ratio predicted from it).
TIMING = re.compile(
    r"(^|[_./ -])(wall|cpu|gpu|device|time|times|timing|seconds|elapsed|duration|throughput|finished|started"
    r"|speedup|secs?|latency|hours|cost|costs|update_share|not_reached_share|predicted_step_ratio)([_./ -]|$)"
    r"|(_s|_sec|_ms|_h|_at)$|^(s|t|h)$",
    re.IGNORECASE,
)
# Path parts and suffixes that are not digested, and why (the reason is printed by `digests --explain`).
SKIPPED = {
    "manifests": "the job records themselves (times, host); their output sha256s are what is digested",
    "logs": "log text (timestamps, progress)",
    "benchmarks": "Snakemake's benchmark timings",
    "checkpoints": "resume state (optimizer, RNG), not a result; the final weights are digested",
    ".png": "a figure: a rendering of digested tables",
    ".svg": "a figure: a rendering of digested tables",
    ".pdf": "a figure: a rendering of digested tables",
    ".html": "a rendering of digested tables",
    ".md": "a rendering of digested tables (tables/csv is digested)",
    ".log": "log text",
    ".gz": "an archive of the run (its members are digested where they were made)",
    ".snakemake_timestamp": "Snakemake's directory timestamp",
    "provenance.json": "the run's record: the sum of the manifests (times, machines, installed packages)",
    "claims.csv": "the claims scorecard: a reading of digested tables, rows of timing among them (speedup, "
    "update vs rollout time)",
}
REFERENCE_VERSION = 1
# bfcl-eval's result files (generate_bfcl's raw results: BFCL_v4_<category>_result.json) are JSON lines
# under a .json name; any other .json that is not one JSON value is digested as its bytes.
BFCL_RESULT_SUFFIX = "_result.json"


def skip_reason(rel: str) -> str | None:
    p = PurePosixPath(rel)
    for part in p.parts[:-1]:
        if part in SKIPPED:
            return SKIPPED[part]
    for key in (p.name, p.suffix):
        if key in SKIPPED:
            return SKIPPED[key]
    return None


def is_timing(key: object) -> bool:
    return isinstance(key, str) and TIMING.search(key) is not None


def strip_timing(value: object) -> object:
    """A JSON value with every timing key dropped, at any depth."""
    if isinstance(value, Mapping):
        return {k: strip_timing(v) for k, v in value.items() if not is_timing(k)}
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()


def _table_rows(rows: list[list[str]]) -> bytes:
    if not rows:
        return b""
    keep = [i for i, name in enumerate(rows[0]) if not is_timing(name)]
    return _canonical([[r[i] if i < len(r) else None for i in keep] for r in rows])


def science_bytes(path: str | Path) -> bytes:
    """The bytes a file's science digest is taken over (timing removed where the format allows)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            text = path.read_text()
            return _canonical(strip_timing(json.loads(text)))
        except UnicodeDecodeError:
            return path.read_bytes()
        except json.JSONDecodeError:
            if not path.name.endswith(BFCL_RESULT_SUFFIX):
                return path.read_bytes()
            try:  # bfcl's result files: JSON lines under a .json name, each entry with its latency
                return _json_lines(text)
            except json.JSONDecodeError:
                return path.read_bytes()
    if suffix == ".jsonl":
        return _json_lines(path.read_text())
    if suffix in (".csv", ".tsv"):
        delimiter = "\t" if suffix == ".tsv" else ","
        return _table_rows(list(csv.reader(io.StringIO(path.read_text()), delimiter=delimiter)))
    if suffix == ".parquet":
        import pandas as pd  # only here: most runs' digests need no pandas import

        frame = pd.read_parquet(path)
        frame = frame[[c for c in frame.columns if not is_timing(str(c))]]
        return frame.to_json(orient="split", index=False, double_precision=15).encode()
    return path.read_bytes()


def _json_lines(text: str) -> bytes:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return b"\n".join(_canonical(strip_timing(json.loads(ln))) for ln in lines)


def science_digest(path: str | Path) -> str:
    return hashlib.sha256(science_bytes(path)).hexdigest()


def _rel(path: str, run_id: str) -> str:
    """A manifest's path (results/<run_id>/..., relative or absolute) relative to the results tree."""
    marker = f"results/{run_id}/"
    i = path.find(marker)
    return path[i + len(marker) :] if i >= 0 else path


def dag_order(jobs: Mapping[str, Mapping]) -> list[str]:
    """Jobs in an order where each comes after every job whose output it reads (ties by name)."""
    producer = {out: key for key, job in jobs.items() for out in job["outputs"]}
    needs = {key: {producer[i] for i in job["inputs"] if producer.get(i, key) != key} for key, job in jobs.items()}
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(jobs):
        ready = sorted(k for k in jobs if k not in done and needs[k] <= done)
        if not ready:  # a cycle cannot come from one DAG; keep going by name rather than loop
            ready = sorted(k for k in jobs if k not in done)[:1]
        order.extend(ready)
        done.update(ready)
    return order


def digest_run(run_dir: str | Path) -> dict:
    """Per job (manifests/<rule>/<key>), in DAG order: output digests, input paths, config sha, machine."""
    run_dir = Path(run_dir)
    run_id = run_dir.name
    root = run_dir / "manifests"
    jobs: dict[str, dict] = {}
    machines: dict[str, dict] = {}
    for path in sorted(root.rglob("*.json")):
        m = json.loads(path.read_text())
        key = path.relative_to(root).with_suffix("").as_posix()
        outputs: dict[str, str] = {}
        for out in m.get("outputs") or {}:
            rel = _rel(out, run_id)
            if skip_reason(rel) is None and (run_dir / rel).is_file():
                outputs[rel] = science_digest(run_dir / rel)
        facts = m.get("machine") or {}
        machines.setdefault(config_hash(facts)[:12], facts)
        jobs[key] = {
            "rule": m.get("rule"),
            "config_sha256": m.get("config_sha256"),
            "commit": (m.get("git") or {}).get("commit"),
            "machine": config_hash(facts)[:12],
            "inputs": sorted(_rel(i, run_id) for i in m.get("inputs") or {}),
            "outputs": outputs,
        }
    record_path = run_dir / "provenance.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    return {
        "version": REFERENCE_VERSION,
        "run_id": run_id,
        "config_sha256": record.get("config_sha256"),
        "jobs": {k: jobs[k] for k in dag_order(jobs)},
        "machines": machines,
        "distributions": record.get("distributions", []),
    }


def _flat(a: object, b: object, prefix: str = "") -> list[tuple[str, object, object]]:
    from toolcall_repro.compare import flat_diff

    return flat_diff(a, b, prefix)


def explain(job: str, ref: Mapping, run: Mapping) -> list[str]:
    """What the two records of one job say differs: config, code commit, machine, packages."""
    rj, nj = ref["jobs"][job], run["jobs"][job]
    why = []
    if rj["config_sha256"] != nj["config_sha256"]:
        why.append(f"its config subtree differs (sha256 {rj['config_sha256'][:10]} -> {nj['config_sha256'][:10]})")
    if rj["commit"] != nj["commit"]:
        why.append(f"the code commit differs ({(rj['commit'] or '?')[:10]} -> {(nj['commit'] or '?')[:10]})")
    facts = _flat(ref["machines"].get(rj["machine"], {}), run["machines"].get(nj["machine"], {}))
    volatile = ("cpu_count", "platform")
    for key, old, new in facts:
        if key == "distributions_sha256":
            continue
        why.append(f"machine: {key}: {old!r} -> {new!r}" + (" (recorded, not expected to matter)" if key in volatile else ""))
    old_d, new_d = set(ref.get("distributions", [])), set(run.get("distributions", []))
    if old_d != new_d:
        changed = sorted(old_d ^ new_d)
        shown = ", ".join(changed[:12]) + (f" (+{len(changed) - 12} more)" if len(changed) > 12 else "")
        why.append(f"installed packages differ ({len(changed)} lines: reference -/+ this run): {shown}")
    return why or ["nothing recorded differs: same config, code, machine facts and packages (a nondeterminism?)"]


def check_run(run: Mapping, ref: Mapping) -> tuple[bool, list[str]]:
    """(matches, report lines): every reference job present with the same output digests."""
    lines: list[str] = []
    missing = [j for j in ref["jobs"] if j not in run["jobs"]]
    extra = [j for j in run["jobs"] if j not in ref["jobs"]]
    differing = []
    for job in ref["jobs"]:
        if job not in run["jobs"]:
            continue
        a, b = ref["jobs"][job]["outputs"], run["jobs"][job]["outputs"]
        files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
        if files:
            differing.append((job, files))
    if missing:
        lines.append(f"{len(missing)} reference job(s) did not run: {', '.join(missing[:10])}")
    if extra:
        lines.append(f"{len(extra)} job(s) ran that the reference lacks: {', '.join(extra[:10])}")
    if differing:
        order = list(run["jobs"])
        differing.sort(key=lambda jf: order.index(jf[0]))
        first, files = differing[0]
        rule = run["jobs"][first]["rule"]
        lines.append(
            f"first stage whose output differs, in DAG order: {first} (rule {rule}); its inputs matched the "
            f"reference, so this job computed something else"
        )
        lines += [f"  differs: {f}" for f in files[:10]]
        lines += [f"  why (what its records say): {w}" for w in explain(first, ref, run)]
        rest = [j for j, _ in differing[1:]]
        if rest:
            lines.append(f"{len(rest)} later job(s) differ too (downstream of it or apart): {', '.join(rest[:12])}")
    ok = not (missing or extra or differing)
    n_files = sum(len(j["outputs"]) for j in ref["jobs"].values())
    lines.insert(
        0,
        f"{'OK' if ok else 'MISMATCH'}: {len(run['jobs'])} jobs against the reference's {len(ref['jobs'])} "
        f"({n_files} digested outputs)",
    )
    return ok, lines


def mkl_class(run: Mapping) -> str:
    """The MKL code branch the run's jobs ran (machine.mkl_branch of each job's recorded machine), the one
    machine-dependent choice the kernel pin leaves: `avx2` is MKL's AVX2 branch on Intel CPUs and its AUTO
    branch elsewhere, two sets of bytes. Records from before `mkl_branch` was recorded are read from their
    kernel environment and CPU model. Raises ValueError when the jobs ran more than one branch."""
    from toolcall_repro.machine import mkl_branch

    branches = set()
    for facts in (run["machines"].get(j["machine"], {}) for j in run["jobs"].values()):
        branch = facts.get("mkl_branch") or mkl_branch(
            facts.get("kernel_env") or {}, facts.get("cpu_vendor", ""), facts.get("cpu_model") or ""
        )
        branches.add(branch)
    if len(branches) != 1:
        raise ValueError(f"the run's jobs ran MKL branches {sorted(branches)}: one reference cannot hold it")
    return branches.pop()


def reference_file(reference: str | Path, run: Mapping, branch: str | None = None) -> Path:
    """The reference to hold `run` against: the file itself, or in a folder of references the one of the
    run's MKL branch, `mkl-<branch>.json` (mkl_class, unless given)."""
    path = Path(reference)
    return path / f"mkl-{branch or mkl_class(run)}.json" if path.is_dir() else path


def write_reference(run_dir: str | Path, out: str | Path) -> tuple[dict, Path]:
    """Write the run's digests to `out` (a file, or a folder of references: the run's MKL branch's file)."""
    from toolcall_repro.io import atomic_write_text

    ref = digest_run(run_dir)
    path = reference_file(out, ref)
    atomic_write_text(path, json.dumps(ref, indent=1, sort_keys=False) + "\n")
    return ref, path


def check_reference(run_dir: str | Path, reference: str | Path) -> tuple[bool, list[str]]:
    """check_run of the run against its reference (reference_file); a missing one is a mismatch that says
    which references exist and how to write the missing one."""
    run = digest_run(run_dir)
    try:
        branch = mkl_class(run) if Path(reference).is_dir() else None
    except ValueError as exc:
        return False, [f"MISMATCH: {exc}"]
    path = reference_file(reference, run, branch)
    if not path.is_file():
        have = sorted(p.name for p in Path(reference).glob("mkl-*.json")) if Path(reference).is_dir() else []
        return False, [
            f"MISMATCH: no reference {path} for this run (its jobs ran MKL's {branch!r} branch; "
            f"references here: {have or 'none'}). A machine of that kind writes it: `make reference`."
        ]
    ok, lines = check_run(run, json.loads(path.read_text()))
    used = f"reference: {path}" + (f" (MKL branch {branch!r})" if branch else "")
    return ok, [*lines[:1], used, *lines[1:]]


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="toolcall-repro digests",
        description="science digests of a results tree: check them against a reference, or write one",
    )
    p.add_argument("run_dir", help="results/<run_id>")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument(
        "--check",
        metavar="REFERENCE",
        help="compare with a reference file, or a folder of them (the run's MKL branch's); exit 1 on a mismatch",
    )
    g.add_argument(
        "--write", metavar="REFERENCE", help="write the run's digests as the new reference (file or folder)"
    )
    args = p.parse_args(argv)
    if not (Path(args.run_dir) / "manifests").is_dir():
        print(f"digests: {args.run_dir} has no manifests/ (not a results tree)")
        return 2
    if args.write:
        ref, path = write_reference(args.run_dir, args.write)
        print(f"wrote {path}: {len(ref['jobs'])} jobs")
        return 0
    ok, lines = check_reference(args.run_dir, args.check)
    print("\n".join(lines))
    return 0 if ok else 1
