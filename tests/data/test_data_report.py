"""The merged filter report: sources, malformed rows by reason, every chain's steps, and its table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolcall_repro.data.normalise import normalise_file
from toolcall_repro.data.report import merge_reports, rejects_summary, to_markdown

FIXTURES = Path(__file__).parent / "fixtures"

STEP_REPORT = {
    "setting": "multi_turn",
    "steps": [
        {"step": "input", "in": 10, "out": 10, "dropped": {}},
        {"step": "turn_range", "in": 10, "out": 7, "dropped": {"too_few_turns": 2, "too_many_turns": 1}},
    ],
    "turn_counting": {
        "definition": "user_requests",
        "range": [2, 6],
        "definitions": {
            "user_requests": {"in_range": 7, "histogram": {}},
            "history_tool_calls": {"in_range": 9, "histogram": {}},
        },
    },
    "train": {"size": 5, "target": 6, "reached": False},
    "heldout": {"size": 2},
}


def normalised(tmp_path, source):
    rej = tmp_path / f"{source}.rejects.jsonl"
    rep = normalise_file(
        source, FIXTURES / f"{source}.jsonl", tmp_path / f"{source}.parquet", rej, tmp_path / f"{source}.json"
    )
    return rep, rej


def test_merge_counts_malformed_rows_per_source_and_reason(tmp_path):
    reps, rejs = zip(*(normalised(tmp_path, s) for s in ("xlam", "looptool")), strict=True)
    report = merge_reports([STEP_REPORT], list(reps), [rejects_summary(p) for p in rejs])
    assert report["sources"]["xlam"]["rows_rejected"] == 5
    assert report["sources"]["looptool"]["rejects"] == {
        "bad_call": 1,
        "bad_history": 1,
        "missing_field": 1,
        "no_tools_in_instruction": 1,
    }
    assert report["malformed_rows"]["total"] == 9
    assert report["malformed_rows"]["by_reason"]["missing_field"] == 2
    assert report["chains"]["multi_turn"] == STEP_REPORT


def test_markdown_table_has_every_step_and_turn_definition(tmp_path):
    rep, rej = normalised(tmp_path, "xlam")
    md = to_markdown(merge_reports([STEP_REPORT], [rep], [rejects_summary(rej)]))
    assert "| xlam | 8 | 3 | 5 |" in md
    assert "| turn_range | 10 | 7 | too_few_turns 2, too_many_turns 1 |" in md
    assert "| history_tool_calls | 9 |" in md
    assert "Train: 5 (target 6, reached: False); held-out: 2." in md


def test_a_rejects_file_that_disagrees_with_its_report_is_an_error(tmp_path):
    rep, rej = normalised(tmp_path, "xlam")
    rej.write_text(rej.read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="disagrees"):
        merge_reports([], [rep], [rejects_summary(rej)])


def test_two_reports_for_one_chain_are_an_error():
    with pytest.raises(ValueError, match="two step reports"):
        merge_reports([STEP_REPORT, STEP_REPORT], [], [])


def test_the_job_writes_json_and_markdown(tmp_path):
    from toolcall_repro.cli import main

    steps = tmp_path / "multi_turn.json"
    steps.write_text(json.dumps(STEP_REPORT))
    rep, rej = normalised(tmp_path, "toolace")
    out_json, out_md = tmp_path / "filter_report.json", tmp_path / "filter_report.md"
    assert main(
        ["stage", "report_filter", "--in", f"steps={steps}", "--in", f"normalise={tmp_path / 'toolace.json'}"]
        + ["--in", f"rejects={rej}", "--out", f"json={out_json}", "--out", f"md={out_md}"]
    ) == 0  # fmt: skip
    merged = json.loads(out_json.read_text())
    assert merged["sources"]["toolace"]["samples"] == rep["samples"]
    assert out_md.read_text().startswith("# Filter report")
