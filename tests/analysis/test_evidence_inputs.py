"""The efficiency report's analysis inputs: written by the report, read back, and enough on their own to
rebuild every table, interval and figure byte for byte (the committed evidence's rebuild command)."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
from _runs import four_steps

from toolcall_repro.analysis import evidence_inputs
from toolcall_repro.analysis.efficiency_report import efficiency_tables, write_report
from toolcall_repro.analysis.loaders import RunRecord
from toolcall_repro.cli import main as cli

GREEDY = [[0, 0, 0, 1, 0], [1, 0, 0, 1, 0], [1, 1, 0, 1, 0], [1, 1, 0, 1, 1]]


def _run(variant, seed, step_s, time_scale, shift=0):
    """A run of 4 steps and 4 checkpoints on 5 held-out prompts, greedy and sampled outcomes (the sampled
    ones fractions of 4 samples), CPU and wall clocks; `shift` moves one prompt's outcome a seed."""
    lines = four_steps(step_s, step_s * 3 / 4, gen_rows=32, update_rows=32 if variant == "vanilla" else 16,
                       wall_scale=1.0)  # fmt: skip
    greedy = [list(map(float, row)) for row in GREEDY]
    greedy[-1][2] = float(shift % 2)
    sampled = [[v * 0.75 + 0.25 * ((i + seed) % 2) for i, v in enumerate(row)] for row in greedy]
    curve = pd.DataFrame(
        {
            "step": [0, 1, 2, 4],
            "epoch": [0, 0, 1, 2],
            "heldout_accuracy": [sum(o) / 5 for o in greedy],
            "heldout_outcomes": greedy,
            "heldout_sampled_accuracy": [sum(o) / 5 for o in sampled],
            "heldout_sampled_outcomes": sampled,
            "time/cumulative_device_s": [t * 3600 * time_scale for t in (0, 1, 2, 3)],
        }
    )
    config = {"n": 8, "setting": "multi_turn", "variant": variant}
    return RunRecord("multi_turn", variant, seed, config, pd.DataFrame(lines), curve, {"seed": seed})


RUNS = [
    *(_run("vanilla", s, 4.0, 1.0, shift=s) for s in (0, 1, 2)),
    *(_run("efficient", s, 2.0, 0.5, shift=s + 1) for s in (0, 1, 2)),
]
MARGIN = {"of_vanilla_gain": 0.25}


def test_inputs_round_trip_to_the_same_runs_and_tables(tmp_path):
    written = evidence_inputs.export_runs(RUNS, tmp_path, {"margin": MARGIN})
    assert [p.name for p in written] == list(evidence_inputs.FILES)
    back = evidence_inputs.load_runs(tmp_path)
    assert [(r.setting, r.variant, r.seed) for r in back] == sorted(
        (r.setting, r.variant, r.seed) for r in RUNS
    )
    assert evidence_inputs.read_config(tmp_path) == {"margin": MARGIN}
    for metric in ("greedy", "sampled"):
        a = efficiency_tables(RUNS, margin=MARGIN, metric=metric, n_bootstrap=200)[0].frame
        b = efficiency_tables(back, margin=MARGIN, metric=metric, n_bootstrap=200)[0].frame
        pd.testing.assert_frame_equal(a, b)


def test_inputs_bytes_depend_on_the_runs_only(tmp_path):
    """No timestamp in the gzip header, keys sorted: two writes are the same bytes (committable)."""
    one, two = tmp_path / "one", tmp_path / "two"
    evidence_inputs.export_runs(RUNS, one, {"margin": MARGIN})
    evidence_inputs.export_runs(list(reversed(RUNS)), two, {"margin": MARGIN})
    for name in evidence_inputs.FILES:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    with gzip.open(one / "curves.jsonl.gz", "rt") as f:
        first = json.loads(f.readline())
    assert {"setting", "variant", "seed", "heldout_outcomes", "heldout_sampled_outcomes"} <= set(first)


@pytest.mark.slow  # writes the whole efficiency report twice (figures included), ~20 s
def test_the_report_rebuilds_from_its_inputs_alone(tmp_path, monkeypatch):
    """write_report computes from the inputs it wrote; the rebuild command, given only those files (the
    run tree deleted), writes the same tables, index and figures."""
    from toolcall_repro.analysis import report

    monkeypatch.setattr(report, "RunResults", lambda *a, **k: type("R", (), {"runs": RUNS})())
    out = tmp_path / "efficiency"
    (tmp_path / "run").mkdir()
    write_report(tmp_path / "run", out, {"efficiency": {"margin": MARGIN}, "runs": []})
    inputs = tmp_path / "committed"
    inputs.mkdir()
    for name in evidence_inputs.FILES:
        (inputs / name).write_bytes((out / "inputs" / name).read_bytes())
    assert cli(["evidence-rebuild", str(inputs), str(tmp_path / "again")]) == 0
    made = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and "inputs" not in p.parts)
    again = sorted(p.relative_to(tmp_path / "again") for p in (tmp_path / "again").rglob("*") if p.is_file())
    assert made == again and any(p.suffix == ".csv" for p in made)
    for rel in made:
        if rel.suffix in (".csv", ".md", ".json"):
            assert (out / rel).read_bytes() == (tmp_path / "again" / rel).read_bytes(), rel
    table = pd.read_csv(out / "tables" / "csv" / "efficiency_sampled.csv").set_index("variant")
    assert table.loc["efficient", "non_inferiority_margin"] == pytest.approx(
        0.25 * table["gain"].dropna().iloc[0]
    )


def test_rebuild_names_what_is_missing(tmp_path, capsys):
    assert cli(["evidence-rebuild", str(tmp_path), str(tmp_path / "out")]) == 2
    assert "lacks ['runs.json', 'metrics.jsonl.gz', 'curves.jsonl.gz']" in capsys.readouterr().err
