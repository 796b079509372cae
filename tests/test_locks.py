"""The environment locks (requirements/*.lock, scripts/lock.sh) agree with what is declared and are all
that installs use. Fast and offline; tests/workflow/test_envs_resolve.py resolves them again on PyPI
within their pins.

Each check is a function that returns its problems, run on the checkout and, to show it can fail, on a
copy with one thing changed (a pin edited, a hash dropped, an unlocked install added).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("toolcall_repro_locks", REPO / "scripts" / "locks.py")
locks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(locks)

ENVS = locks.env_names()
REGENERATE = "regenerate with scripts/lock.sh (make lock)"
# The locks' target (scripts/locks.py: PYTHON_VERSION, PLATFORM), for the markers of declared requirements.
TARGET = {"python_version": locks.PYTHON_VERSION, "python_full_version": f"{locks.PYTHON_VERSION}.0",
          "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
          "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}  # fmt: skip
# Conda env file -> the lock it installs (the same lock as the venv of the same rules).
ENV_FILE_LOCKS = {"cpu.yaml": "main", "train-verl.yaml": "train-verl", "eval-vllm.yaml": "eval-vllm",
                  "eval-bfcl.yaml": "eval-bfcl", "train-verl-cu12.yaml": "train-verl-cu12",
                  "eval-vllm-cu12.yaml": "eval-vllm-cu12"}  # fmt: skip
# engines.cuda -> the GPU locks of that CUDA major (toolcall_repro.gpu_driver.env_name: <env>, <env>-cu12).
GPU_LOCKS = {13: ("train-verl", "eval-vllm"), 12: ("train-verl-cu12", "eval-vllm-cu12")}
# The options a conda env file's pip section may carry besides its `-r` line.
PIP_SECTION_OPTIONS = {"--require-hashes", "--extra-index-url https://download.pytorch.org/whl/cpu"}
INSTALL_SCRIPTS = ["install.sh", "install-verl-env.sh", "install-from-lock.sh", "install-torch.sh"]
# The scripts that run pip on a lock themselves (install-torch.sh: the torch+cpu entry, from install-from-lock.sh).
LOCK_INSTALLERS = {"install-from-lock.sh", "install-torch.sh"}


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A copy of what the locks are made from and checked against; scripts/locks.py pointed at it."""
    for rel in ["pyproject.toml", "requirements", "workflow/envs", "scripts", "profiles/slurm/config.yaml"]:
        src, dst = REPO / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    monkeypatch.setattr(locks, "REPO", tmp_path)
    monkeypatch.setattr(locks, "REQUIREMENTS", tmp_path / "requirements")
    monkeypatch.setattr(locks, "ENVS", tmp_path / "workflow" / "envs")
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


# --- the checks ---------------------------------------------------------------------------------------


def stale_problems(env: str) -> list[str]:
    recorded, current = locks.recorded_digest(env), locks.inputs_digest(env)
    if recorded != current:
        return [f"requirements/{env}.lock was made from other inputs (header {recorded}, inputs now {current}): "
                f"{REGENERATE}"]  # fmt: skip
    return []


def lock_entries(env: str) -> dict[str, tuple[str, list[str]]]:
    return locks.parse_lock(locks.lock_path(env).read_text())


def declared_problems(env: str) -> list[str]:
    """Every declared requirement is in the lock, at a version its specifier allows; the package is not."""
    pins, problems = lock_entries(env), []
    for line in locks.declared_requirements(env):
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(TARGET):
            continue
        name = locks.normalize(req.name)
        if name not in pins:
            problems.append(f"{env}: {line} is declared but not in requirements/{env}.lock: {REGENERATE}")
        elif not req.specifier.contains(Version(pins[name][0]), prereleases=True):
            problems.append(f"{env}: {line} is declared, the lock has {name}=={pins[name][0]}: {REGENERATE}")
    if locks.normalize(locks.PROJECT) in pins:
        problems.append(f"{env}: the lock holds {locks.PROJECT} itself (installs add it with --no-deps)")
    return problems


