"""What a refactor must not move: every dry-run job of the five configs, as Snakemake plans it.

    .venv/bin/python scripts/dryrun-snapshot.py OUT_DIR

For each config (the embedded default, the CI size, the paper through profiles/slurm (as profiles/slurm-venv, which deploys no conda env), the paper on a CPU,
the evidence run) it runs `snakemake -n -p --forceall` in a scratch working directory (the work tree's
code and configs linked in, nothing of results/ read) and writes OUT_DIR/<name>.txt: one block a job,
sorted, with its rule, wildcards, input, output, resources (sorted by name) and shell command (whose text carries the
job's params.job and params.files: every rerun-trigger param; the code commit in the archive's name
is written <commit>). Run it before and after a change and
`diff -r` the two folders: an empty diff is the refactor's proof that no job, command or param moved.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINKED = ("workflow", "config", "profiles", ".test", "src", "scripts", "pyproject.toml", "requirements")
# name -> extra arguments (the paper runs as the slurm profile submits it; its revisions are unpinned here)
CONFIGS = {
    "default": ["--configfile", "config/config.yaml"],
    "ci": ["--configfile", ".test/config.yaml"],
    "paper": ["--profile", "profiles/slurm-venv", "--config", "allow_unpinned_revisions=True"],
    "paper-cpu": ["--profile", "profiles/slurm-venv", "--configfile", "config/paper.yaml", ".test/paper-cpu.yaml", "--config", "allow_unpinned_revisions=True"],
    # the evidence run's own targets: `make evidence` and one seed-pair unit (`make evidence-unit`)
    "evidence": ["efficiency", "results/evidence/efficiency/units/multi_turn-seed1", "--configfile", "config/evidence.yaml"],
}


def blocks(text: str) -> list[str]:
    """The job blocks of `snakemake -n -p` output (from `rule X:` or `localrule X:` to the shell command),
    without the job id and the reason (which only say in what order Snakemake met them)."""
    out, block = [], None
    for line in text.splitlines():
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            block = [line]
            continue
        if block is None:
            continue
        if not line.strip():
            if block[-1] != "":
                block.append("")
            continue
        if line.startswith("[") or line.startswith(("Job stats", "This was a dry-run")):
            out.append("\n".join(b for b in block if b).strip())
            block = None
            continue
        if line.strip().startswith(("jobid:", "reason:")):
            continue
        if line.strip().startswith("resources: "):  # a set: Snakemake prints it in the order it merged it
            head, _, items = line.partition("resources: ")
            line = head + "resources: " + ", ".join(sorted(items.split(", ")))
        block.append(line.rstrip())
    if block:
        out.append("\n".join(b for b in block if b).strip())
    return sorted(out)


def targets(args: list[str]) -> list[str]:
    """The targets of a CONFIGS entry (its arguments before the first option): first on the command line,
    as a target after --configfile would be read as a config file."""
    return args[: next((i for i, a in enumerate(args) if a.startswith("-")), len(args))]


def options(args: list[str]) -> list[str]:
    return args[len(targets(args)) :]


def snapshot(name: str, args: list[str], work: Path) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOOLCALL_SLURM_PARTITION": "gpu", "TOOLCALL_SLURM_ACCOUNT": "acct"}  # fmt: skip
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", *targets(args), "-n", "-p", "--nolock", "--forceall", *options(args)],
        cwd=work, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"{name}: snakemake -n failed:\n{res.stderr[-3000:]}{res.stdout[-2000:]}")
    # the archive's name carries the code commit (archive.code_tag), which every commit moves
    from toolcall_repro.archive import code_tag

    jobs = blocks(res.stdout.replace(code_tag(str(work / "workflow")), "<commit>"))
    return f"# {name}: {len(jobs)} jobs\n\n" + "\n\n".join(jobs) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        work.mkdir()
        for item in LINKED:
            if (REPO / item).exists():
                (work / item).symlink_to(REPO / item)
        if (REPO.parent / "shared").exists():
            (Path(tmp) / "shared").symlink_to((REPO.parent / "shared").resolve())
        for name, args in CONFIGS.items():
            text = snapshot(name, args, work)
            (out / f"{name}.txt").write_text(text)
            print(text.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
