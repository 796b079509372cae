"""The benchmark registry (toolcall_repro.benchmarks): one list of benchmarks, and a benchmark registered from
the test tree (tests/toy_benchmark.py) reaches preflight and the job entry through its config entry alone."""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

import pytest
import yaml

from toolcall_repro import benchmarks, preflight
from toolcall_repro.experiment import Experiment
from toolcall_repro.job import stage_function
from toolcall_repro.jobspec import Job, JobError

REPO = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "tests"))
    return importlib.import_module("toy_benchmark")


def test_the_papers_four_are_registered_in_order_and_a_name_is_taken_once():
    assert list(benchmarks.run_benchmarks(PAPER)) == ["bfcl", "acebench", "heldout", "general"]
    with pytest.raises(ValueError, match="benchmark 'bfcl' is registered twice"):
        benchmarks.register("bfcl")(type("Again", (benchmarks.Benchmark,), {}))
    with pytest.raises(ValueError, match="'nope' is not registered; registered: bfcl, acebench, heldout, general"):
        benchmarks.get_benchmark("nope")


def test_preflight_checks_the_budget_of_every_registered_benchmarks_generations(toy):
    """A benchmark's generations are held to the thinking budget with no edit to preflight."""
    cfg = copy.deepcopy(PAPER)
    cfg["evaluate"]["protocols"]["toyshort"] = {**cfg["evaluate"]["protocols"]["stronger"], "max_tokens": 2048}
    assert preflight.thinking_problems(cfg) == []  # no benchmark generates with it
    cfg["evaluate"]["benchmarks"] = {"toy": {"module": "toy_benchmark", "models": ["base"], "protocols": ["toyshort"]}}
    (problem,) = preflight.thinking_problems(cfg)
    assert problem.startswith("evaluate.protocols.toyshort.max_tokens: 2048 must be >= 4096 tokens")
    exp = Experiment(cfg)
    assert [s.rule for s in exp.benchmark_scores("toy")] == ["score_toy"]
    assert exp.scores()[-1].path.endswith("eval/toy/base/toyshort/summary.json")


def test_the_job_entry_runs_a_registered_benchmarks_stage_from_its_module(toy):
    spec = {"stage": "score_toy", "config": {}, "seeds": {"eval": [0]}, "options": {"module": "toy_benchmark"}}
    job = Job.from_json(json.dumps(spec))
    assert stage_function(job.stage, job.options["module"]) is toy.score_toy
    with pytest.raises(JobError, match="stage 'score_toy' is not one of"):
        Job.from_json(json.dumps({**spec, "options": {}}))