def pip_install_problems(script: str, text: str) -> list[str]:
    """Every `pip install` of an install script takes a lock, the package itself, or the optional flash-attn,
    always without resolving dependencies; install-from-lock.sh is called with envs that have a lock."""
    problems = []
    for line in text.splitlines():
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        if re.search(r"\bpip\b.*\binstall\b", code):
            lock = "--require-hashes" in code and re.search(r'-r "\$(LOCK|FIRST|SECOND)"', code)
            package = code.rstrip().endswith("--no-build-isolation -e .")
            flash_attn = code.rstrip().endswith('--no-build-isolation "$FLASH_ATTN_PIN"')
            if "--no-deps" not in code or not (lock or package or flash_attn):
                problems.append(f"{script}: an install that is not from a lock: {line.strip()}")
            if lock and script not in LOCK_INSTALLERS:
                problems.append(f"{script}: installs a lock itself instead of through install-from-lock.sh")
        elif re.search(r"\bpip\b", code) and script not in LOCK_INSTALLERS:
            problems.append(f"{script}: runs pip other than through install-from-lock.sh: {line.strip()}")
        for env in re.findall(r"install-from-lock\.sh\"? (?:--package-only )?\S+ (\S+)", code):
            env = env.strip('"')
            if env != "$LOCK_ENV" and not locks.lock_path(env).exists():
                problems.append(f"{script}: install-from-lock.sh ... {env}: no requirements/{env}.lock")
    if script == "install-from-lock.sh" and "LOCK=requirements/$ENV.lock" not in text:
        problems.append("install-from-lock.sh: $LOCK is not requirements/$ENV.lock")
    for target, name in re.findall(r'^\s*(.*)>"\$(FIRST|SECOND)"$', text, re.M):
        if not re.fullmatch(r"entries '\^[a-z]+==' |split [12] ", target):
            problems.append(
                f"{script}: ${name} is written by {target.strip()!r}, not by `entries` or `split` of the lock"
            )
    if "$FIRST" in text and 'awk -v re="$1" \'/^[^ #]/ { keep = ($0 ~ re) } keep\' "$LOCK"' not in text:
        problems.append(f"{script}: `entries` does not read the lock's entries")
    if script == "install-verl-env.sh":
        for env in re.findall(r"LOCK_ENV=(\S+)", text):
            if env != "$LOCK_ENV" and not locks.lock_path(env).exists():
                problems.append(f"install-verl-env.sh: LOCK_ENV={env}: no requirements/{env}.lock")
    return problems


def env_file_problems(env_file: Path) -> list[str]:
    """A conda env file installs its lock and only that, records the lock's current sha256, and has the
    post-deploy script that adds the package."""
    name, problems = env_file.name, []
    lock = ENV_FILE_LOCKS.get(name)
    if lock is None:
        return [f"{name}: no lock assigned in tests/test_locks.py ENV_FILE_LOCKS"]
    spec = yaml.safe_load(env_file.read_text())
    pip_lines = [line for dep in spec["dependencies"] if isinstance(dep, dict) for line in dep["pip"]]
    conda = [re.split(r"[=<>]", dep)[0] for dep in spec["dependencies"] if isinstance(dep, str)]
    if sorted(conda) != ["pip", "python"]:
        problems.append(f"{name}: conda packages besides python and pip: {conda}")
    pip_pin = [dep for dep in spec["dependencies"] if isinstance(dep, str) and re.match(r"pip\b", dep)]
    if (
        not pip_pin
        or not re.fullmatch(r"pip=(\d+)(\.\d+)*", pip_pin[0])
        or int(pip_pin[0][4:].split(".")[0]) < 24
    ):
        problems.append(
            f"{name}: conda's pip must be pinned to 24 or later (23.2 fails on extras with hashes)"
        )
    wanted = f"-r ../../requirements/{lock}.lock"
    for line in pip_lines:
        if line != wanted and line not in PIP_SECTION_OPTIONS:
            problems.append(f"{name}: pip section line {line!r} is neither {wanted!r} nor an allowed option")
    if pip_lines.count(wanted) != 1:
        problems.append(f"{name}: pip section does not install {wanted[3:]} exactly once")
    if "--require-hashes" not in pip_lines:
        problems.append(f"{name}: pip section lacks --require-hashes")
    recorded = locks.ENV_FILE_LOCK.findall(env_file.read_text())
    lock_file = locks.lock_path(lock)
    if not lock_file.exists() or recorded != [(lock, locks.file_sha256(lock_file))]:
        problems.append(f"{name}: its '# lock: requirements/{lock}.lock sha256=...' line is not the lock's "
                        f"current sha256 ({recorded}): {REGENERATE}")  # fmt: skip
    post = env_file.with_name(env_file.stem + ".post-deploy.sh")
    if not post.exists():
        problems.append(f"{name}: no {post.name} (installs the package after the lock)")
    else:
        calls = re.findall(r"install-from-lock\.sh\" --package-only python (\S+)$", post.read_text(), re.M)
        if calls != [lock]:
            problems.append(f"{post.name}: does not run install-from-lock.sh --package-only python {lock}")
    return problems


