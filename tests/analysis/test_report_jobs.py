"""make_tables and make_figures through the job entry (toolcall_repro.job) write the same files as the same
stages run by hand over the whole run tree with a pipeline config, and the manifest records the rule's
config and seeds."""

import json

import pytest

from toolcall_repro.cli import main
from toolcall_repro.job import run
from toolcall_repro.jobspec import Job

CONFIG = {
    "evaluate": {
        "studies": {"table4": {"models": ["base", "rl-multi"], "protocols": ["default", "stronger"]}},
        "general": {"models": ["base", "rl-multi"]},
    },
}


def analysis_job(stage, run_dir, out_dir, declared, config, **extra_inputs):
    output = {"index": str(out_dir / "index.md"), "manifest": str(out_dir.parent / "manifests" / f"{stage}.json")}
    inputs = {"results": declared, **extra_inputs}
    files = declared + list(extra_inputs.values())
    return Job(rule=stage, stage=stage, input=inputs, output=output,
               files={"input": files, "output": list(output.values())}, config=config,
               seeds={"eval": [0, 1]}, options={"run_dir": str(run_dir)})  # fmt: skip


@pytest.mark.slow  # the tables and figures jobs and a hand run, each in fresh processes, ~7 s
def test_tables_and_figures_jobs_write_what_a_hand_run_writes(run_dir, run_units, tmp_path):
    declared = sorted(str(p) for p in run_dir.rglob("*") if p.is_file())
    config = {**CONFIG, **run_units}  # the rule's config: the evaluate subtree and the experiment's units
    tables = analysis_job("make_tables", run_dir, tmp_path / "jobs" / "tables", declared, config)
    assert run(tables) == 0
    tables_csv = str(tmp_path / "jobs" / "tables" / "csv")
    figures = analysis_job("make_figures", run_dir, tmp_path / "jobs" / "figures", declared, config, tables_csv=tables_csv)
    assert run(figures) == 0
    cli = tmp_path / "cli"
    # by hand: no declared inputs (the whole tree), the figures compute their own speedups
    hand = ["--option", f"run_dir={run_dir}", "--config", json.dumps(config)]
    assert main(["stage", "make_tables", "--out", f"index={cli / 'tables' / 'index.md'}", *hand]) == 0
    assert main(["stage", "make_figures", "--out", f"index={cli / 'figures' / 'index.md'}", *hand]) == 0
    for part in ("tables", "figures"):
        written = sorted(p.relative_to(tmp_path / "jobs" / part) for p in (tmp_path / "jobs" / part).rglob("*.*"))
        assert written == sorted(p.relative_to(cli / part) for p in (cli / part).rglob("*.*")) and written
        for rel in written:
            if rel.suffix in (".md", ".csv", ".html"):
                assert (tmp_path / "jobs" / part / rel).read_bytes() == (cli / part / rel).read_bytes(), rel
    manifest = json.loads(open(tables.manifest).read())
    assert manifest["rule"] == "make_tables" and manifest["config"] == config
    assert manifest["seeds"] == {"eval": [0, 1]} and len(manifest["inputs"]) == len(declared)
