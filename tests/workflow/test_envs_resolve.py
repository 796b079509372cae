"""Every environment the pipeline builds resolves against the package registry, for the GPU nodes' platform.

Snakemake builds every conda env of the DAG before its first job, so one unresolvable env stops a whole
paper run (vLLM 0.24.0 needs numpy>=2 through opencv; bfcl-eval pins numpy==1.26.4). Each env's pip part
(and each pyproject extra set an install script uses) is resolved with `uv pip compile` for linux-x86_64
and the env's Python, without installing anything. flash-attn ships only an sdist that needs torch to
build, so it is checked apart: the pinned release exists and is installed after its torch.

Needs the registry (PyPI). Where it is unreachable the tests fail, naming the cause; on a machine that is
offline on purpose, `TOOLCALL_SKIP_REGISTRY=1` turns that into a skip (never set it in CI).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ENVS = REPO / "workflow" / "envs"
PLATFORM = "x86_64-manylinux_2_28"  # the GPU nodes' (and CI's) platform
REGISTRY = "https://pypi.org/simple"
# Conda packages that pip also sees, as pip requirements; any other conda dependency must be added here.
CONDA_TO_PIP = {"pytorch": "torch"}
CONDA_ONLY = {"pip", "cpuonly"}
FLASH_ATTN = "flash-attn"
ENV_FILES = sorted(p.name for p in ENVS.glob("*.yaml"))


def env_requirements(env_file: Path) -> tuple[str, list[str]]:
    """(python version, pip requirement lines) of a conda env file; `-e ../..` becomes this checkout."""
    spec = yaml.safe_load(env_file.read_text())
    python, reqs = None, []
    for dep in spec["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                if line.startswith("-e "):
                    line = f"-e {(env_file.parent / line[3:].strip()).resolve()}"
                reqs.append(line)
            continue
        name, _, version = re.match(r"([A-Za-z0-9_.-]+)\s*=?(=?)(.*)", dep).groups()
        if name == "python":
            python = version.lstrip("=")
        elif name in CONDA_TO_PIP:
            reqs.append(f"{CONDA_TO_PIP[name]}=={version.lstrip('=')}.*")
        elif name not in CONDA_ONLY:
            raise AssertionError(f"{env_file.name}: conda dependency {dep!r} has no pip mapping in this test")
    assert python, f"{env_file.name} pins no python"
    return python, reqs


def requirement_name(line: str) -> str:
    return re.split(r"[\[<>=!~ ;]", line, maxsplit=1)[0].lower().replace("_", "-")


def install_script_pins() -> dict[str, str]:
    """The VAR=value pins at the top of scripts/install-verl-env.sh."""
    text = (REPO / "scripts" / "install-verl-env.sh").read_text()
    return {m[1]: m[2].strip('"') for m in re.finditer(r"^(GPU_TORCH|GPU_VERL|GPU_LMEVAL|FLASH_ATTN_PIN)=(\S+)", text, re.M)}


def pyproject_sets() -> dict[str, tuple[str, list[str]]]:
    """What the install scripts put into .venv / .venv-verl, as requirement sets."""
    return {
        # scripts/install.sh: torch 2.13.0 first, then the package with its eval, workflow and test extras
        "pyproject[eval,workflow,test]": ("3.11", ["torch==2.13.0", f"-e {REPO}[eval,workflow,test]"]),
        "pyproject[gpu]": ("3.11", [f"-e {REPO}[gpu]"]),
        # scripts/install-verl-env.sh --gpu: training, `vllm serve` and lm-eval on one GPU (gpu_smoke.sh)
        "install-verl-env.sh --gpu": (
            "3.11",
            [*(install_script_pins()[k] for k in ("GPU_TORCH", "GPU_VERL", "GPU_LMEVAL")), "pytest>=8", "pyyaml",
             "jsonschema"],
        ),  # fmt: skip
        # scripts/install-verl-env.sh (CPU): the verl CPU tests' environment
        "install-verl-env.sh cpu": (
            "3.11",
            ["torch==2.13.0", "verl[verl-core]==0.9.1", "pytest>=8", "hypothesis>=6.100", "pyyaml", "jsonschema"],
        ),
    }


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
    pytest.fail(f"{problem}: env resolution needs the registry (offline on purpose? TOOLCALL_SKIP_REGISTRY=1)")


def uv_binary() -> str:
    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if uv is None:
        pytest.fail("uv is not installed: pip install 'toolcall-repro[test]' (or pip install uv)")
    return uv


def compile_requirements(uv: str, cache: Path, work: Path, name: str, python: str, reqs: list[str]):
    """`uv pip compile` for the GPU nodes' platform; returns (returncode, {package: version}, stderr)."""
    # --native-tls: the system certificate store (as pip and urllib use), not uv's bundled roots, which
    # miss a site's own CA (seen: "UnknownIssuer" with SSL_CERT_FILE unset)
    slug = re.sub(r"[^A-Za-z0-9]+", "_", name)
    req_file = work / f"{slug}.in"
    req_file.write_text("\n".join(reqs) + "\n")
    res = subprocess.run(
        [uv, "pip", "compile", "--quiet", "--no-header", "--native-tls", "--python-version", python,
         "--python-platform", PLATFORM, "--index-url", REGISTRY, str(req_file)],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "UV_CACHE_DIR": str(cache), "UV_NO_CONFIG": "1"},
    )
    pins = {}
    for line in res.stdout.splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
        if m:
            pins[m[1].lower().replace("_", "-")] = m[2]
    return res.returncode, pins, res.stderr


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory):
    return Path(os.environ.get("UV_CACHE_DIR") or tmp_path_factory.mktemp("uv-cache"))


