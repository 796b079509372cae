"""The one I/O module: atomic writes leave the old file or the new one, JSON lines name their bad line."""

import json

import pytest

from toolcall_repro import io


def test_atomic_write_json_is_sorted_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "sub" / "out.json"
    io.atomic_write_json(path, {"b": 1, "a": "é"})
    assert path.read_text(encoding="utf-8") == '{\n  "a": "é",\n  "b": 1\n}\n'
    io.atomic_write_json(path, {"a": "é"}, indent=None, ensure_ascii=True)
    assert path.read_text() == '{"a": "\\u00e9"}\n'
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path):
    path = tmp_path / "out.jsonl"
    io.write_jsonl([{"x": 1}], path)

    def rows():
        yield {"x": 2}
        raise RuntimeError("job killed")

    with pytest.raises(RuntimeError):
        io.write_jsonl(rows(), path)
    assert path.read_text() == '{"x": 1}\n'
    with pytest.raises(ValueError):
        io.atomic_write_json(path, {"x": float("nan")}, allow_nan=False)
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_write_jsonl_keeps_key_order_when_asked_and_counts_rows(tmp_path):
    path = tmp_path / "raw.jsonl"
    assert io.write_jsonl([{"b": 1, "a": object}], path, sort_keys=False, default=str) == 1
    assert list(json.loads(path.read_text())) == ["b", "a"]


def test_jsonl_reader_names_file_and_line_in_the_callers_error_class(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n[1, 2]\nnot json\n')

    class StageError(ValueError):
        pass

    with pytest.raises(StageError, match=r"rows.jsonl:3: not a JSON object"):
        io.read_jsonl(path, error=StageError)
    rows = list(io.iter_jsonl(path, keep_malformed=True))
    assert [n for n, _ in rows] == [1, 3, 4] and rows[0][1] == {"a": 1}
    assert [r.detail.split(";")[0] for _, r in rows[1:]] == [
        "line holds a list, not an object",
        "Expecting value: line 1 column 1 (char 0)",
    ]
