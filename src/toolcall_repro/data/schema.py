"""The normalised sample schema (docs/architecture.md) and its byte-stable parquet/JSONL I/O.

One row a sample, for both settings. JSON columns are serialised with `sort_keys` so equal samples are
byte-identical, and parquet is written through pyarrow with a fixed schema (no pandas metadata) so the
same rows always give the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from toolcall_repro import io
from toolcall_repro.io import atomic_path

SOURCES = ("xlam", "toolace", "looptool", "tooln1")
SETTINGS = ("single_turn", "multi_turn")
ROLES = ("system", "user", "assistant", "tool")

PARQUET_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("source", pa.string()),
        ("setting", pa.string()),
        ("tools", pa.string()),
        ("messages", pa.string()),
        ("ground_truth", pa.string()),
        ("num_turns", pa.int64()),
    ]
)
COLUMNS = tuple(PARQUET_SCHEMA.names)


class MalformedRow(ValueError):
    """A raw row that cannot become a sample; `reason` is a short machine-readable kind."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def dumps(obj: object) -> str:
    """The one JSON serialisation for sample columns (the contract's byte-identity rule)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Sample:
    id: str
    source: str
    setting: str
    tools: str
    messages: str
    ground_truth: str
    num_turns: int

    @classmethod
    def build(cls, *, id: str, source: str, setting: str, tools: list, messages: list, ground_truth: list):
        validate_messages(messages)
        validate_calls(ground_truth, "ground_truth")
        validate_tools(tools)
        num_turns = sum(1 for m in messages if m["role"] == "user")
        return cls(id, source, setting, dumps(tools), dumps(messages), dumps(ground_truth), num_turns)

    def row(self) -> dict:
        return asdict(self)

    @property
    def tools_list(self) -> list[dict]:
        return json.loads(self.tools)

    @property
    def messages_list(self) -> list[dict]:
        return json.loads(self.messages)

    @property
    def ground_truth_list(self) -> list[dict]:
        return json.loads(self.ground_truth)


def validate_tools(tools: object) -> None:
    if not isinstance(tools, list) or not tools:
        raise MalformedRow("empty_tools", "the tool list is missing or empty")
    names = set()
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise MalformedRow("bad_tool", f"tool without a name: {str(tool)[:80]}")
        params = tool.get("parameters")
        if not isinstance(params, dict) or params.get("type") != "object":
            raise MalformedRow("bad_tool", f"tool {tool['name']!r} has no JSON-Schema object parameters")
        if tool["name"] in names:
            raise MalformedRow("bad_tool", f"duplicate tool name {tool['name']!r}")
        names.add(tool["name"])


def validate_calls(calls: object, what: str) -> None:
    if not isinstance(calls, list):
        raise MalformedRow("bad_calls", f"{what} is not a list")
    for call in calls:
        if not (isinstance(call, dict) and isinstance(call.get("name"), str) and call["name"]):
            raise MalformedRow("bad_calls", f"{what} holds a call without a name: {str(call)[:80]}")
        if not isinstance(call.get("arguments"), dict):
            raise MalformedRow("bad_calls", f"{what} call {call['name']!r} has non-dict arguments")


def validate_messages(messages: object) -> None:
    if not isinstance(messages, list) or not messages:
        raise MalformedRow("empty_history", "no messages before the labelled answer")
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise MalformedRow("bad_message", f"malformed message {str(m)[:80]}")
        if "tool_calls" in m:
            validate_calls(m["tool_calls"], "history")
    if not any(m["role"] == "user" for m in messages):
        raise MalformedRow("empty_history", "no user message before the labelled answer")


def check_calls_against_tools(calls: list[dict], tools: list[dict]) -> None:
    """A labelled call must name an offered tool; otherwise the sample cannot be answered."""
    names = {t["name"] for t in tools}
    for call in calls:
        if call["name"] not in names:
            raise MalformedRow("unknown_tool", f"ground truth calls {call['name']!r}, not in the tool list")


# ---------------------------------------------------------------------------------------------- I/O
def write_samples(samples: Iterable[Sample], path: str | Path) -> int:
    """Write samples to parquet atomically; same samples in the same order give the same bytes."""
    rows = [s.row() for s in samples]
    table = pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", store_schema=False)
    return len(rows)


def read_samples(path: str | Path) -> list[Sample]:
    table = pq.read_table(path)
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: not a normalised sample file, missing columns {missing}")
    return [Sample(**{c: row[c] for c in COLUMNS}) for row in table.select(list(COLUMNS)).to_pylist()]


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict | MalformedRow]]:
    """Yield (row index from 0, row) for each non-blank line; an unreadable line yields a MalformedRow."""
    for number, row in io.iter_jsonl(path, keep_malformed=True):
        yield number - 1, MalformedRow("bad_json_line", row.detail) if isinstance(row, io.JsonlError) else row