# --- the checkout ---------------------------------------------------------------------------------------


def test_every_environment_has_a_lock():
    assert {
        "main",
        "verl-cpu",
        "train-verl",
        "eval-vllm",
        "eval-bfcl",
        "train-verl-cu12",
        "eval-vllm-cu12",
    } <= set(ENVS)
    assert sorted(p.stem for p in (REPO / "requirements").glob("*.lock")) == ENVS


@pytest.mark.parametrize("env", ENVS)
def test_lock_is_current(env):
    assert stale_problems(env) == []


def test_locks_check_is_clean():
    """`python3 scripts/locks.py check` (locks and the env files' lock lines) finds nothing."""
    assert locks.stale() == []
    assert locks.main(["check"]) == 0


@pytest.mark.parametrize("env", ENVS)
def test_every_lock_entry_is_pinned_and_hashed(env):
    entries = lock_entries(env)  # raises on an unpinned/unhashed/editable/URL line
    assert entries and all(hashes for _, hashes in entries.values())
    header = locks.lock_path(env).read_text().split("\n", 5)[:5]
    assert any("scripts/lock.sh" in line for line in header) and any(
        line.startswith("# uv ") for line in header
    )


@pytest.mark.parametrize("env", ENVS)
def test_declared_requirements_are_in_the_lock(env):
    assert declared_problems(env) == []


def test_torch_builds():
    """The CPU envs take the +cpu build; the GPU envs the CUDA build verl[vllm] pins."""
    torch = {env: lock_entries(env)["torch"][0] for env in ENVS}
    assert torch["main"] == torch["verl-cpu"] == "2.13.0+cpu", torch
    assert {torch[e] for e in ("train-verl", "eval-vllm", "eval-bfcl")} == {"2.11.0"}, torch
    assert {torch[e] for e in GPU_LOCKS[12]} == {"2.10.0"}, torch  # vLLM 0.19.1's pin, CUDA 12.8 wheels
    # the hash of the one +cpu wheel is that of the file this machine's pip installs
    local = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    if local.exists():
        import hashlib

        digest = hashlib.sha256(local.read_bytes()).hexdigest()
        assert digest in lock_entries("main")["torch"][1] and digest in lock_entries("verl-cpu")["torch"][1]


def test_gpu_stacks_agree_and_numpy_camps_stay_apart():
    """Rollouts (verl), filtering, serving and lm-eval generate with one vLLM/torch/transformers stack;
    vLLM (numpy>=2) and bfcl-eval (numpy==1.26.4) never share an env; the lm-eval data the submit host
    fetches (cpu.yaml: main) is read by the same lm-eval and datasets in eval-vllm."""
    pins = {env: {k: v for k, (v, _) in lock_entries(env).items()} for env in ENVS}
    stack = ("vllm", "torch", "transformers")
    assert pins["train-verl"]["vllm"] == "0.24.0"
    assert [pins["eval-vllm"][k] for k in stack] == [pins["train-verl"][k] for k in stack]
    assert pins["eval-bfcl"]["transformers"] == pins["eval-vllm"]["transformers"]
    assert pins["eval-bfcl"]["numpy"] == pins["main"]["numpy"] == "1.26.4"
    for env, p in pins.items():
        assert not ("vllm" in p and "bfcl-eval" in p), f"{env} holds both vLLM and bfcl-eval"
        assert "flash-attn" not in p, f"{env}: flash-attn is an sdist built after torch, never in a lock"
    for package in ("lm-eval", "datasets"):
        assert pins["main"][package] == pins["eval-vllm"][package], package
    # the CUDA 12 twins: one stack between them too, with the CUDA 13 locks' verl and transformers
    assert pins["train-verl-cu12"]["vllm"] == "0.19.1"
    assert [pins["eval-vllm-cu12"][k] for k in stack] == [pins["train-verl-cu12"][k] for k in stack]
    assert pins["train-verl-cu12"]["verl"] == pins["train-verl"]["verl"] == "0.9.1"
    assert pins["train-verl-cu12"]["transformers"] == pins["train-verl"]["transformers"]


