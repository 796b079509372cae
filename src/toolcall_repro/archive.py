"""Archives of a results tree: what goes in (the policy), the archive's name, packing, verification.

Policy (config `archive.weights`): resume checkpoints (`train/*/*/checkpoints/`: model, optimizer and
RNG state kept only so an interrupted training job can resume; `checkpoints.stale-*/`, another run's set
aside by a retry) are never archived, nor hub snapshots
(`models/hub/`: a downloaded model at a revision its manifest records); the weights the pipeline trained
(`train/*/*/final/`, the tiny base model `models/base/`) go in with `final` and stay out with `none`.
Every archive holds `ARCHIVE.json` (what was packed and what was left out, and why) and `SHA256SUMS`.

Name: `<run_id>-<code>-<config>.tar.gz`, the code commit (plus a hash of uncommitted changes) and the
config's sha256, so the same code and config give the same name and a changed knob gives a new one.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from toolcall_repro.provenance import iter_files, sha256_file

CHECKSUM_FILE = "SHA256SUMS"
ARCHIVE_MANIFEST = "ARCHIVE.json"
WEIGHTS_CHOICES = ("none", "final")
SUFFIX = ".tar.gz"
RESULTS_PART = "results"


@dataclass(frozen=True)
class Part:
    name: str
    archived: str  # "always", "never", or "weights" (only with archive.weights: final)
    reason: str


PARTS = {
    RESULTS_PART: Part(RESULTS_PART, "always", "tables, figures, cards, manifests, logs, data, metrics"),
    "resume checkpoints": Part(
        "resume checkpoints",
        "never",
        "resume state (model, optimizer, RNG) kept only so an interrupted training job can resume",
    ),
    "final weights": Part("final weights", "weights", "archive.weights: none"),
    "base model": Part("base model", "weights", "archive.weights: none"),
    "hub snapshots": Part(
        "hub snapshots",
        "never",
        "a hub model at the revision its download manifest records (with every file's sha256): download it again",
    ),
    "archives": Part("archives", "never", "an archive does not hold archives"),
}


def part_of(rel: str | PurePosixPath) -> tuple[str, str]:
    """(part name, the folder that makes it that part) of a path relative to the run directory."""
    parts = PurePosixPath(rel).parts
    if parts[:1] == ("train",):
        for i, p in enumerate(parts[1:-1], start=1):
            if p in ("checkpoints", "final") or p.startswith("checkpoints.stale-"):
                name = "final weights" if p == "final" else "resume checkpoints"
                return name, "/".join(parts[: i + 1])
    if parts[:2] == ("models", "base"):
        return "base model", "models/base"
    if parts[:2] == ("models", "hub") and len(parts) > 3:
        return "hub snapshots", "/".join(parts[:3])
    if parts[:1] == ("archive",):
        return "archives", "archive"
    return RESULTS_PART, ""


def is_archived(part: str, weights: str) -> bool:
    rule = PARTS[part].archived
    return rule == "always" or (rule == "weights" and weights == "final")


# --- the name ------------------------------------------------------------------------------------------


def code_tag(cwd: str | Path = ".") -> str:
    """Short commit of the code, `-dirty<hash of git diff HEAD>` when tracked files changed; `nogit` outside git."""

    def git(*args: str) -> bytes | None:
        try:
            return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None

    commit = git("rev-parse", "--short=10", "HEAD")
    if commit is None:
        return "nogit"
    tag = commit.decode().strip()
    diff = git("diff", "HEAD", "--no-ext-diff", "--binary")
    if diff:
        tag += "-dirty" + hashlib.sha256(diff).hexdigest()[:8]
    return tag


def archive_name(run_id: str, code: str, config_sha256: str) -> str:
    return f"{run_id}-{code}-{config_sha256[:10]}{SUFFIX}"


# --- packing -------------------------------------------------------------------------------------------


def _extra_name(path: str | Path) -> str:
    """Where an extra file goes under extra/: its path relative to the working directory when it lies
    below it (config/config.yaml and .test/config.yaml must not collide), else its absolute path."""
    absolute = Path(path).resolve()
    try:
        return str(absolute.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(absolute).lstrip("/")


def plan(run_dir: str | Path, weights: str = "final") -> tuple[list[tuple[Path, str]], dict, list[dict]]:
    """What an archive of run_dir holds: (file, path in the tree) packed, per-part totals, left-out folders."""
    if weights not in WEIGHTS_CHOICES:
        raise ValueError(f"archive.weights: {weights!r} is not one of {list(WEIGHTS_CHOICES)}")
    run_dir = Path(run_dir)
    packed: list[tuple[Path, str]] = []
    parts: dict[str, dict] = {}
    left_out: dict[str, dict] = {}
    for f in iter_files([run_dir]):
        rel = f.relative_to(run_dir).as_posix()
        part, root = part_of(rel)
        size = f.stat().st_size
        archived = is_archived(part, weights)
        p = parts.setdefault(part, {"archived": archived, "files": 0, "bytes": 0})
        p["files"] += 1
        p["bytes"] += size
        if archived:
            packed.append((f, rel))
        else:
            p["reason"] = PARTS[part].reason
            lo = left_out.setdefault(root, {"path": root, "part": part, "reason": PARTS[part].reason})
            lo["files"] = lo.get("files", 0) + 1
            lo["bytes"] = lo.get("bytes", 0) + size
    return packed, parts, list(left_out.values())


def pack_archive(
    run_dir: str | Path,
    archive: str | Path,
    extra: Iterable[str | Path] = (),
    *,
    weights: str = "final",
    prefix: str | None = None,
) -> dict:
    """Pack run_dir under the policy, plus extra files, into a tar.gz with ARCHIVE.json and SHA256SUMS.

    Members lie under `<prefix>/` (default: the archive's name without .tar.gz, so two archives of one
    run id extract side by side), in sorted order with fixed mtimes and owners, in a gzip stream with
    no timestamp: the same tree gives the same bytes. Returns the archive's manifest (ARCHIVE.json) with
    each part's compressed size in the archive added under `compressed_bytes`.
    """
    run_dir, archive = Path(run_dir), Path(archive)
    if prefix is None:
        prefix = archive.name[: -len(SUFFIX)] if archive.name.endswith(SUFFIX) else archive.stem
    packed, parts, left_out = plan(run_dir, weights)
    extras = iter_files(extra)
    if extras:
        parts["config files"] = {
            "archived": True,
            "files": len(extras),
            "bytes": sum(e.stat().st_size for e in extras),
        }
    members = [(src, f"{prefix}/{rel}", part_of(rel)[0]) for src, rel in packed]
    members += [(e, f"{prefix}/extra/{_extra_name(e)}", "config files") for e in extras]
    order = [*PARTS, "config files"]
    members.sort(key=lambda m: (order.index(m[2]), m[1]))  # part by part, each in path order
    info = {
        "archive": archive.name,
        "run_id": run_dir.name,
        "weights": weights,
        "parts": parts,
        "left_out": left_out,
    }
    blob = (json.dumps(info, indent=2, sort_keys=True) + "\n").encode()
    sums = [f"{sha256_file(src)}  {name}\n" for src, name, _ in members]
    sums.append(f"{hashlib.sha256(blob).hexdigest()}  {prefix}/{ARCHIVE_MANIFEST}\n")
    compressed = dict.fromkeys(parts, 0)
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f".{archive.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as gz:
                with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    start = raw.tell()
                    for i, (src, name, part) in enumerate(members):
                        with open(src, "rb") as f:
                            # From the open file: a symlink in the tree is packed as the file it names.
                            ti = tar.gettarinfo(arcname=name, fileobj=f)
                            ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = 0, 0, 0, "", ""
                            tar.addfile(ti, f)
                        if i + 1 == len(members) or members[i + 1][2] != part:
                            # A sync flush at the end of each part: its compressed size is exact.
                            gz.flush(zlib.Z_SYNC_FLUSH)
                            compressed[part] = raw.tell() - start
                            start = raw.tell()
                    for name, data in ((ARCHIVE_MANIFEST, blob), (CHECKSUM_FILE, "".join(sums).encode())):
                        ti = tarfile.TarInfo(f"{prefix}/{name}")
                        ti.size = len(data)
                        tar.addfile(ti, io.BytesIO(data))
        os.replace(tmp, archive)
    finally:
        tmp.unlink(missing_ok=True)
    for part, n in compressed.items():
        parts[part]["compressed_bytes"] = n
    info["archive_bytes"] = archive.stat().st_size
    info["packed_files"] = len(members)
    return info


def archive_run(run_dir: str | Path, out: str | Path, extra: Iterable[str | Path] = (), weights: str = "final") -> dict:
    """Pack the run (pack_archive) and print its size by part; the CLI and the archive_results job."""
    info = pack_archive(run_dir, out, extra, weights=weights)
    print(size_report(info))
    print(f"wrote {out}")
    return info


def archive_results(j) -> None:
    """The archive_results job (toolcall_repro.job): the run folder, its config files, the weights policy."""
    archive_run(j.option("run_dir"), j.out("archive"), j.paths("config"), weights=j.option("weights"))


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError  # pragma: no cover


def size_report(info: dict) -> str:
    """The archive's size by part, one line a part: what the archive rule prints to its log and stderr."""
    lines = [
        f"{info['archive']}: {_size(info['archive_bytes'])} on disk, {info['packed_files']} files "
        f"(archive.weights: {info['weights']})",
        f"  {'part':<20} {'files':>7} {'in tree':>10} {'in archive':>11}",
    ]
    for name, p in sorted(info["parts"].items(), key=lambda kv: -kv[1]["bytes"]):
        packed = _size(p["compressed_bytes"]) if p["archived"] else "left out"
        why = "" if p["archived"] else f"  ({p['reason']})"
        lines.append(f"  {name:<20} {p['files']:>7} {_size(p['bytes']):>10} {packed:>11}{why}")
    return "\n".join(lines)


