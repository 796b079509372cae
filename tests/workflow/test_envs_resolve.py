"""Every lock still follows from its declared inputs and installs from the registry, for the GPU nodes'
platform.

Snakemake builds every conda env of the DAG before its first job, and every install takes a lock
(requirements/<env>.lock): a lock that no longer follows from its inputs (a .in file or pyproject.toml edited
without `scripts/lock.sh`, a pin the registry yanked) would install something nobody declared, or nothing.
Each .in file is resolved here as `scripts/lock.sh` does (`uv pip compile --generate-hashes` for linux
x86_64 and Python 3.11, releases after scripts/locks.py's EXCLUDE_NEWER ignored, nothing installed) with
every package held at its locked version (`locks.resolve_within_lock`), and must come out as the lock:
same packages and versions, every locked file still served (same hashes). Not the newest resolution: the registry can gain files dated before
EXCLUDE_NEWER after a lock was made (boto3 1.44.18 did), and a lock is the record of what installs, not
a forecast of what the resolver picks on test day; taking newer releases is `make lock`, a commit. The
offline checks of the locks (inputs digest, declared pins, hashes, which lock each install uses) are
tests/test_locks.py. flash-attn ships only an sdist that
needs torch to build, so it stays out of the locks and is checked apart: the pinned release exists.

Needs the registry (PyPI; torch==2.13.0+cpu from /opt/wheels, or the PyTorch CPU index where that is
missing). Where it is unreachable the tests fail, naming the cause; on a machine that is offline on purpose,
`TOOLCALL_SKIP_REGISTRY=1` turns that into a skip (never set it in CI).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("toolcall_repro_locks", REPO / "scripts" / "locks.py")
locks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(locks)

REGISTRY = locks.INDEX_URL
FLASH_ATTN_PIN = "flash-attn==2.8.3"  # scripts/install-verl-env.sh: FLASH_ATTN_PIN


def registry_reachable() -> str | None:
    try:
        with urllib.request.urlopen(f"{REGISTRY}/uv/", timeout=20) as r:
            r.read(1)
        return None
    except OSError as exc:
        return f"{REGISTRY} unreachable: {exc}"


def need_registry() -> None:
    problem = registry_reachable()
    if problem is None:
        return
    if os.environ.get("TOOLCALL_SKIP_REGISTRY") == "1":
        pytest.skip(f"{problem} (TOOLCALL_SKIP_REGISTRY=1)")
    pytest.fail(
        f"{problem}: lock resolution needs the registry (offline on purpose? TOOLCALL_SKIP_REGISTRY=1)"
    )


def uv_binary() -> str:
    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if uv is None:
        pytest.fail("uv is not installed: pip install 'toolcall-repro[test]' (or pip install uv)")
    return uv


def compiled(env: str, uv: str) -> dict | str:
    """The lock entries uv resolves for env within its lock's pins, or uv's error."""
    try:
        return locks.resolve_within_lock(env, uv)
    except RuntimeError as exc:
        return str(exc)


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory):
    return Path(os.environ.get("UV_CACHE_DIR") or tmp_path_factory.mktemp("uv-cache"))


@pytest.fixture(scope="module")
def resolved(uv_cache):
    """Every lock compiled once, concurrently (the registry answers in parallel)."""
    need_registry()
    uv = uv_binary()
    old = os.environ.get("UV_CACHE_DIR")
    os.environ["UV_CACHE_DIR"] = str(uv_cache)
    try:
        with ThreadPoolExecutor(max_workers=len(locks.env_names())) as pool:
            futures = {env: pool.submit(compiled, env, uv) for env in locks.env_names()}
            return {env: f.result() for env, f in futures.items()}
    finally:
        if old is None:
            os.environ.pop("UV_CACHE_DIR", None)
        else:
            os.environ["UV_CACHE_DIR"] = old


@pytest.mark.parametrize("env", locks.env_names())
def test_lock_is_what_its_inputs_resolve_to(resolved, env):
    fresh = resolved[env]
    assert not isinstance(fresh, str), (
        f"requirements/{env}.in does not resolve for {locks.PLATFORM} within its lock's pins "
        f"(regenerate with scripts/lock.sh, make lock):\n{fresh}"
    )
    committed = locks.parse_lock(locks.lock_path(env).read_text())
    diff = locks.lock_differences(fresh, committed)
    assert not diff, (
        f"requirements/{env}.lock is not what its inputs resolve to within its pins: regenerate with "
        f"scripts/lock.sh (make lock):\n  " + "\n  ".join(diff[:30])
    )


def copy_inputs(tmp_path, monkeypatch, uv_cache) -> None:
    """locks.py pointed at a copy of the inputs and locks under tmp_path."""
    for rel in ("pyproject.toml", "requirements"):
        (shutil.copytree if (REPO / rel).is_dir() else shutil.copy)(REPO / rel, tmp_path / rel)
    monkeypatch.setattr(locks, "REPO", tmp_path)
    monkeypatch.setattr(locks, "REQUIREMENTS", tmp_path / "requirements")
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))


def test_a_changed_input_fails_the_check(tmp_path, monkeypatch, uv_cache):
    """The check itself: an edited pin (eval-bfcl's soundfile held at 0.12.1, below the lock's) does not
    resolve within the lock's pins, and the failure names the package."""
    need_registry()
    copy_inputs(tmp_path, monkeypatch, uv_cache)
    committed = locks.parse_lock(locks.lock_path("eval-bfcl").read_text())
    assert committed["soundfile"][0] != "0.12.1"
    path = tmp_path / "requirements" / "eval-bfcl.in"
    path.write_text(path.read_text().replace("\nsoundfile>=0.12\n", "\nsoundfile==0.12.1\n"))
    fresh = compiled("eval-bfcl", uv_binary())
    assert isinstance(fresh, str), "a lock whose inputs now exclude one of its pins passed the check"
    assert "soundfile" in fresh


