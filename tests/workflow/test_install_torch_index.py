"""scripts/install-torch.sh: a lock's torch==<v>+cpu entry comes from where pip finds it, else from PyTorch's
CPU index, hash-checked; an unreachable index fails in seconds with one clear message.

No network: pip's configuration is neutralised (PIP_CONFIG_FILE=/dev/null), its index ("PyPI") is an empty
local one, and the script runs as a copy whose default index URL is a local PEP 503 file index holding a
small stand-in wheel named like torch (or a URL that cannot answer). Each case installs into its own copy
of one fresh venv, whose pip is the one `python -m venv` brings, as in a first `make run`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.workflow

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install-torch.sh"
DEFAULT_INDEX = "https://download.pytorch.org/whl/cpu"
VERSION = "2.13.0+cpu"
WHEEL = f"torch-{VERSION}-py3-none-any.whl"
UNREACHABLE = "http://127.0.0.1:9/whl/cpu"  # the discard port: connection refused, at once


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(folder: Path, marker: str = "stand-in") -> Path:
    """A minimal wheel of a package `torch` at VERSION: torch/__init__.py and its dist-info."""
    dist_info = f"torch-{VERSION}.dist-info"
    files = {
        "torch/__init__.py": f'__version__ = "{VERSION}"\nSTAND_IN = "{marker}"\n',
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {VERSION}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},{record_hash(text.encode())},{len(text.encode())}\n" for name, text in files.items()
    )
    files[f"{dist_info}/RECORD"] = record + f"{dist_info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / WHEEL
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def simple_index(root: Path, wheel: Path | None) -> str:
    """A PEP 503 index at root with a torch page linking wheel (with its #sha256, as PyTorch's does), or
    linking nothing (PyPI: torch is there, its +cpu builds are not). Returns its file:// URL."""
    page = root / "torch"
    page.mkdir(parents=True)
    link = ""
    if wheel is not None:
        shutil.copy(wheel, page / wheel.name)
        link = f'<a href="{wheel.name.replace("+", "%2B")}#sha256={sha256(wheel)}">{wheel.name}</a>'
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>{link}</body></html>\n")
    (root / "index.html").write_text('<!DOCTYPE html><html><body><a href="torch/">torch</a></body></html>\n')
    return root.as_uri()


def write_lock(path: Path, torch_hash: str) -> Path:
    """A stand-in lock: the torch+cpu entry between two others (only it must reach pip)."""
    other = "0" * 64
    path.write_text(
        "# stand-in lock\n"
        f"six==1.17.0 \\\n    --hash=sha256:{other}\n    # via -r requirements/main.in\n"
        f"torch=={VERSION} \\\n    --hash=sha256:{torch_hash}\n    # via\n    #   -r requirements/main.in\n"
        f"zipp==3.23.0 \\\n    --hash=sha256:{other}\n"
    )
    return path


@pytest.fixture(scope="module")
def template_venv(tmp_path_factory):
    venv = tmp_path_factory.mktemp("template") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv


@pytest.fixture
def setup(tmp_path, template_venv):
    """This case's venv, wheel, "remote" index, empty "PyPI" and a neutral pip environment."""
    venv = tmp_path / "venv"
    shutil.copytree(template_venv, venv, symlinks=True)
    wheel = build_wheel(tmp_path / "wheels")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIP_") and k != "TORCH_INDEX_URL" and not k.lower().endswith("_proxy")
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=simple_index(tmp_path / "pypi", None),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PIP_CACHE_DIR=str(tmp_path / "pip-cache"),
    )
    return {
        "tmp": tmp_path,
        "python": venv / "bin" / "python",
        "wheel": wheel,
        "remote": simple_index(tmp_path / "remote", wheel),
        "lock": write_lock(tmp_path / "main.lock", sha256(wheel)),
        "env": env,
    }


