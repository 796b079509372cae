"""Helpers of the tests that drive the real Snakemake CLI in subprocesses (profiles are CLI-only).

Every run happens in a working directory of its own (`make_workdir`): the work tree's workflow/, config/,
profiles/ and .test/ linked in, its own results/ and .snakemake/ (metadata, locks). So no test reads or
writes the work tree's results, and a completed `make run` (results/embedded) changes no test's outcome.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# What a Snakemake run reads from the work tree; results/ and .snakemake/ are never linked.
# scripts/ and requirements/: a conda env's post-deploy script installs the package from the env's lock.
LINKED = ("workflow", "config", "profiles", ".test", "scripts", "requirements")
# config/paper.yaml ships its hub revisions as `main` (no commit sha can be looked up offline): its
# dry-runs in tests opt out of pinning, as an exploratory run would (toolcall_repro.preflight).
UNPINNED = ("--config", "allow_unpinned_revisions=True")


def make_workdir(base: Path) -> Path:
    """base/repo: a Snakemake working directory with the work tree's code and configs linked in, and
    base/shared linked to the work tree's ../shared when that exists (the embedded default reads ACEBench
    data from ../shared, relative to the working directory), so the DAG is the one the work tree builds."""
    work = base / "repo"
    work.mkdir(parents=True)
    for name in LINKED:
        (work / name).symlink_to(REPO / name)
    shared = REPO.parent / "shared"
    if shared.exists() and not (base / "shared").exists():
        (base / "shared").symlink_to(shared.resolve())
    return work


@functools.cache
def _git_env() -> dict:
    """GIT_DIR/GIT_WORK_TREE of the work tree: the working directory is no git checkout, and manifests
    record the commit (and dirty flag) of the code that ran, the work tree's."""
    try:
        cmd = ["git", "-C", str(REPO), "rev-parse", "--absolute-git-dir"]
        git_dir = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {}  # not a git checkout (a tarball): manifests say so, as they would in the work tree
    return {"GIT_DIR": git_dir, "GIT_WORK_TREE": str(REPO)}


def snakemake(
    *args: str, cwd: Path, env: dict | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """The Snakemake CLI in cwd, a working directory from make_workdir (never the work tree itself)."""
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    full_env = {**os.environ, **offline, **_git_env(), **(env or {})}
    # The venv's bin must come first so jobs' `python` is this interpreter.
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
    return subprocess.run(
        [*SNAKEMAKE, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
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


def tree_state(path: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under path with its size and mtime: equal states mean nothing was written."""
    if not path.exists():
        return {}
    return {
        str(p.relative_to(path)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in [path, *path.rglob("*")]
    }


def copy_run(src: Path, run_id: str, work: Path) -> None:
    """Copy the run results/<run_id> of working directory src, its archives (results/archives/<run_id>-*,
    archive.dir's default, with their logs) and Snakemake's metadata into work: mtimes kept (copy2), so
    Snakemake finds the same state there as in src."""
    shutil.copytree(src / "results" / run_id, work / "results" / run_id, symlinks=True)
    archives = src / "results" / "archives"
    for path in sorted(archives.glob(f"{run_id}-*")) if archives.is_dir() else []:
        dst = work / "results" / "archives" / path.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, dst)
    shutil.copytree(src / ".snakemake" / "metadata", work / ".snakemake" / "metadata", dirs_exist_ok=True)


def fabricate_completed_run(work: Path, *args: str) -> None:
    """Make `snakemake -n *args` in work report "Nothing to be done", as after a completed `make run`,
    without running a job: every output of the DAG created empty, then `snakemake --touch` dates them in
    job order and records metadata. Outputs without an extension are the workflow's directory() outputs
    (models, checkpoints, tables/html, figures/png); if that ever stops being true, --touch fails here."""
    res = snakemake("--summary", *args, cwd=work)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [line.split("\t") for line in res.stdout.splitlines() if line.startswith("results/")]
    assert rows, res.stdout[-3000:]
    for row in rows:
        out = work / row[0]
        if out.suffix:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.touch()
        else:
            out.mkdir(parents=True, exist_ok=True)
    res = snakemake("--touch", "--cores", "1", *args, cwd=work)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


_FAILED_ALL = """#!/usr/bin/env bash
for f in "$FAKE_SLURM_DIR"/submission-*.args; do
  [ -e "$f" ] || continue
  id=$(basename "$f" .args); id=${id#submission-}
  echo "$id|FAILED"
done
"""

FAKE_SLURM = {
    # Records every submission (arguments and the job script on stdin) and answers with a job id.
    "sbatch": """#!/usr/bin/env bash
n=$(ls "$FAKE_SLURM_DIR"/submission-*.args 2>/dev/null | wc -l)
id=$((1000 + n))
printf '%s\\n' "$@" > "$FAKE_SLURM_DIR/submission-$id.args"
cat > "$FAKE_SLURM_DIR/submission-$id.script"
echo "$id"
""",
    # Every recorded job is reported FAILED at once, so the run stops after the first submissions; by
    # squeue too (the profile's slurm-status-command), in the same `<id>|<state>` lines.
    "sacct": _FAILED_ALL,
    "squeue": _FAILED_ALL,
    "sacctmgr": '#!/usr/bin/env bash\necho "${TOOLCALL_SLURM_ACCOUNT:-acct}"\n',
    "sinfo": '#!/usr/bin/env bash\necho "${TOOLCALL_SLURM_PARTITION:-gpu}"\n',
    "scontrol": "#!/usr/bin/env bash\necho 'MinJobAge = 300 sec'\n",
    "scancel": "#!/usr/bin/env bash\nexit 0\n",
    "srun": "#!/usr/bin/env bash\nexit 0\n",
    # The slurm profile deploys conda envs: conda reports its root in $FAKE_SLURM_DIR/conda (made by
    # write_fake_cluster), whose bin/activate puts a recording `python` first on PATH, so an env's
    # post-deploy script (scripts/install-from-lock.sh --package-only python <env>) runs for real against it.
    "conda": """#!/usr/bin/env bash
root="$FAKE_SLURM_DIR/conda"
case "$*" in
  "info --json") echo "{\\"conda_version\\": \\"24.11.0\\", \\"conda_prefix\\": \\"$root\\", \\"root_prefix\\": \\"$root\\", \\"envs_dirs\\": [\\"$root/envs\\"], \\"pkgs_dirs\\": [\\"$root/pkgs\\"], \\"platform\\": \\"linux-64\\"}";;
  "--version") echo "conda 24.11.0";;
  "config --get channel_priority --json") echo '{"get": {"channel_priority": "strict"}}';;
  *) echo '{}';;
esac
""",
}


def write_fake_cluster(bin_dir: Path, record_dir: Path, skip: tuple[str, ...] = ()) -> None:
    """The fake SLURM client commands (and conda) in bin_dir, recording into record_dir ($FAKE_SLURM_DIR),
    with the fake conda root there: bin/activate puts stub/python first on PATH, which records each call
    (record_dir/python.calls) and does nothing else."""
    for name, body in FAKE_SLURM.items():
        if name not in skip:
            (bin_dir / name).write_text(body)
            (bin_dir / name).chmod(0o755)
    root = record_dir / "conda"
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "stub").mkdir(exist_ok=True)
    (root / "bin" / "activate").write_text(f'export CONDA_PREFIX="$1"; export PATH="{root}/stub:$PATH"\n')
    python = root / "stub" / "python"
    python.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{record_dir}/python.calls"\n[ "${{1:-}}" != - ] || cat > /dev/null\n')
    python.chmod(0o755)