def test_a_new_requirement_or_a_dropped_one_fails_the_check(tmp_path, monkeypatch, uv_cache):
    """An input that adds a package (toolz, not in eval-bfcl's lock) resolves to something the lock
    lacks; a lock entry nothing requires any more is named as left over."""
    need_registry()
    copy_inputs(tmp_path, monkeypatch, uv_cache)
    lock = locks.lock_path("eval-bfcl")
    committed = locks.parse_lock(lock.read_text())
    assert "toolz" not in committed
    path = tmp_path / "requirements" / "eval-bfcl.in"
    declared = path.read_text()
    path.write_text(declared + "toolz\n")
    fresh = compiled("eval-bfcl", uv_binary())
    assert not isinstance(fresh, str), fresh
    version, hashes = fresh["toolz"]
    assert f"toolz=={version} resolves now, is not in the lock" in locks.lock_differences(fresh, committed)
    # Back to the declared inputs, the lock now holding toolz as well: it is left over.
    path.write_text(declared)
    lock.write_text(
        lock.read_text() + f"toolz=={version} \\\n" + "".join(f"    --hash=sha256:{h}\n" for h in hashes)
    )
    fresh = compiled("eval-bfcl", uv_binary())
    assert not isinstance(fresh, str), fresh
    assert locks.lock_differences(fresh, locks.parse_lock(lock.read_text())) == [
        f"toolz=={version} is in the lock, no longer resolves"
    ]


def test_a_lock_older_than_the_registrys_newest_still_passes(tmp_path, monkeypatch, uv_cache):
    """What the check leaves alone: a lock made when the registry held less (here: compiled with releases
    after 2019-06-01 ignored) is still what its inputs resolve to within its pins, although resolving
    afresh now gives a newer release; only `make lock` moves a lock."""
    need_registry()
    copy_inputs(tmp_path, monkeypatch, uv_cache)
    (tmp_path / "requirements" / "tiny.in").write_text("six\n")
    uv = uv_binary()
    today = locks.EXCLUDE_NEWER
    monkeypatch.setattr(locks, "EXCLUDE_NEWER", "2019-06-01T00:00:00Z")
    old = locks.render("tiny", uv)
    monkeypatch.setattr(locks, "EXCLUDE_NEWER", today)
    locks.lock_path("tiny").write_text(old)
    pinned = locks.parse_lock(old)
    newest = locks.parse_lock(locks.render("tiny", uv))
    assert newest["six"][0] != pinned["six"][0]
    assert locks.lock_differences(compiled("tiny", uv), pinned) == []


def test_vllm_and_bfcl_eval_cannot_share_an_env(tmp_path, uv_cache):
    """Why eval-vllm and eval-bfcl are two envs: together they do not resolve (numpy)."""
    need_registry()
    reqs = tmp_path / "old-eval.in"
    reqs.write_text("torch==2.11.0\nvllm==0.24.0\ntransformers==5.9.0\nnumpy==1.26.4\nbfcl-eval==2026.3.23\n")
    res = subprocess.run(
        [
            uv_binary(),
            "pip",
            "compile",
            "--quiet",
            "--no-config",
            "--native-tls",
            "--python-version",
            locks.PYTHON_VERSION,
            "--python-platform",
            locks.PLATFORM,
            "--index-url",
            REGISTRY,
            "--exclude-newer",
            locks.EXCLUDE_NEWER,
            str(reqs),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "UV_CACHE_DIR": str(uv_cache), "UV_NO_CONFIG": "1"},
    )
    assert res.returncode != 0
    assert "numpy" in res.stderr


def test_gpu_install_script_pins_a_real_flash_attn():
    """flash-attn, the one package outside the locks: the pinned release exists as an sdist, and the script
    builds it after the lock put torch in (no build isolation, no dependency resolution)."""
    script = (REPO / "scripts" / "install-verl-env.sh").read_text()
    assert f"FLASH_ATTN_PIN={FLASH_ATTN_PIN}\n" in script
    assert script.index("install-from-lock.sh") < script.index(
        '--no-deps --no-build-isolation "$FLASH_ATTN_PIN"'
    )
    need_registry()
    name, _, version = FLASH_ATTN_PIN.partition("==")
    request = urllib.request.Request(
        f"{REGISTRY}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        files = json.load(r)["files"]
    stem = f"{name.replace('-', '_')}-{version}"
    release = [
        f for f in files if f["filename"].startswith(stem + ".") or f["filename"].startswith(stem + "-")
    ]
    assert release, f"{FLASH_ATTN_PIN} is not on {REGISTRY}"
    assert not all(f.get("yanked") for f in release), f"{FLASH_ATTN_PIN} is yanked"