# --- reading -------------------------------------------------------------------------------------------


def iter_members(archive: str | Path, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """(path below the archive's top folder, bytes) of the members `want` accepts, in one streaming pass.

    Stream mode ("r|gz") reads the archive once from start to end and never holds more than one member.
    """
    with tarfile.open(archive, "r|gz") as tar:
        for m in tar:
            if not m.isfile():
                continue
            rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
            if want(rel):
                yield rel, tar.extractfile(m).read()


def verify_archive(archive: str | Path) -> list[str]:
    """Re-check every checksum in the archive; return the problems (empty list = intact)."""
    problems: list[str] = []
    with tarfile.open(archive, "r:gz") as tar:
        names = [m for m in tar.getmembers() if m.isfile()]
        sums_member = next((m for m in names if m.name.endswith("/" + CHECKSUM_FILE)), None)
        if sums_member is None:
            return [f"no {CHECKSUM_FILE} in {archive}"]
        expected: dict[str, str] = {}
        for line in tar.extractfile(sums_member).read().decode().splitlines():
            digest, _, name = line.partition("  ")
            expected[name] = digest
        seen = set()
        for m in names:
            if m is sums_member:
                continue
            seen.add(m.name)
            h = hashlib.sha256()
            f = tar.extractfile(m)
            while block := f.read(1 << 20):
                h.update(block)
            if m.name not in expected:
                problems.append(f"{m.name}: not listed in {CHECKSUM_FILE}")
            elif h.hexdigest() != expected[m.name]:
                problems.append(f"{m.name}: checksum differs")
        problems += [f"{n}: listed but missing" for n in sorted(set(expected) - seen)]
    return problems


def main(argv: list[str] | None = None) -> int:
    """`python -m toolcall_repro.archive pack|verify` (`toolcall-repro verify` is the user's way in)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m toolcall_repro.archive")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="pack a run directory into a checksummed tar.gz (archive policy)")
    a.add_argument("--run-dir", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--extra", nargs="*", default=[])
    a.add_argument("--weights", choices=WEIGHTS_CHOICES, default="final")
    v = sub.add_parser("verify", help="re-check every checksum in an archive")
    v.add_argument("archive")
    args = p.parse_args(argv)
    if args.cmd == "pack":
        archive_run(args.run_dir, args.out, args.extra, weights=args.weights)
        return 0
    problems = verify_archive(args.archive)
    for line in problems:
        print(line)
    print(f"{args.archive}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 0 if not problems else 1


if __name__ == "__main__":
    import sys

    sys.exit(main())
