"""Helpers for tests that drive the real Snakemake CLI in subprocesses (profiles are CLI-only)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    # The venv's bin must come first so jobs' `python` is this interpreter.
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
    return subprocess.run(
        [*SNAKEMAKE, *args], cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def write_config(tmp_path: Path, base: str, overrides: dict, name: str = "override.yaml") -> Path:
    """A complete config: `base` (a file in config/) deep-updated with `overrides`."""
    cfg = yaml.safe_load((REPO / base).read_text())

    def update(dst, src):
        for k, v in src.items():
            if isinstance(v, dict) and isinstance(dst.get(k), dict):
                update(dst[k], v)
            else:
                dst[k] = v

    update(cfg, overrides)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


FAKE_SLURM = {
    # Records every submission (arguments and the job script on stdin) and answers with a job id.
    "sbatch": """#!/usr/bin/env bash
n=$(ls "$FAKE_SLURM_DIR"/submission-*.args 2>/dev/null | wc -l)
id=$((1000 + n))
printf '%s\\n' "$@" > "$FAKE_SLURM_DIR/submission-$id.args"
cat > "$FAKE_SLURM_DIR/submission-$id.script"
echo "$id"
""",
    # Every recorded job is reported FAILED at once, so the run stops after the first submissions.
    "sacct": """#!/usr/bin/env bash
for f in "$FAKE_SLURM_DIR"/submission-*.args; do
  [ -e "$f" ] || continue
  id=$(basename "$f" .args); id=${id#submission-}
  echo "$id|FAILED"
done
""",
    "squeue": "#!/usr/bin/env bash\nexit 0\n",
    "sacctmgr": '#!/usr/bin/env bash\necho "${TOOLCALL_SLURM_ACCOUNT:-acct}"\n',
    "sinfo": '#!/usr/bin/env bash\necho "${TOOLCALL_SLURM_PARTITION:-gpu}"\n',
    "scontrol": "#!/usr/bin/env bash\necho 'MinJobAge = 300 sec'\n",
    "scancel": "#!/usr/bin/env bash\nexit 0\n",
    "srun": "#!/usr/bin/env bash\nexit 0\n",
    # The slurm profile deploys conda envs; a dry-run only asks conda about itself.
    "conda": """#!/usr/bin/env bash
case "$*" in
  "info --json") echo '{"conda_version": "24.11.0", "conda_prefix": "/opt/conda", "root_prefix": "/opt/conda", "envs_dirs": ["/opt/conda/envs"], "pkgs_dirs": ["/opt/conda/pkgs"], "platform": "linux-64"}';;
  "--version") echo "conda 24.11.0";;
  "config --get channel_priority --json") echo '{"get": {"channel_priority": "strict"}}';;
  *) echo '{}';;
esac
""",
}


@pytest.fixture(scope="session")
def smk():
    """Run the Snakemake CLI in the repository: smk("-n", ...)."""
    return snakemake


@pytest.fixture(scope="session")
def make_config():
    """Write a complete config from a shipped one plus overrides: make_config(tmp_path, base, overrides)."""
    return write_config


@pytest.fixture
def fake_cluster(tmp_path):
    """A PATH directory with recording fakes of the SLURM client commands (and conda)."""
    bin_dir = tmp_path / "fakebin"
    record_dir = tmp_path / "slurm"
    bin_dir.mkdir()
    record_dir.mkdir()
    for name, body in FAKE_SLURM.items():
        p = bin_dir / name
        p.write_text(body)
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(record_dir),
        "TOOLCALL_SLURM_PARTITION": "gpu-a100",
        "TOOLCALL_SLURM_ACCOUNT": "proj123",
    }
    return env, record_dir


@pytest.fixture(scope="module")
def fake_cluster_env(tmp_path_factory):
    """The fake SLURM client commands (and conda) on PATH, once per module: the env to run the CLI with."""
    bin_dir = tmp_path_factory.mktemp("fakebin")
    record_dir = tmp_path_factory.mktemp("slurm")
    for name, body in FAKE_SLURM.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(record_dir),
        "TOOLCALL_SLURM_PARTITION": "gpu-a100",
        "TOOLCALL_SLURM_ACCOUNT": "proj123",
    }