def run_script(setup, default_index: str, lock: Path | None = None, python: Path | None = None, **env):
    """Run a copy of install-torch.sh whose default index is default_index; returns (process, seconds)."""
    text = SCRIPT.read_text()
    line = f"\nDEFAULT_INDEX={DEFAULT_INDEX}\n"
    assert text.count(line) == 1, line
    script = setup["tmp"] / "install-torch.sh"
    script.write_text(text.replace(line, f"\nDEFAULT_INDEX={default_index}\n"))
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(script), str(python or setup["python"]), str(lock or setup["lock"])],
        env={**setup["env"], **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, time.monotonic() - start


def installed(setup) -> str | None:
    """The installed torch's STAND_IN marker, None without torch."""
    code = "import importlib.metadata as m, torch; assert m.version('torch') == torch.__version__; print(torch.STAND_IN)"
    proc = subprocess.run([str(setup["python"]), "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def test_torch_comes_from_the_cpu_index_when_pip_finds_none_and_a_rerun_does_nothing(setup):
    proc, _ = run_script(setup, setup["remote"])
    assert proc.returncode == 0, proc.stderr
    assert (
        f"torch=={VERSION} is not where pip looks" in proc.stderr
        and f"trying {setup['remote']}" in proc.stderr
    )
    assert installed(setup) == "stand-in"
    # idempotent: installed at the lock's version, so no pip run and no index asked (even an unreachable one)
    proc, _ = run_script(setup, UNREACHABLE)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("where", ["PIP_CONSTRAINT", "pip.conf"])
def test_a_constraint_file_neither_stops_the_fallback_nor_refuses_the_locked_file(setup, where):
    """This machine's system-wide pip configuration names a constraint file (torch<=2.14.1): under `env -i`
    pip then refused the locked torch==2.13.0+cpu with ResolutionImpossible, not "No matching
    distribution", and the install stopped at once. The wheel comes from the index all the same."""
    constraints = setup["tmp"] / "constraints.txt"
    constraints.write_text("torch<=2.14.1\n")
    extra = {"PIP_CONSTRAINT": str(constraints)}
    if where == "pip.conf":
        conf = setup["tmp"] / "pip.conf"
        conf.write_text(f"[global]\nconstraint = {constraints}\n")
        extra = {"PIP_CONFIG_FILE": str(conf)}
    proc, _ = run_script(setup, setup["remote"], **extra)
    assert proc.returncode == 0, proc.stderr
    assert f"trying {setup['remote']}" in proc.stderr and installed(setup) == "stand-in"


def test_any_refusal_but_a_hash_mismatch_goes_on_to_the_index(setup, tmp_path):
    """pip's wording is not the test: a pip that fails with words the script has never seen (a stand-in
    python whose `pip install` without --index-url prints them) still leads to the index."""
    shim = tmp_path / "python"
    shim.write_text(
        "#!/bin/sh\ncase \"$*\" in *--index-url*) exec " + str(setup["python"]) + ' "$@" ;; '
        '*"pip install"*) echo "ERROR: words of a later pip" >&2; exit 1 ;; *) exec '
        + str(setup["python"]) + ' "$@" ;; esac\n'
    )
    shim.chmod(0o755)
    proc, _ = run_script(setup, setup["remote"], python=shim)
    assert proc.returncode == 0, proc.stderr
    assert "pip: ERROR: words of a later pip" in proc.stderr and "trying" in proc.stderr
    assert installed(setup) == "stand-in"


def test_a_file_whose_sha256_is_not_the_locks_is_refused(setup):
    lock = write_lock(setup["tmp"] / "other.lock", "1" * 64)
    proc, _ = run_script(setup, setup["remote"], lock=lock)
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stderr and "1" * 64 in proc.stderr, proc.stderr
    assert f"could not install torch=={VERSION}" in proc.stderr and "TORCH_INDEX_URL" not in proc.stderr
    assert installed(setup) is None


@pytest.mark.parametrize("index", [UNREACHABLE, "file:///nonexistent/whl/cpu"])
def test_an_unreachable_index_fails_fast_with_one_clear_message(setup, index):
    proc, seconds = run_script(setup, index)
    assert proc.returncode == 1
    assert f"{index} was unreachable or has no file of it" in proc.stderr, proc.stderr
    assert "TORCH_INDEX_URL" in proc.stderr and "PIP_FIND_LINKS" in proc.stderr
    assert seconds < 30, seconds  # --timeout 15 --retries 1; a refused connection fails at once
    assert installed(setup) is None


def test_the_wheel_pip_finds_by_its_own_configuration_is_taken_without_asking_the_index(setup):
    proc, _ = run_script(setup, UNREACHABLE, PIP_FIND_LINKS=str(setup["wheel"].parent))
    assert proc.returncode == 0, proc.stderr
    assert "trying" not in proc.stderr
    assert installed(setup) == "stand-in"


def test_a_found_wheel_of_another_sha256_stops_without_asking_the_index(setup):
    other = build_wheel(setup["tmp"] / "other-wheels", marker="other")
    proc, _ = run_script(setup, setup["remote"], PIP_FIND_LINKS=str(other.parent))
    assert proc.returncode == 1 and "DO NOT MATCH THE HASHES" in proc.stderr, proc.stderr
    assert "trying" not in proc.stderr and installed(setup) is None


def test_a_set_torch_index_url_takes_precedence(setup):
    # the default cannot answer, and pip's own configuration is not asked first (no "trying" line)
    proc, _ = run_script(setup, UNREACHABLE, TORCH_INDEX_URL=setup["remote"])
    assert proc.returncode == 0, proc.stderr
    assert "trying" not in proc.stderr and installed(setup) == "stand-in"


def test_a_lock_without_a_cpu_build_of_torch_is_left_to_the_lock_install(setup):
    lock = setup["tmp"] / "gpu.lock"
    lock.write_text(f"torch==2.11.0 \\\n    --hash=sha256:{'0' * 64}\n")
    proc, _ = run_script(setup, UNREACHABLE, lock=lock, python=setup["tmp"] / "no-python")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
