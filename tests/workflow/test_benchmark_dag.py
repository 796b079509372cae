"""The DAG grows by a benchmark registered from the test tree (tests/toy_benchmark.py): its config entry
names the module, and the rules (evaluate.smk's score_benchmark, whose jobs are the benchmark's
score_<name>, and <name>_all), the results stage's inputs and nothing else move."""

from pathlib import Path

import yaml
from test_dryrun import job_counts

from toolcall_repro.runconfig import schema_problem

REPO = Path(__file__).resolve().parents[2]
TOY = {"toy": {"module": "toy_benchmark", "models": ["base"], "protocols": ["default", "stronger"]}}


def test_a_registered_benchmark_grows_the_dag_by_its_jobs(smk, make_config, tmp_path):
    config = make_config(tmp_path, "config/config.yaml", {"evaluate": {"benchmarks": TOY}})
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema_problem(yaml.safe_load(config.read_text()), schema) is None  # an additive, optional key
    env = {"PYTHONPATH": str(REPO / "tests")}
    plain = smk("-n", "--nolock", env=env)
    grown = smk("-n", "--nolock", "-p", "--configfile", str(config), env=env)
    assert plain.returncode == 0 and grown.returncode == 0, plain.stderr + grown.stderr
    assert job_counts(grown.stdout) == {**job_counts(plain.stdout), "score_benchmark": 2}
    for protocol in ("default", "stronger"):
        assert f"eval/toy/base/{protocol}/summary.json" in grown.stdout
    assert "toy_benchmark" in grown.stdout  # the job entry imports the stage's module (options.module)
    # filed under the benchmark's own score rule (benchmarks.py: score_rules), as the analysis reads them
    assert "manifests/score_toy/base-default.json" in grown.stdout and '"stage":"score_toy"' in grown.stdout
    # its own named target, as every benchmark's
    target = smk("toy_all", "-n", "--nolock", "--configfile", str(config), env=env)
    assert target.returncode == 0, target.stderr
    assert job_counts(target.stdout)["score_benchmark"] == 2 and "make_tables" not in job_counts(target.stdout)


def test_one_benchmarks_seeds_move_its_jobs_alone(smk, make_config, tmp_path):
    """evaluate.benchmarks.bfcl.seeds over evaluate.seeds: BFCL's generations and summaries move, ACEBench's
    and the held-out benchmark's keep evaluate.seeds."""
    config = make_config(tmp_path, "config/config.yaml", {"evaluate": {"benchmarks": {"bfcl": {"seeds": [0, 1, 2, 7]}}}})
    plain = smk("-n", "--nolock", "-p")
    moved = smk("-n", "--nolock", "-p", "--configfile", str(config))
    assert plain.returncode == 0 and moved.returncode == 0, plain.stderr + moved.stderr
    before, after = job_counts(plain.stdout), job_counts(moved.stdout)
    assert after["generate_bfcl"] > before["generate_bfcl"] and after["score_bfcl"] > before["score_bfcl"]
    assert {k: v for k, v in after.items() if "bfcl" not in k} == {k: v for k, v in before.items() if "bfcl" not in k}
    assert "/seed7.json" in moved.stdout and "eval/acebench/base/stronger/seed7.json" not in moved.stdout
    assert '"seeds":[0,1,2,7]' in moved.stdout and '"seeds":[0,1,2,7]' not in plain.stdout
