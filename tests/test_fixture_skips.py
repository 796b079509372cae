"""tests/conftest.py: a test that skips for a missing fixture says why in one line, and fails instead
under TOOLCALL_REQUIRE_FIXTURES=1 (what `.ci/run` sets)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SKIPPING = {
    "test_skip_call.py": "import pytest\n\ndef test_a():\n    pytest.skip('no data at /nowhere (fetch it)')\n",
    "test_skip_mark.py": (
        "import pytest\n\n@pytest.mark.skipif(True, reason='no browser on PATH')\ndef test_b():\n    pass\n"
    ),
    "test_skip_module.py": "import pytest\n\npytest.importorskip('no_such_module_here')\n\ndef test_c():\n    pass\n",
    "test_passes.py": "def test_d():\n    assert True\n",
}


def run_suite(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess:
    """The files above under a copy of tests/conftest.py, run by pytest as CI runs the suite."""
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(Path(__file__).with_name("conftest.py"), tests)
    for name, text in SKIPPING.items():
        (tests / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "TOOLCALL_REQUIRE_FIXTURES"}
    if require is not None:
        env["TOOLCALL_REQUIRE_FIXTURES"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-ra", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         "--continue-on-collection-errors", "tests"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


REASONS = ["no data at /nowhere (fetch it)", "no browser on PATH", "could not import 'no_such_module_here'"]


def test_a_skip_says_why_in_one_line(tmp_path):
    res = run_suite(tmp_path, None)
    assert res.returncode == 0, res.stdout
    assert "1 passed, 3 skipped" in res.stdout
    skip_lines = [line for line in res.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skip_lines) == 3 and all(sum(r in line for line in skip_lines) == 1 for r in REASONS)
    assert "3 skipped for fixtures this machine lacks" in res.stdout
    assert all(sum(line.startswith(f"  1 x {r}") for line in res.stdout.splitlines()) == 1 for r in REASONS)


def test_under_require_fixtures_every_kind_of_skip_fails(tmp_path):
    res = run_suite(tmp_path, "1")
    assert res.returncode == 1, res.stdout
    summary = res.stdout.splitlines()[-1]  # a skip in the test body fails it; in setup or import, errors
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", summary)}
    assert counts.get("passed") == 1 and "skipped" not in counts, summary
    assert counts.get("failed", 0) + counts.get("errors", 0) + counts.get("error", 0) == 3, summary
    for reason in REASONS:
        assert f"TOOLCALL_REQUIRE_FIXTURES=1 makes that a failure: {reason}" in res.stdout
