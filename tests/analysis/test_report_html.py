"""The Snakemake report of our tables and figures renders in headless Chromium (scripts/check_report_html.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_report_html.py"
needs_browser = pytest.mark.skipif(
    not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")),
    reason="no Chromium on PATH (apt-get install -y chromium)",
)

SNAKEFILE = """
RUN = "results/toy"
report: "report/workflow.rst"
rule all:
    input: RUN + "/tables/index.md", RUN + "/figures/index.md"
rule tables:
    output:
        index=report(RUN + "/tables/index.md", caption="report/tables.rst", category="Tables"),
        claims=report(RUN + "/tables/claims.html", caption="report/claims.rst", category="Claims"),
        html=report(directory(RUN + "/tables/html"), patterns=["{name}.html"], caption="report/tables.rst",
                    category="Tables"),
    shell: "python -m toolcall_repro.cli stage make_tables --option run_dir={RUN} --out index={RUN}/tables/index.md --config units.json"
rule figures:
    output:
        index=RUN + "/figures/index.md",
        png=report(directory(RUN + "/figures/png"), patterns=["{name}.png"], caption="report/figures.rst",
                   category="Figures"),
    shell: "python -m toolcall_repro.cli stage make_figures --option run_dir={RUN} --out index={RUN}/figures/index.md --config units.json"
"""


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=120)


@needs_browser
@pytest.mark.workflow
def test_report_with_our_captions_renders(run_dir, run_units, tmp_path):
    work = run_dir.parents[1]
    (work / "units.json").write_text(json.dumps(run_units))  # what the rules pass: the experiment's units
    (work / "workflow").mkdir()
    (work / "workflow" / "Snakefile").write_text(SNAKEFILE)
    shutil.copytree(ROOT / "workflow" / "report", work / "workflow" / "report")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # rules call `python`
    for args in (["-c1", "--nolock", "-q"], ["--nolock", "--report", "report.html"]):
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", *args],
            cwd=work,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    proc = check(
        str(work / "report.html"),
        "--screenshots",
        str(tmp_path / "shots"),
        "--expect",
        "claims.html",
        "table4_bfcl.html",
        "speedup.html",
        "accuracy_vs_time.png",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {p.name for p in (tmp_path / "shots").iterdir()} == {"start.png", "figure.png", "table.png"}


@needs_browser
def test_checker_fails_on_console_errors_and_broken_images(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        "<html><body><div id='app'><p>x</p></div><script>"
        "var results = {'a.png': {mime_type: 'image/png', data_uri: 'data:image/png;base64,AAAA'}};"
        "var app = {setView(v) { document.getElementById('app').innerHTML = '<img src=\"' + v.contentPath + '\">'; }};"
        "console.error('boom');</script></body></html>"
    )
    proc = check(str(page), "--screenshots", str(tmp_path / "s"), "--expect", "missing.html")
    assert proc.returncode == 1
    assert "a.png: image does not render" in proc.stdout
    assert "console.error: boom" in proc.stdout
    assert "expected result missing.html is not in the report" in proc.stdout


def test_checker_skips_clearly_without_a_browser(tmp_path):
    page = tmp_path / "r.html"
    page.write_text("<html></html>")
    env_path = str(tmp_path)  # a PATH with no browser on it
    proc = subprocess.run(
        [sys.executable, str(CHECK), str(page)],
        capture_output=True,
        text=True,
        env={"PATH": env_path},
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("SKIP")
    proc = subprocess.run(
        [sys.executable, str(CHECK), str(page), "--require-browser"],
        capture_output=True,
        text=True,
        env={"PATH": env_path},
        timeout=60,
    )
    assert proc.returncode == 1