def cuda_problems(env: str, major: int) -> list[str]:
    """A GPU lock is one CUDA major's: its nvidia-cuda-runtime pin is `major`.x, and no package is built for
    another major (the nvidia-*-cuNN wheels, cuda-toolkit and cuda-bindings of another major)."""
    pins, problems = {k: v for k, (v, _) in lock_entries(env).items()}, []
    runtimes = {k: v for k, v in pins.items() if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", k)}
    if [v.split(".")[0] for v in runtimes.values()] != [str(major)]:
        problems.append(f"{env}: nvidia-cuda-runtime pins {runtimes}, not one {major}.x")
    for name, version in sorted(pins.items()):
        suffix = re.search(r"-cu(\d+)$", name)
        if suffix and int(suffix[1]) != major:
            problems.append(f"{env}: {name}=={version} is a CUDA {suffix[1]} build")
        if name in ("cuda-toolkit", "cuda-bindings", "cuda-python") and int(version.split(".")[0]) != major:
            problems.append(f"{env}: {name}=={version} is CUDA {version.split('.')[0]}")
    return problems


@pytest.mark.parametrize(("env", "major"), [(e, m) for m, envs in GPU_LOCKS.items() for e in envs])
def test_each_gpu_lock_is_one_cuda_majors(env, major):
    """engines.cuda: 12 is for drivers older than 580: one CUDA 13 package in its locks would not start."""
    from toolcall_repro import gpu_driver

    assert cuda_problems(env, major) == []
    assert gpu_driver.lock_cuda_major(locks.lock_path(env)) == major
    assert gpu_driver.env_name(GPU_LOCKS[13][GPU_LOCKS[major].index(env)], major) == env


def test_a_cuda_13_package_in_a_cuda_12_lock_is_found(copy):
    lock = copy / "requirements" / "train-verl-cu12.lock"
    edit(lock, "nvidia-nccl-cu12==2.27.5 \\", "nvidia-nccl-cu13==2.28.9 \\")
    assert cuda_problems("train-verl-cu12", 12) == [
        "train-verl-cu12: nvidia-nccl-cu13==2.28.9 is a CUDA 13 build"
    ]
    edit(lock, "nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cuda-runtime-cu12==13.0.96")
    assert any("nvidia-cuda-runtime pins" in p for p in cuda_problems("train-verl-cu12", 12))


@pytest.mark.parametrize("script", INSTALL_SCRIPTS)
def test_install_scripts_install_only_from_locks(script):
    assert pip_install_problems(script, (REPO / "scripts" / script).read_text()) == []


def test_install_scripts_use_the_locks_they_should():
    text = {s: (REPO / "scripts" / s).read_text() for s in INSTALL_SCRIPTS}
    assert "install-from-lock.sh .venv/bin/python main" in text["install.sh"]
    assert re.search(r"^\s*cpu:\) LOCK_ENV=verl-cpu ;;", text["install-verl-env.sh"], re.M)
    assert re.search(r"^\s*--gpu: \| --gpu:13\) LOCK_ENV=train-verl ;;", text["install-verl-env.sh"], re.M)
    assert re.search(r"^\s*--gpu:12\) LOCK_ENV=train-verl-cu12 ;;", text["install-verl-env.sh"], re.M)
    # the lock install: hash-checked, no dependency resolution; the package: no resolution, no build env
    install = text["install-from-lock.sh"]
    # the wheels (entries of several files) binary only, then the one-file entries built without isolation
    wheels = '-m pip install -q --require-hashes --no-deps --only-binary :all: -r "$FIRST"'
    sdists = '-m pip install -q --require-hashes --no-deps --no-build-isolation -r "$SECOND"'
    assert wheels in install and sdists in install
    # the build backend first, so that sdists of the lock build without an isolated (unpinned) build env
    setuptools = install.index("entries '^setuptools==' >\"$FIRST\"")
    assert setuptools < install.index('--no-deps -r "$FIRST"') < install.index(wheels) < install.index(sdists)
    assert install.index('split 2 >"$FIRST"') < install.index(wheels) and 'split 1 >"$SECOND"' in install
    # the lock's torch+cpu entry alone, before the rest (scripts/install-torch.sh): only it is ever installed
    # with PyTorch's CPU index, hash-checked too (behaviour: tests/workflow/test_install_torch_index.py)
    torch_step = 'bash scripts/install-torch.sh "$PY" "$LOCK"\n'
    assert setuptools < install.index(torch_step) < install.index(wheels) and "index-url" not in install
    torch = text["install-torch.sh"]
    # one pip call for the entry (hash-checked, no dependencies, a constraint file set aside), asked with
    # pip's own configuration first, then with the index
    entry = 'PIP_CONSTRAINT=/dev/null "$PY" -m pip install -q --disable-pip-version-check --require-hashes --no-deps "$@" -r "$FIRST"'
    torch_line = 'pip_entry --index-url "$INDEX" --timeout 15 --retries 1'
    assert entry in torch and torch_line in torch
    assert torch.count('index-url "$') == 1 and "INDEX=${TORCH_INDEX_URL:-" in torch
    assert torch.index("entries '^torch==' >\"$FIRST\"") < torch.index(torch_line)
    assert "-m pip install -q --no-deps --no-build-isolation -e ." in text["install-from-lock.sh"]
    assert "toolcall-repro-lock.json" in text["install-from-lock.sh"]


@pytest.mark.parametrize("env_file", sorted(ENV_FILE_LOCKS))
def test_conda_env_file_installs_its_lock_only(env_file):
    assert env_file_problems(REPO / "workflow" / "envs" / env_file) == []


def test_every_env_file_is_checked():
    files = {p.name for p in (REPO / "workflow" / "envs").glob("*.yaml")}
    assert files == set(ENV_FILE_LOCKS)
    used = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        used |= set(re.findall(r"envs/([A-Za-z0-9_.-]+\.yaml)", smk.read_text()))
    assert used <= files, f"rules name env files that do not exist: {used - files}"


def test_env_file_paths_reach_the_checkout_from_where_conda_reads_them():
    """conda runs the pip section beside Snakemake's copy of the env file, <conda-prefix>/<hash>.yaml, and
    Snakemake runs <conda-prefix>/<hash>.post-deploy.sh: `../..` is the checkout from there as from
    workflow/envs/ only with the conda-prefix .snakemake/conda (the slurm profile's)."""
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["conda-prefix"] == ".snakemake/conda"
    for where in (REPO / "workflow" / "envs", REPO / ".snakemake" / "conda"):
        assert (where / "../../requirements/main.lock").resolve() == locks.lock_path("main")
        assert (
            where / "../../scripts/install-from-lock.sh"
        ).resolve() == REPO / "scripts" / "install-from-lock.sh"


def test_installed_env_names_a_current_lock():
    """A venv made by the install scripts records its lock; it must be today's (else rerun the install)."""
    marker = Path(sys.prefix) / "toolcall-repro-lock.json"
    if not marker.exists():
        pytest.skip(
            f"{sys.prefix} was not installed from a lock (no {marker.name}: scripts/install.sh writes it)"
        )
    recorded = json.loads(marker.read_text())
    lock = REPO / recorded["lock"]
    assert recorded["lock"] == f"requirements/{recorded['env']}.lock" and lock.exists(), recorded
    assert recorded["sha256"] == locks.file_sha256(lock), (
        f"{sys.prefix} was installed from another {recorded['lock']}: rerun scripts/install.sh "
        "(or install-verl-env.sh)"
    )


# --- each check fails when it should ------------------------------------------------------------------


def test_an_edited_pin_makes_the_lock_stale_and_disagree(copy):
    edit(copy / "requirements" / "eval-bfcl.in", "\nnumpy==1.26.4", "\nnumpy==1.26.3")
    assert stale_problems("eval-bfcl") and "scripts/lock.sh" in stale_problems("eval-bfcl")[0]
    assert any(
        "numpy==1.26.3 is declared, the lock has numpy==1.26.4" in p for p in declared_problems("eval-bfcl")
    )
    assert stale_problems("main") == []  # other locks stay current


def test_an_edited_pin_of_a_cuda_12_lock_makes_it_stale_and_only_it(copy):
    edit(copy / "requirements" / "train-verl-cu12.in", "\nvllm==0.19.1", "\nvllm==0.19.0")
    assert stale_problems("train-verl-cu12")
    assert any(
        "vllm==0.19.0 is declared, the lock has vllm==0.19.1" in p
        for p in declared_problems("train-verl-cu12")
    )
    assert stale_problems("train-verl") == stale_problems("eval-vllm-cu12") == []
    assert any("train-verl-cu12.lock is stale" in p for p in locks.stale())


def test_a_cuda_12_env_file_with_another_lock_line_is_found(copy):
    edit(copy / "workflow" / "envs" / "eval-vllm-cu12.yaml", "-r ../../requirements/eval-vllm-cu12.lock",
         "-r ../../requirements/eval-vllm.lock")  # fmt: skip
    problems = env_file_problems(copy / "workflow" / "envs" / "eval-vllm-cu12.yaml")
    assert any("does not install ../../requirements/eval-vllm-cu12.lock exactly once" in p for p in problems)


def test_an_edited_pyproject_dependency_makes_the_locks_that_name_it_stale(copy):
    edit(copy / "pyproject.toml", '"snakemake==9.27.1"', '"snakemake==9.28.0"')
    assert stale_problems("main")  # main.in names the workflow extra
    assert any("snakemake==9.28.0" in p for p in declared_problems("main"))
    assert stale_problems("verl-cpu") == []  # which does not
    edit(copy / "pyproject.toml", '"pandas>=2.2"', '"pandas>=2.2", "polars>=1"')
    assert all(stale_problems(env) for env in ENVS)  # every env installs the package's dependencies
    assert any("polars>=1 is declared but not in" in p for p in declared_problems("eval-vllm"))


def test_a_comment_or_an_unrelated_pyproject_change_is_not_staleness(copy):
    edit(copy / "requirements" / "main.in", "pip\n", "pip  # pip itself\n# a note\n")
    edit(copy / "pyproject.toml", "line-length = 110", "line-length = 120")
    assert all(stale_problems(env) == [] for env in ENVS)


def test_an_unhashed_or_unpinned_or_editable_line_is_refused(copy):
    path = copy / "requirements" / "main.lock"
    text = path.read_text()
    for broken in (
        re.sub(
            r"(six==[^ ]+) \\\n(    --hash=sha256:[0-9a-f]{64} \\\n)*    --hash=sha256:[0-9a-f]{64}\n",
            r"\1 \\\n",
            text,
        ),
        text.replace("six==", "six>=", 1),
        text + "-e .\n",
        text + "https://example.org/x-1.0-py3-none-any.whl\n",
    ):
        path.write_text(broken)
        with pytest.raises(ValueError):
            lock_entries("main")


def test_a_package_missing_from_the_lock_is_found(copy):
    path = copy / "requirements" / "eval-vllm.lock"
    text = path.read_text()
    path.write_text(re.sub(r"^openai==.*?(?=^\S)", "", text, count=1, flags=re.M | re.S))
    assert any("openai>=1.0 is declared but not in" in p for p in declared_problems("eval-vllm"))


def test_unlocked_installs_in_scripts_are_found(copy):
    for script, line in [
        ("install.sh", ".venv/bin/python -m pip install -q torch==2.13.0"),
        ("install.sh", '.venv/bin/python -m pip install -q -e ".[eval,workflow,test]"'),
        (
            "install-verl-env.sh",
            '"$VENV/bin/python" -m pip install -q --no-build-isolation "$FLASH_ATTN_PIN"',
        ),
        ("install-verl-env.sh", 'bash scripts/install-from-lock.sh "$VENV/bin/python" verl-gpu'),
        ("install-verl-env.sh", 'PIP=("$VENV/bin/python" -m pip)'),
        ("install-from-lock.sh", '"$PY" -m pip install -q --no-deps -r "$LOCK"'),
        ("install-from-lock.sh", '"$PY" -m pip install -q --extra-index-url "$TORCH_INDEX_URL" -r "$LOCK"'),
        ("install-torch.sh", '"$PY" -m pip install -q --no-deps --index-url "$INDEX" torch'),
    ]:
        text = (REPO / "scripts" / script).read_text() + line + "\n"
        assert pip_install_problems(script, text), (script, line)


def test_a_first_install_not_taken_from_the_lock_is_found():
    for script, old, new in [
        ("install-torch.sh", "entries '^torch==' >", "echo torch==2.13.0 >"),
        ("install-torch.sh", "awk -v re=", "grep -E "),
        ("install-from-lock.sh", "awk -v re=", "grep -E "),
        ("install-from-lock.sh", 'split 1 >"$SECOND"', 'echo torch==2.13.0 >"$SECOND"'),
    ]:
        text = (REPO / "scripts" / script).read_text()
        assert old in text and pip_install_problems(script, text) == []
        assert pip_install_problems(script, text.replace(old, new)), new


def test_env_file_drift_is_found(copy):
    envs = copy / "workflow" / "envs"
    edit(
        envs / "cpu.yaml",
        "- -r ../../requirements/main.lock",
        "- -r ../../requirements/main.lock\n      - -e ../..",
    )
    edit(envs / "eval-bfcl.yaml", "  - pip=24\n", "  - pip=24\n  - pytorch=2.5\n")
    edit(envs / "train-verl.yaml", "  - pip=24\n", "  - pip=23.2\n")
    edit(envs / "eval-vllm.yaml", "requirements/eval-vllm.lock\n", "requirements/eval-bfcl.lock\n")
    assert any("pinned to 24" in p for p in env_file_problems(envs / "train-verl.yaml"))
    (envs / "train-verl.post-deploy.sh").unlink()
    # the CUDA 12 twins, copied from the CUDA 13 files and left half-edited: the package installed against
    # the CUDA 13 lock's marker; the lock line (its sha256 right) of the CUDA 13 lock
    edit(envs / "train-verl-cu12.post-deploy.sh", "python train-verl-cu12\n", "python train-verl\n")
    cu13_line = (
        f"# lock: requirements/eval-vllm.lock sha256={locks.file_sha256(locks.lock_path('eval-vllm'))}"
    )
    edit(envs / "eval-vllm-cu12.yaml", locks.ENV_FILE_LOCK.search((envs / "eval-vllm-cu12.yaml").read_text())[0],
         cu13_line)  # fmt: skip
    for name in ENV_FILE_LOCKS:
        assert env_file_problems(envs / name), name
    assert locks.stale() == []
    # a new lock without `scripts/lock.sh` rewriting the env file's sha256 line (Snakemake would reuse the env)
    (copy / "requirements" / "main.lock").write_text(locks.lock_path("main").read_text() + "# changed\n")
    assert locks.stale()


def test_lock_sh_rewrites_the_env_files_lock_line(copy):
    (copy / "requirements" / "main.lock").write_text(locks.lock_path("main").read_text() + "# changed\n")
    assert env_file_problems(copy / "workflow" / "envs" / "cpu.yaml")
    assert locks.sync_env_files() == [copy / "workflow" / "envs" / "cpu.yaml"]
    assert env_file_problems(copy / "workflow" / "envs" / "cpu.yaml") == []


def test_lock_differences_name_what_an_install_would_miss_and_only_that():
    """The registry check's comparison (tests/workflow/test_envs_resolve.py): a file the registry added
    to a locked release is not a difference (installs take files by locked hash only); a version moved,
    a locked file dropped, a package missing or left over each is, named."""
    committed = {"a": ("1.0", ["h1", "h2"]), "b": ("2.0", ["h3"]), "gone": ("0.1", ["h9"])}
    fresh = {"a": ("1.0", ["h1", "h2", "h-new-wheel"]), "b": ("2.0", ["h3"]), "gone": ("0.1", ["h9"])}
    assert locks.lock_differences(fresh, committed) == []
    fresh = {"a": ("1.0", ["h1"]), "b": ("2.1", ["h4"]), "new": ("3.0", ["h5"])}
    assert locks.lock_differences(fresh, committed) == [
        "a==1.0: the registry no longer serves 1 of the lock's 2 files",
        "b: lock 2.0, resolves to 2.1",
        "gone==0.1 is in the lock, no longer resolves",
        "new==3.0 resolves now, is not in the lock",
    ]
