"""The README's order: `make run` first, then `make test`. With a completed results/embedded in the work
tree (Snakemake says "Nothing to be done" there), the dry-run tests still find their jobs and write
nothing into that tree."""

import re
import shutil
import subprocess
import sys

from _workflow_helpers import REPO, copy_run, fabricate_completed_run, make_workdir, snakemake, tree_state


def test_dry_run_tests_pass_in_a_work_tree_where_make_run_completed(tmp_path):
    # A clone of the work tree: the code linked, the tests copied (they locate the work tree from their
    # own path), and a completed embedded default in its results/ as `make run` leaves it.
    clone = make_workdir(tmp_path / "clone")
    (clone / "pyproject.toml").symlink_to(REPO / "pyproject.toml")  # pytest's options and markers
    (clone / "tests").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", clone / "tests")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "tests" / "workflow", clone / "tests" / "workflow", ignore=ignore)
    fabricate_completed_run(clone)
    done = snakemake("-n", cwd=clone)
    assert done.returncode == 0 and "Nothing to be done" in done.stdout + done.stderr, done.stdout[-3000:]
    before = {d: tree_state(clone / d) for d in ("results", ".snakemake")}

    # The dry-runs of both DAGs (the linters' outcome does not depend on results/).
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}",
         "tests/workflow/test_dryrun.py", "-k", "dag"],
        cwd=clone, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-3000:]
    assert re.search(r"\b2 passed", res.stdout), res.stdout[-3000:]
    assert {d: tree_state(clone / d) for d in ("results", ".snakemake")} == before

    # What tests/workflow/test_smoke.py does on CI with the run `.ci/run` made first: a copy is as complete.
    copy = make_workdir(tmp_path / "copy")
    copy_run(clone, "embedded", copy)
    again = snakemake("-n", cwd=copy)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]


def test_a_copied_run_of_another_configfile_is_complete(tmp_path):
    """.ci/run's own order: the CI-size run (`--configfile .test/config.yaml`) made in the clone, then
    copied for the smoke tests. The config files are archive inputs; as absolute paths they made the
    copy's archive "changed input files" and rerun it."""
    args = ("--configfile", ".test/config.yaml")
    first = make_workdir(tmp_path / "first")
    fabricate_completed_run(first, *args)
    copy = make_workdir(tmp_path / "copy")
    copy_run(first, "ci-smoke", copy)
    again = snakemake("-n", *args, cwd=copy)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
