"""A benchmark registered from the test tree (tests/toy_benchmark.py) grows the tables and the scorecard by
its own, and moves none of the paper's: no edit outside its module, its config entry and its @register line."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from toolcall_repro.analysis import report
from toolcall_repro.benchmarks import BENCHMARKS, run_benchmarks

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy_module(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    return importlib.import_module("toy_benchmark")


def with_toy(run_dir: Path, units: dict) -> dict:
    """The fixture run plus the toy benchmark's summary of (base, default) and its manifest."""
    from toolcall_repro.units import Score

    score = Score(str(run_dir), "toy", "base", "default")
    path = Path(score.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    per_seed = [0.5, 0.7]
    path.write_text(json.dumps({"seeds": [0, 1], "metrics": {"accuracy": {"mean": 0.6, "std": 0.1, "per_seed": per_seed}}}))
    manifest = Path(score.manifest)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"rule": "score_toy", "outputs": {score.path: "0" * 64}}))
    return {**units, "scores": [*units["scores"], score.unit()]}


@pytest.mark.parametrize("pipeline_check", [True, False])
def test_a_registered_benchmark_adds_its_tables_and_scorecard_rows(run_dir, run_units, toy_module, pipeline_check):
    cfg = {"pipeline_check": pipeline_check}
    plain = report.RunResults(run_dir, run_units)
    built = report.build_tables(plain, cfg)
    card = report.build_scorecard(plain, built, cfg)

    toy_units = with_toy(run_dir, run_units)
    res = report.RunResults(run_dir, toy_units)
    assert list(res.benchmarks) == ["bfcl", "acebench", "heldout", "general", "toy"]
    grown = report.build_tables(res, cfg)
    assert [t.name for t in grown] == [*report.TABLE_NAMES, toy_module.TABLE]
    for before, after in zip(built, grown, strict=False):  # the paper's tables: byte for byte
        assert (before.name, before.csv(), before.markdown()) == (after.name, after.csv(), after.markdown())
    toy_table = grown[-1]
    assert list(toy_table.frame["accuracy"]) == [0.6]
    assert toy_table.frame["source"].iloc[0].endswith("eval/toy/base/default/summary.json")

    grown_card = report.build_scorecard(res, grown, cfg)
    assert list(grown_card.frame["claim"]) == [*card.frame["claim"], "toy_accuracy"]
    assert grown_card.frame.iloc[:-1].to_csv() == card.frame.to_csv()
    row = grown_card.frame.iloc[-1]
    assert row["statistic"] == "toy_mean" and row["estimate"] == pytest.approx(0.6)


def test_scores_of_an_unregistered_benchmark_are_refused(run_dir, run_units):
    units = {**run_units, "scores": [*run_units["scores"], {**run_units["scores"][0], "benchmark": "nope"}]}
    with pytest.raises(ValueError, match="not registered; registered: bfcl, acebench, heldout, general"):
        report.RunResults(run_dir, units)


def test_a_config_entry_imports_its_module(toy_module):
    config = {"evaluate": {"benchmarks": {"toy": {"module": "toy_benchmark"}}}}
    assert list(run_benchmarks(config)) == ["bfcl", "acebench", "heldout", "general", "toy"]
    assert "toy" not in run_benchmarks({"evaluate": {}}) and "toy" in BENCHMARKS  # only where configured
    with pytest.raises(ValueError, match=r"evaluate.benchmarks.nope: no benchmark registered as 'nope'"):
        run_benchmarks({"evaluate": {"benchmarks": {"nope": {}}}})
