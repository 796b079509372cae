"""Every lock is what its declared inputs resolve to on the registry today, for the GPU nodes' platform.

Snakemake builds every conda env of the DAG before its first job, and every install takes a lock
(requirements/<env>.lock): a lock that no longer follows from its inputs (a .in file or pyproject.toml edited
without `scripts/lock.sh`, a pin the registry yanked) would install something nobody declared. Each lock is
compiled again here exactly as `scripts/lock.sh` does (`uv pip compile --generate-hashes` for linux x86_64
and Python 3.11, releases after scripts/locks.py's EXCLUDE_NEWER ignored, nothing installed) and must come
out with the same packages, versions and hashes. The offline checks of the locks (inputs digest, declared
pins, hashes, which lock each install uses) are tests/test_locks.py. flash-attn ships only an sdist that
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
    """The lock entries uv resolves for env now, or uv's error."""
    try:
        return locks.parse_lock(locks.render(env, uv))
    except RuntimeError as exc:
        return str(exc)


def differences(env: str, fresh: dict, committed: dict) -> list[str]:
    out = []
    for name in sorted(set(fresh) | set(committed)):
        a, b = committed.get(name), fresh.get(name)
        if a is None:
            out.append(f"{name}=={b[0]} resolves now, is not in the lock")
        elif b is None:
            out.append(f"{name}=={a[0]} is in the lock, no longer resolves")
        elif a[0] != b[0]:
            out.append(f"{name}: lock {a[0]}, resolves to {b[0]}")
        elif sorted(a[1]) != sorted(b[1]):
            out.append(f"{name}=={a[0]}: the registry's files differ from the lock's hashes")
    return out


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
        f"requirements/{env}.in does not resolve for {locks.PLATFORM}:\n{fresh}"
    )
    committed = locks.parse_lock(locks.lock_path(env).read_text())
    diff = differences(env, fresh, committed)
    assert not diff, (
        f"requirements/{env}.lock is not what its inputs resolve to: regenerate with scripts/lock.sh "
        f"(make lock):\n  " + "\n  ".join(diff[:30])
    )


def test_a_changed_input_resolves_to_another_lock(tmp_path, monkeypatch, uv_cache):
    """The check itself: an edited pin (eval-bfcl's soundfile held at 0.12.1, below the lock's) resolves
    to something other than the committed lock."""
    need_registry()
    for rel in ("pyproject.toml", "requirements"):
        (shutil.copytree if (REPO / rel).is_dir() else shutil.copy)(REPO / rel, tmp_path / rel)
    committed = locks.parse_lock(locks.lock_path("eval-bfcl").read_text())
    assert committed["soundfile"][0] != "0.12.1"
    path = tmp_path / "requirements" / "eval-bfcl.in"
    path.write_text(path.read_text().replace("\nsoundfile>=0.12\n", "\nsoundfile==0.12.1\n"))
    monkeypatch.setattr(locks, "REPO", tmp_path)
    monkeypatch.setattr(locks, "REQUIREMENTS", tmp_path / "requirements")
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))
    fresh = compiled("eval-bfcl", uv_binary())
    assert not isinstance(fresh, str), fresh
    assert "soundfile: lock " + committed["soundfile"][0] + ", resolves to 0.12.1" in differences(
        "eval-bfcl", fresh, committed
    )


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
