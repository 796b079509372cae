"""The efficiency evidence's seed-pair units (pre-registration 3): the pre-registered order, the next unit
to run, the check of a unit folder, and its move into place whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from _runs import four_steps

from toolcall_repro.analysis import evidence_inputs, evidence_units
from toolcall_repro.analysis.loaders import RunRecord

ROOT = Path(__file__).resolve().parents[2]
IDS = ["h0", "h1", "h2", "h3", "h4"]


def _run(variant, seed, ids=IDS, steps=4):
    lines = four_steps(4.0, 3.0, gen_rows=32, update_rows=32)[:steps]
    outcomes = [[float((i + k) % 2) for i in range(len(ids))] for k in range(3)]
    curve = pd.DataFrame(
        {
            "step": [0, 2, 4],
            "epoch": [0, 1, 2],
            "heldout_accuracy": [sum(o) / len(o) for o in outcomes],
            "heldout_outcomes": outcomes,
            "heldout_sampled_accuracy": [sum(o) / len(o) for o in outcomes],
            "heldout_sampled_outcomes": outcomes,
            "time/cumulative_device_s": [0.0, 8.0, 16.0],
        }
    )
    summary = {"seed": seed, "steps": 4, "heldout_ids": list(ids)}
    return RunRecord("multi_turn", variant, seed, {"n": 8}, pd.DataFrame(lines), curve, summary)


def _identity(**over):
    return {
        "unit": "multi_turn-seed0", "setting": "multi_turn", "seed": 0, "design": evidence_units.DESIGN,
        "commits": ["abc"], "mkl_branch": "avx2", "cpu_models": ["a cpu"], "jobs": {"x": {}},
        "job_times": [{"rule": "train_grpo", "cpu_s": 1.0}], "runs": {"vanilla": {}, "efficient": {}}, **over,
    }  # fmt: skip


def _unit(folder: Path, runs=None, **identity) -> Path:
    runs = runs if runs is not None else [_run("vanilla", 0), _run("efficient", 0)]
    evidence_inputs.export_runs(runs, folder, {"margin": {"of_vanilla_gain": 0.25}})
    (folder / evidence_units.UNIT_FILE).write_text(json.dumps(_identity(**identity)))
    return folder


def test_the_committed_config_plans_multi_turn_seeds_first_then_single_turn():
    config = evidence_units.load_config([str(ROOT / "config" / "evidence.yaml")], str(ROOT / "config" / "config.yaml"))
    assert evidence_units.planned(config["train"]["efficiency"]) == [
        *(("multi_turn", s) for s in range(5)),
        *(("single_turn", s) for s in range(5)),
    ]


def test_a_seed_without_both_variants_is_no_unit_and_no_units_key_plans_none():
    runs = {"multi_turn": {"vanilla": [0, 1, 2], "efficient": [2, 1]}}
    assert evidence_units.planned({"runs": runs, "units": ["multi_turn"]}) == [("multi_turn", 1), ("multi_turn", 2)]
    assert evidence_units.planned({"runs": runs}) == []


def test_the_next_unit_skips_whole_folders_only(tmp_path):
    eff = {"runs": {"multi_turn": {"vanilla": [0, 1], "efficient": [0, 1]}}, "units": ["multi_turn"]}
    assert evidence_units.next_unit(eff, tmp_path / "none") == ("multi_turn", 0)
    _unit(tmp_path / "multi_turn-seed0")
    (tmp_path / "multi_turn-seed1").mkdir()  # a partial folder is not a unit
    (tmp_path / "multi_turn-seed1" / "runs.json").write_text("{}")
    assert evidence_units.committed_units(tmp_path) == ["multi_turn-seed0"]
    assert evidence_units.next_unit(eff, tmp_path) == ("multi_turn", 1)
    _unit(tmp_path / "multi_turn-seed1", runs=[_run("vanilla", 1), _run("efficient", 1)], seed=1)
    assert evidence_units.next_unit(eff, tmp_path) is None


def test_a_whole_unit_passes_the_check(tmp_path):
    assert evidence_units.check_unit(_unit(tmp_path / "multi_turn-seed0")) == []


@pytest.mark.parametrize(
    ("runs", "identity", "says"),
    [
        ([_run("vanilla", 0)], {}, "runs [('multi_turn', 'vanilla', 0)]"),
        ([_run("vanilla", 0), _run("efficient", 1)], {}, "not [('multi_turn', 'efficient', 0)"),
        ([_run("vanilla", 0), _run("efficient", 0, ids=IDS[::-1])], {}, "different held-out prompts"),
        ([_run("vanilla", 0), _run("efficient", 0, steps=3)], {}, "3 step lines, summary says 4"),
        (None, {"design": "pre-registration 2"}, "design 'pre-registration 2'"),
        (None, {"mkl_branch": None}, "no mkl_branch"),
        (None, {"seed": 3}, "folder multi_turn-seed0 holds unit multi_turn-seed3"),
    ],
)
def test_the_check_names_what_is_wrong(tmp_path, runs, identity, says):
    problems = evidence_units.check_unit(_unit(tmp_path / "multi_turn-seed0", runs=runs, **identity))
    assert any(says in p for p in problems), problems


def test_a_missing_file_is_named(tmp_path):
    folder = _unit(tmp_path / "multi_turn-seed0")
    (folder / "curves.jsonl.gz").unlink()
    assert evidence_units.check_unit(folder) == [f"{folder}: lacks ['curves.jsonl.gz']"]


def test_finish_puts_a_whole_unit_in_place_with_its_lease(tmp_path):
    staged = _unit(tmp_path / "results" / "multi_turn-seed0")
    units = tmp_path / "docs" / "units"
    final = evidence_units.finish(staged, units, {"wall_s": 6000, "started": 1, "finished": 6001})
    assert final == units / "multi_turn-seed0"
    assert sorted(p.name for p in final.iterdir()) == sorted(evidence_units.FILES)
    assert json.loads((final / "unit.json").read_text())["lease"]["wall_s"] == 6000
    for name in evidence_inputs.FILES:  # the analysis inputs are copied byte for byte
        assert (final / name).read_bytes() == (staged / name).read_bytes()
    with pytest.raises(FileExistsError, match="never run again"):
        evidence_units.finish(staged, units)


def test_finish_leaves_nothing_in_place_when_the_unit_is_not_whole(tmp_path):
    staged = _unit(tmp_path / "results" / "multi_turn-seed0", runs=[_run("vanilla", 0)])
    units = tmp_path / "docs" / "units"
    with pytest.raises(ValueError, match="runs"):
        evidence_units.finish(staged, units)
    assert not units.exists() or list(units.iterdir()) == []
    assert sorted(p.name for p in staged.parent.iterdir()) == ["multi_turn-seed0"]  # no temporary folder left


def _learning(variant, seed, scale):
    """A run whose 5 prompts go from 1 to 2 to 4 right, at times scaled by `scale` (efficient: half)."""
    run = _run(variant, seed)
    rows = [[1.0, 0, 0, 0, 0], [1.0, 1, 0, 0, 0], [1.0, 1, 1, 1, 0]]
    curve = run.curve.assign(
        heldout_outcomes=rows,
        heldout_sampled_outcomes=rows,
        **{"time/cumulative_device_s": [0.0, 8.0 * scale, 16.0 * scale]},
    )
    return RunRecord(run.setting, variant, seed, run.config, run.metrics, curve, run.summary)


def _units(root: Path, seeds) -> None:
    for s in seeds:
        _unit(root / "units" / f"multi_turn-seed{s}", runs=[_learning("vanilla", s, 1.0), _learning("efficient", s, 0.5)],
              seed=s, unit=f"multi_turn-seed{s}")  # fmt: skip


@pytest.mark.parametrize(("committed", "interim"), [((0, 1), True), ((0, 1, 2, 3, 4), False)])
def test_the_units_rebuild_gives_no_verdict_until_the_planned_pairs_are_in(tmp_path, committed, interim):
    _units(tmp_path, committed)
    plan = [("multi_turn", s) for s in range(5)]
    evidence_units.rebuild_units(tmp_path, tmp_path / "out", plan)
    index = (tmp_path / "out" / "index.md").read_text()
    notes = (tmp_path / "out" / "tables" / "md" / "efficiency_sampled.md").read_text()
    words = f"multi_turn: {len(committed)} of 5 multi-turn pairs: interim, no verdict"
    assert (words in notes) == interim and ("verdict on efficient" in notes) != interim
    assert (f"- multi_turn: {len(committed)} of 5 pairs committed" in index) and ("interim" in index) == interim
    assert "vanilla-step equivalents" in notes
    units = (tmp_path / "out" / "tables" / "csv" / "evidence_units.csv").read_text()
    assert all(f"multi_turn-seed{s}" in units for s in committed)


def test_the_units_rebuild_refuses_a_unit_that_is_not_whole(tmp_path):
    _units(tmp_path, (0,))
    (tmp_path / "units" / "multi_turn-seed0" / "unit.json").write_text(json.dumps(_identity(design="other")))
    with pytest.raises(ValueError, match="design 'other'"):
        evidence_units.rebuild_units(tmp_path, tmp_path / "out", [("multi_turn", 0)])