@pytest.fixture(scope="module")
def resolved(tmp_path_factory, uv_cache):
    """Every env file and install set resolved once, concurrently (the registry answers in parallel)."""
    need_registry()
    uv, cache = uv_binary(), uv_cache
    work = tmp_path_factory.mktemp("reqs")
    sets = {}
    for name in ENV_FILES:
        python, reqs = env_requirements(ENVS / name)
        sets[name] = (python, [r for r in reqs if requirement_name(r) != FLASH_ATTN])
    sets.update(pyproject_sets())
    with ThreadPoolExecutor(max_workers=len(sets)) as pool:
        futures = {n: pool.submit(compile_requirements, uv, cache, work, n, *sets[n]) for n in sets}
        return {n: f.result() for n, f in futures.items()}


def test_every_env_file_is_checked():
    # A new env file is resolved as soon as it exists; these are the ones the rules name.
    assert {"cpu.yaml", "eval-vllm.yaml", "eval-bfcl.yaml", "train-verl.yaml"} <= set(ENV_FILES)
    used = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        used |= set(re.findall(r"envs/([A-Za-z0-9_.-]+\.yaml)", smk.read_text()))
    assert used <= set(ENV_FILES), f"rules name env files that do not exist: {used - set(ENV_FILES)}"


@pytest.mark.parametrize("name", [*ENV_FILES, *pyproject_sets()])
def test_env_resolves_for_gpu_nodes(resolved, name):
    code, pins, stderr = resolved[name]
    assert code == 0, f"{name} does not resolve for {PLATFORM}:\n{stderr[-3000:]}"
    assert pins, f"{name}: uv resolved nothing"


def test_vllm_envs_use_verl_vllm_stack(resolved):
    """Rollouts (verl), filtering, serving and lm-eval generate with one vLLM/torch/transformers stack."""
    stacks = {n: {k: resolved[n][1].get(k) for k in ("vllm", "torch", "transformers")} for n in
              ("train-verl.yaml", "eval-vllm.yaml", "pyproject[gpu]")}  # fmt: skip
    assert stacks["train-verl.yaml"]["vllm"] == "0.24.0"
    assert stacks["eval-vllm.yaml"] == stacks["train-verl.yaml"], stacks
    assert stacks["pyproject[gpu]"]["vllm"] == stacks["train-verl.yaml"]["vllm"], stacks
    # numpy>=2 (vLLM) and bfcl-eval's numpy==1.26.4 never meet in one env
    for name, (_, pins, _) in resolved.items():
        assert not ("vllm" in pins and "bfcl-eval" in pins), f"{name} holds both vLLM and bfcl-eval"
    assert resolved["eval-bfcl.yaml"][1]["numpy"] == "1.26.4"
    assert resolved["eval-bfcl.yaml"][1]["transformers"] == stacks["eval-vllm.yaml"]["transformers"]


def test_no_env_file_lists_flash_attn():
    """flash-attn's sdist compiles against an installed torch: a conda env's pip part cannot order that."""
    for name in ENV_FILES:
        _, reqs = env_requirements(ENVS / name)
        assert FLASH_ATTN not in {requirement_name(r) for r in reqs}, (
            f"{name} lists flash-attn: it needs torch installed before it builds (no build isolation); "
            "install it with FLASH_ATTN=1 scripts/install-verl-env.sh --gpu, and keep SDPA in conda envs"
        )


def test_gpu_install_script_matches_train_env_and_pins_a_real_flash_attn():
    pins = install_script_pins()
    _, reqs = env_requirements(ENVS / "train-verl.yaml")
    assert pins["GPU_TORCH"] in reqs and pins["GPU_VERL"] in reqs, (pins, reqs)
    need_registry()
    name, _, version = pins["FLASH_ATTN_PIN"].partition("==")
    request = urllib.request.Request(
        f"{REGISTRY}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        files = json.load(r)["files"]
    stem = f"{name.replace('-', '_')}-{version}"
    release = [f for f in files if f["filename"].startswith(stem + ".") or f["filename"].startswith(stem + "-")]
    assert release, f"{pins['FLASH_ATTN_PIN']} is not on {REGISTRY}"
    assert not all(f.get("yanked") for f in release), f"{pins['FLASH_ATTN_PIN']} is yanked"
    # Only an sdist: it must build against the env's torch, so torch is installed first, without isolation.
    script = (REPO / "scripts" / "install-verl-env.sh").read_text()
    torch_at = script.index('"${PIP[@]}" "$GPU_TORCH"')
    fa_at = script.index('--no-build-isolation "$FLASH_ATTN_PIN"')
    assert torch_at < fa_at


def test_todays_failure_is_caught(tmp_path, uv_cache):
    """The check itself: the eval env as it was (vLLM and bfcl-eval together) does not resolve."""
    need_registry()
    code, _, stderr = compile_requirements(
        uv_binary(), uv_cache, tmp_path, "old-eval",
        "3.11", ["torch==2.11.0", "vllm==0.24.0", "transformers==5.9.0", "numpy==1.26.4", "bfcl-eval==2026.3.23"],
    )  # fmt: skip
    assert code != 0
    assert "numpy" in stderr


def test_lm_eval_data_is_fetched_with_the_evaluating_versions(resolved):
    """download_lm_eval_data (cpu.yaml, submit host) fills the datasets cache that eval-vllm.yaml reads."""
    fetch, evaluate = resolved["cpu.yaml"][1], resolved["eval-vllm.yaml"][1]
    for package in ("lm-eval", "datasets"):
        assert fetch[package] == evaluate[package], (package, fetch[package], evaluate[package])
