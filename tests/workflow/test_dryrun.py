"""Dry-runs of both DAGs through the real CLI, and the linters that CI relies on."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from _workflow_helpers import UNPINNED

REPO = Path(__file__).resolve().parents[2]


def job_counts(stdout: str) -> dict[str, int]:
    assert "Job stats:" in stdout, stdout[-3000:]  # "Nothing to be done": the run dir was not fresh
    table = stdout.split("Job stats:")[1].split("total")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_embedded_default_dag(smk):
    res = smk("-n", "--nolock")
    assert res.returncode == 0, res.stderr
    jobs = job_counts(res.stdout)
    for rule in ["synthesize_source", "normalise_source", "warmstart_base_model", "filter_single_turn",
                 "filter_multi_turn", "train_grpo", "generate_bfcl", "score_bfcl", "summarise_bfcl", "make_tables",
                 "make_figures", "write_provenance", "archive_results"]:  # fmt: skip
        assert jobs.get(rule, 0) >= 1, rule
    assert jobs["normalise_source"] == 3
    # 2 settings x 2 variants (train.runs: vanilla, efficient) + the two format-study models
    assert jobs["train_grpo"] == 6
    assert "download_source" not in jobs and "download_model" not in jobs  # no network on the default


def test_paper_dag_on_slurm_profile(smk, fake_cluster):
    env, _ = fake_cluster
    res = smk("-n", "--nolock", "--profile", "profiles/slurm", "-p", *UNPINNED, env=env)
    assert res.returncode == 0, res.stderr + res.stdout
    jobs = job_counts(res.stdout)
    assert jobs["download_source"] == 3 and jobs["download_model"] >= 1
    assert jobs["train_grpo"] >= 7  # 6 configured runs + the 80-step filter policy (+ format study)
    assert jobs["generate_bfcl"] == jobs["score_bfcl"] > 0 and jobs["check_general_capability"] == 2
    train_blocks = [b for b in res.stdout.split("\n\n") if "rule train_grpo:" in b]
    assert train_blocks
    for block in train_blocks:
        assert "gpu=8" in block and "nodes=1" in block and "gpu_model=a100" in block
        assert "verl" in block  # the full verl launch command is shown
    general = [b for b in res.stdout.split("\n\n") if "rule check_general_capability:" in b]
    assert all("mmlu,hellaswag,truthfulqa_mc2,winogrande" in b and "gpu=1" in b for b in general)


def test_snakemake_lint_is_clean(smk):
    res = smk("--lint", "--nolock")
    assert res.returncode == 0, res.stdout + res.stderr


def test_snakefmt_check_is_clean():
    snakefmt = Path(sys.executable).parent / "snakefmt"
    if not snakefmt.exists():
        pytest.skip("snakefmt is not installed in this environment")
    res = subprocess.run([str(snakefmt), "--check", "workflow/"], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_rulegraph_is_a_graph_with_the_same_rules_for_every_config(smk):
    """stdout of --rulegraph is the dot graph alone (notices go to stderr), and no rule is defined or
    left out by config: the embedded default and the paper config define the same rules."""

    def rules(*args):
        res = smk("--list-rules", "--nolock", *args)
        assert res.returncode == 0, res.stderr
        return set(res.stdout.split())

    res = smk("--rulegraph", "--nolock")
    assert res.returncode == 0, res.stderr
    graph = res.stdout.strip()
    assert graph.startswith("digraph snakemake_dag {") and graph.endswith("}"), graph[:200]
    assert 'label = "train_grpo"' in graph
    embedded, paper = rules(), rules("--configfile", "config/paper.yaml", *UNPINNED)
    assert embedded == paper
    assert {"synthesize_source", "download_source", "warmstart_base_model", "download_model"} <= embedded


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/paper.yaml"])
def test_every_job_runs_through_the_job_entry_with_its_own_paths(smk, configfile):
    """Each rule's body is the one job entry, and its spec names exactly the files Snakemake gives the job
    (so the manifest checksums what the DAG says), a known stage, and the rule the manifest is filed under."""
    from toolcall_repro.plan import parse_dryrun
    from toolcall_repro.sheet import STAGES, kind

    res = smk("-n", "-p", "--forceall", "--nolock", "--configfile", configfile, *UNPINNED)
    assert res.returncode == 0, res.stderr
    jobs = [j for j in parse_dryrun(res.stdout) if j.rule not in ("all", "efficiency")]
    assert len({j.rule for j in jobs}) >= 15
    for j in jobs:
        spec = j.spec
        assert spec is not None, (j.rule, j.shell)
        assert spec["stage"] in STAGES, spec["stage"]
        # rule name = stage name = function name; a `use rule X as Y` twin runs X's stage (the sheet's row)
        assert spec["stage"] == kind(j.rule).stage, (j.rule, spec["stage"])
        assert sorted(spec["files"]["input"]) == sorted(j.inputs if j.inputs != [""] else []), j.rule
        assert sorted(spec["files"]["output"]) == sorted(j.outputs), j.rule
        # the job records its rule (a twin names itself), and its manifest is filed under it
        assert spec.get("rule", spec["stage"]) == j.rule, (j.rule, spec)
        manifest = spec["output"].get("manifest")
        if manifest:
            assert Path(manifest).parent.name == j.rule, manifest
