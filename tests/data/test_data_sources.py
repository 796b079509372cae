"""The real loaders on small hand-written fixture files in each source's schema, malformed rows included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolcall_repro.data.normalise import normalise_file
from toolcall_repro.data.rawfields import normalise_tool
from toolcall_repro.data.schema import MalformedRow, iter_jsonl, read_samples
from toolcall_repro.data.sources import load_rows, looptool_history, tools_from_system

FIXTURES = Path(__file__).parent / "fixtures"


def load(source: str):
    return load_rows(source, iter_jsonl(FIXTURES / f"{source}.jsonl"))


def by_id(result):
    return {s.id: s for s in result.samples}


def rejected(result):
    return {r["row"]: r["reason"] for r in result.rejects}


def test_xlam_loader_normalises_good_rows_and_rejects_each_malformed_kind():
    result = load("xlam")
    samples = by_id(result)
    assert result.rows == 8
    assert sorted(samples) == ["xlam:0", "xlam:1", "xlam:7"]
    assert rejected(result) == {
        2: "bad_json",
        3: "missing_field",
        4: "empty_tools",
        5: "bad_json_line",
        6: "unknown_tool",
    }

    parallel = samples["xlam:0"]
    assert parallel.setting == "single_turn" and parallel.num_turns == 1
    assert parallel.ground_truth_list == [
        {"arguments": {"type": "beta"}, "name": "live_giveaways_by_type"},
        {"arguments": {"type": "game"}, "name": "live_giveaways_by_type"},
    ]
    # xLAM's parameter dialect becomes a JSON-Schema object; a default makes a parameter optional
    schema = parallel.tools_list[0]["parameters"]
    assert schema == {
        "type": "object",
        "properties": {
            "type": {
                "description": "The type of giveaway (game, loot, beta).",
                "type": "string",
                "default": "game",
            }
        },
        "required": [],
    }
    fact = samples["xlam:1"].tools_list[0]["parameters"]
    assert fact["required"] == ["number"]  # ", optional" types are not required
    assert fact["properties"]["ids"]["type"] == "array"
    assert "—" in samples["xlam:1"].messages  # unicode kept (ensure_ascii=False)
    assert samples["xlam:7"].ground_truth_list[0]["arguments"] == {"kind": "math", "number": 7}


def test_toolace_loader_splits_one_sample_per_call_turn_with_history():
    result = load("toolace")
    samples = by_id(result)
    assert sorted(samples) == ["toolace:0:0", "toolace:0:1", "toolace:5:0"]
    assert rejected(result) == {
        1: "no_tools_in_system",
        2: "bad_call",
        3: "no_call_turn",
        4: "empty_conversation",
    }

    first, second = samples["toolace:0:0"], samples["toolace:0:1"]
    assert first.messages_list == [{"role": "user", "content": "What's the weather in Oslo for 3 days?"}]
    assert first.ground_truth_list == [{"name": "Weather_Forecast", "arguments": {"city": "Oslo", "days": 3}}]
    roles = [m["role"] for m in second.messages_list]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert second.messages_list[1]["tool_calls"] == first.ground_truth_list
    assert second.num_turns == 2
    assert len(second.ground_truth_list) == 2  # a parallel call turn stays one sample
    # ToolACE writes "dict" and "float": normalised to JSON Schema words
    rate = next(t for t in second.tools_list if t["name"] == "Currency_Rate")["parameters"]
    assert rate["type"] == "object" and rate["properties"]["amount"]["type"] == "number"
    # bracketed prose is a plain assistant message, not a call
    assert samples["toolace:5:0"].messages_list[1] == {
        "role": "assistant",
        "content": "[Note] I will check that.",
    }


def test_looptool_loader_rebuilds_role_messages_from_the_qwen_formatted_input():
    result = load("looptool")
    samples = by_id(result)
    assert sorted(samples) == ["looptool:0", "looptool:1", "looptool:2", "looptool:3"]
    assert rejected(result) == {
        4: "no_tools_in_instruction",
        5: "bad_call",
        6: "missing_field",
        7: "bad_history",
    }

    assert samples["looptool:0"].messages_list == [{"role": "user", "content": "Hotels in Porto?"}]
    history = samples["looptool:1"].messages_list
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1]["reasoning_content"] == "search first"
    assert history[1]["tool_calls"] == [
        {"name": "search_hotels", "arguments": {"city": "Lisbon", "stars": 4}}
    ]
    assert history[2]["content"] == '{"hotels": ["h1", "h2"]}'
    assert samples["looptool:1"].num_turns == 2  # the tool-response user block does not count
    assert samples["looptool:1"].setting == "multi_turn"
    assert samples["looptool:2"].ground_truth_list == []  # plain-text answer = "no call"
    assert len(samples["looptool:3"].ground_truth_list) == 2
    # OpenAI-style {"type": "function", "function": {...}} tools are unwrapped
    assert {t["name"] for t in samples["looptool:0"].tools_list} == {"search_hotels", "book_hotel"}


def test_tooln1_loader_maps_function_call_and_observation_turns():
    result = load("tooln1")
    samples = by_id(result)
    assert sorted(samples) == ["tooln1:0", "tooln1:1"]
    assert rejected(result) == {2: "bad_json", 3: "empty_tools", 4: "bad_message"}
    history = samples["tooln1:0"].messages_list
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1]["tool_calls"] == [{"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}]
    assert samples["tooln1:0"].ground_truth_list == [
        {"name": "get_time", "arguments": {"zone": "America/Lima"}}
    ]


@pytest.mark.parametrize("source", ["xlam", "toolace", "looptool", "tooln1"])
def test_normalise_file_writes_samples_rejects_and_report(tmp_path, source):
    out, rej, rep = tmp_path / "s.parquet", tmp_path / "r.jsonl", tmp_path / "rep.json"
    report = normalise_file(source, FIXTURES / f"{source}.jsonl", out, rej, rep)
    samples = read_samples(out)
    rejects = [json.loads(line) for line in rej.read_text().splitlines()]
    assert report["samples"] == len(samples) > 0
    assert report["rows"] == report["rows_kept"] + report["rows_rejected"]
    assert report["rows_rejected"] == len(rejects) == sum(report["rejects"].values()) > 0
    assert all(r["source"] == source and r["reason"] and "detail" in r for r in rejects)
    assert json.loads(rep.read_text()) == report
    # every raw row is accounted for: kept (with its samples) or rejected, never silently lost
    kept_rows = {int(s.id.split(":")[1]) for s in samples}
    assert kept_rows.isdisjoint({r["row"] for r in rejects})
    assert len(kept_rows) + len(rejects) == report["rows"]


def test_normalise_tool_rejects_nameless_and_non_object_parameters():
    with pytest.raises(MalformedRow, match="bad_tool"):
        normalise_tool({"description": "no name"})
    with pytest.raises(MalformedRow, match="bad_tool"):
        normalise_tool({"name": "f", "parameters": ["a"]})


def test_tools_from_system_skips_bracketed_text_before_the_tool_list():
    system = 'Rules [1] and [2].\nTools: [{"name": "f", "parameters": {}}] end'
    assert tools_from_system(system) == [{"name": "f", "parameters": {}}]


def test_looptool_history_groups_consecutive_tool_responses():
    text = (
        "q<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
        '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response>"
    )
    messages = looptool_history(text)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [m["content"] for m in messages[2:]] == ["1", "2"]
