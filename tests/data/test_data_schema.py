"""The normalised sample schema: validation, and parquet that is byte-identical for identical samples."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from toolcall_repro.data.schema import (
    COLUMNS,
    MalformedRow,
    Sample,
    iter_jsonl,
    read_samples,
    write_samples,
)
from toolcall_repro.io import write_jsonl

TOOL = {"name": "f", "description": "", "parameters": {"type": "object", "properties": {}, "required": []}}


def make(i: int, **kw) -> Sample:
    args = dict(
        id=f"xlam:{i}",
        source="xlam",
        setting="single_turn",
        tools=[TOOL],
        messages=[{"role": "user", "content": f"q{i} é"}],
        ground_truth=[{"name": "f", "arguments": {"b": 2, "a": [1, {"z": 0, "y": 1}]}}],
    )
    args.update(kw)
    return Sample.build(**args)


def test_json_columns_are_sorted_and_unicode_is_kept():
    s = make(0)
    assert s.ground_truth == '[{"arguments": {"a": [1, {"y": 1, "z": 0}], "b": 2}, "name": "f"}]'
    assert "é" in s.messages


def test_num_turns_counts_user_messages_only():
    s = make(
        0,
        messages=[
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {}}]},
            {"role": "tool", "content": "r"},
            {"role": "user", "content": "b"},
        ],
    )
    assert s.num_turns == 2


@pytest.mark.parametrize(
    "kw, reason",
    [
        ({"tools": []}, "empty_tools"),
        ({"tools": [{"name": "f", "parameters": {"type": "array"}}]}, "bad_tool"),
        ({"tools": [TOOL, TOOL]}, "bad_tool"),
        ({"messages": []}, "empty_history"),
        ({"messages": [{"role": "tool", "content": "r"}]}, "empty_history"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "bad_message"),
        ({"ground_truth": [{"name": "f", "arguments": "x"}]}, "bad_calls"),
        ({"ground_truth": {"name": "f"}}, "bad_calls"),
    ],
)
def test_build_rejects_malformed_samples_with_a_reason(kw, reason):
    with pytest.raises(MalformedRow) as e:
        make(0, **kw)
    assert e.value.reason == reason


def test_parquet_roundtrip_and_byte_identity(tmp_path):
    samples = [make(i) for i in range(5)]
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_samples(samples, a)
    write_samples([make(i) for i in range(5)], b)
    assert a.read_bytes() == b.read_bytes()
    assert read_samples(a) == samples
    assert tuple(pq.read_schema(a).names) == COLUMNS
    write_samples(list(reversed(samples)), b)
    assert a.read_bytes() != b.read_bytes()  # order is part of the content


def test_empty_parquet_keeps_the_schema(tmp_path):
    path = tmp_path / "empty.parquet"
    write_samples([], path)
    assert read_samples(path) == []
    assert tuple(pq.read_schema(path).names) == COLUMNS


def test_read_samples_refuses_a_file_without_the_schema(tmp_path):
    import pyarrow as pa

    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}), path)
    with pytest.raises(ValueError, match="missing columns"):
        read_samples(path)


def test_iter_jsonl_reports_unreadable_lines_and_skips_blank_ones(tmp_path):
    path = tmp_path / "raw.jsonl"
    path.write_text('{"a": 1}\n\n[1, 2]\n{"a": \n{"a": 2}\n')
    rows = list(iter_jsonl(path))
    assert [i for i, _ in rows] == [0, 2, 3, 4]
    assert rows[0][1] == {"a": 1} and rows[3][1] == {"a": 2}
    assert isinstance(rows[1][1], MalformedRow) and rows[1][1].reason == "bad_json_line"
    assert isinstance(rows[2][1], MalformedRow) and rows[2][1].reason == "bad_json_line"


def test_write_jsonl_sorts_keys(tmp_path):
    path = tmp_path / "x.jsonl"
    assert write_jsonl([{"b": 1, "a": 2}], path) == 1
    assert path.read_text() == '{"a": 2, "b": 1}\n'
    assert json.loads(path.read_text()) == {"a": 2, "b": 1}
