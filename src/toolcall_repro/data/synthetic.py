"""Synthetic twins of the raw sources: rows in exactly the sources' own schemas, so the real loaders run on
them and the embedded default never needs the network.

* ``xlam``: one templated request (or two joined by "and": parallel calls) over a few offered tools.
* ``toolace``: conversations of 1-3 exchanges (request, Python-style call, tool result, summary).
* ``looptool``: LoopTool-style trajectories of 1-7 user turns, each with its call, tool response and
  summary; the label is the next call of the last turn, or a plain-text answer, or several calls in one
  output (the multi-turn filter keeps 2-6 turns and drops several-call labels, so both have work to do).
* ``tooln1``: Tool-N1's RL rows (single request, calls as the answer).

Each source also gets a few malformed rows on purpose (bad JSON, missing fields, empty tools, unparsable
calls, unknown tools, a line that is not JSON) so the rejects path runs in every pipeline run.
Same (source, config, seed) -> byte-identical file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from toolcall_repro.data.synthetic_tools import (
    THANKS,
    TOOLS,
    WELCOME,
    Request,
    pick_tools,
    sample_request,
    summary,
    tool_result,
)
from toolcall_repro.io import atomic_write_text, write_jsonl
from toolcall_repro.toolcall import format_tool_calls

TOOLACE_SYSTEM = (
    "you can call the functions below to answer the user.\n"
    "here is a list of functions in json format that you can invoke:\n{tools}\n"
    "answer with the calls in the form [func_name(param=value)] and nothing else."
)
LOOPTOOL_SYSTEM = (
    "you help the user with tools. call a tool when it answers the request, check every argument against "
    "its schema, and summarise when the task is done.\n\n# tools\n\n<tools>\n{tools}\n</tools>\n\n"
    'for each call, return a json object inside <tool_call></tool_call> tags:\n<tool_call>\n{{"name": '
    '<function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
DEFAULTS: dict[str, dict] = {
    "xlam": {"rows": 300, "malformed": 5, "parallel_fraction": 0.2, "distractors": [1, 3]},
    "toolace": {"rows": 120, "malformed": 4, "exchanges": [1, 3], "distractors": [1, 2]},
    "looptool": {
        "rows": 400,
        "malformed": 4,
        "turn_weights": [2, 2, 2, 2, 2, 1, 1],
        "text_fraction": 0.1,
        "multi_call_fraction": 0.1,
        "pool": [2, 4],
        "distractors": [0, 2],
    },
    "tooln1": {"rows": 100, "malformed": 3, "distractors": [1, 3]},
}


def _join(requests: list[Request]) -> str:
    return " and ".join(r.text for r in requests)


def _requests(rng: random.Random, tools: list, k: int) -> list[Request]:
    """k requests for k distinct tools; only the first may open with a polite prefix."""
    return [sample_request(t, rng, polite=i == 0) for i, t in enumerate(rng.sample(tools, k))]


# --------------------------------------------------------------------------------------------------------
# well-formed rows
# --------------------------------------------------------------------------------------------------------
def xlam_row(rng: random.Random, cfg: dict) -> dict:
    k = 2 if rng.random() < cfg["parallel_fraction"] else 1
    requests = _requests(rng, list(TOOLS), k)
    tools = pick_tools(rng, [r.call["name"] for r in requests], k + rng.randint(*cfg["distractors"]))
    return {
        "query": _join(requests),
        "tools": json.dumps([t.xlam_tool() for t in tools]),
        "answers": json.dumps([r.call for r in requests]),
    }


def _exchange(rng: random.Random, request: Request) -> tuple[dict, str]:
    result = tool_result(request, rng)
    return result, summary(request, result)


def toolace_row(rng: random.Random, cfg: dict) -> dict:
    pool = rng.sample(list(TOOLS), 3)
    requests = [sample_request(rng.choice(pool), rng) for _ in range(rng.randint(*cfg["exchanges"]))]
    used = [r.call["name"] for r in requests]
    tools = pick_tools(rng, used, len(set(used)) + rng.randint(*cfg["distractors"]))
    conversations = []
    for request in requests:
        result, text = _exchange(rng, request)
        conversations += [
            {"from": "user", "value": request.text},
            {"from": "assistant", "value": format_tool_calls([request.call], "python")},
            {"from": "tool", "value": json.dumps([{"name": request.call["name"], "results": result}])},
            {"from": "assistant", "value": text},
        ]
    if rng.random() < 0.3:
        conversations += [
            {"from": "user", "value": rng.choice(THANKS)},
            {"from": "assistant", "value": rng.choice(WELCOME)},
        ]
    system = TOOLACE_SYSTEM.format(tools=json.dumps([t.schema_tool("dict") for t in tools]))
    return {"system": system, "conversations": conversations}


def _chat(role: str, content: str) -> str:
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"


def _looptool_input(blocks: list[str]) -> str:
    """LoopTool's `input`: the chat-formatted history minus its first user header and last end tag."""
    text = "".join(blocks)
    return text.removeprefix("<|im_start|>user\n").removesuffix("<|im_end|>\n")


def looptool_row(rng: random.Random, cfg: dict) -> dict:
    weights = cfg["turn_weights"]
    turns = rng.choices(range(1, len(weights) + 1), weights=weights)[0]
    pool = rng.sample(list(TOOLS), rng.randint(*cfg["pool"]))
    kind = rng.choices(
        ["text", "multi", "single"],
        weights=[
            cfg["text_fraction"],
            cfg["multi_call_fraction"],
            1 - cfg["text_fraction"] - cfg["multi_call_fraction"],
        ],
    )[0]
    blocks: list[str] = []
    for turn in range(turns):
        last = turn == turns - 1
        if last and kind == "multi":
            requests = _requests(rng, pool, 2)
            blocks.append(_chat("user", _join(requests)))
            output = format_tool_calls([r.call for r in requests], "xml_json")
            break
        request = sample_request(rng.choice(pool), rng)
        blocks.append(_chat("user", request.text))
        if last and kind == "single":
            output = format_tool_calls([request.call], "xml_json")
            break
        result, text = _exchange(rng, request)
        blocks.append(_chat("assistant", format_tool_calls([request.call], "xml_json")))
        blocks.append(_chat("user", f"<tool_response>\n{json.dumps(result)}\n</tool_response>"))
        if last:  # kind == "text": the label is the summary after the tool result
            output = text
        else:
            blocks.append(_chat("assistant", text))
    tools = pick_tools(rng, [t.name for t in pool], len(pool) + rng.randint(*cfg["distractors"]))
    instruction = LOOPTOOL_SYSTEM.format(tools="\n".join(json.dumps(t.schema_tool()) for t in tools))
    return {"instruction": instruction, "input": _looptool_input(blocks), "output": output}


def tooln1_row(rng: random.Random, cfg: dict) -> dict:
    requests = _requests(rng, list(TOOLS), 1)
    tools = pick_tools(rng, [requests[0].call["name"]], 1 + rng.randint(*cfg["distractors"]))
    return {
        "tools": json.dumps([t.schema_tool() for t in tools]),
        "conversations": [{"from": "human", "value": requests[0].text}],
        "answer": json.dumps([r.call for r in requests]),
        "raw_system": "",
    }


ROW_MAKERS: dict[str, Callable[[random.Random, dict], dict]] = {
    "xlam": xlam_row,
    "toolace": toolace_row,
    "looptool": looptool_row,
    "tooln1": tooln1_row,
}


# --------------------------------------------------------------------------------------------------------
# malformed rows: each takes a well-formed row and breaks it in one documented way
# --------------------------------------------------------------------------------------------------------
def _set(key: str, value: object) -> Callable[[dict], dict]:
    return lambda row: row | {key: value}


def _drop(key: str) -> Callable[[dict], dict]:
    return lambda row: {k: v for k, v in row.items() if k != key}


def _truncate(key: str) -> Callable[[dict], dict]:
    return lambda row: row | {key: row[key][: len(row[key]) // 2]}


def _assistant_reply(value: str) -> Callable[[dict], dict]:
    """A ToolACE row whose first user turn is answered by `value` (a malformed Python-style call)."""
    return lambda row: (
        row | {"conversations": [row["conversations"][0], {"from": "assistant", "value": value}]}
    )


def _not_json(row: dict) -> str:
    return json.dumps(row)[:40]  # a line cut mid-way: not JSON at all


_UNKNOWN_CALL = {"name": "teleport", "arguments": {"to": "mars"}}
MALFORMED: dict[str, list[tuple[str, Callable]]] = {
    "xlam": [
        ("bad_json", _truncate("tools")),
        ("missing_field", _drop("answers")),
        ("empty_tools", _set("tools", "[]")),
        ("unknown_tool", _set("answers", json.dumps([_UNKNOWN_CALL]))),
        ("bad_json_line", _not_json),
    ],
    "toolace": [
        ("no_tools_in_system", _set("system", "you can call functions.")),
        ("bad_call", _assistant_reply("[get_weather(city=]")),
        ("empty_conversation", _set("conversations", [])),
        ("bad_call", _assistant_reply("[get_weather('paris')]")),
    ],
    "looptool": [
        ("no_tools_in_instruction", _set("instruction", "you help the user with tools.")),
        (
            "bad_call",
            _set("output", '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'),
        ),
        ("missing_field", _drop("input")),
        ("unknown_tool", _set("output", format_tool_calls([_UNKNOWN_CALL], "xml_json"))),
    ],
    "tooln1": [
        ("bad_json", _truncate("answer")),
        ("empty_tools", _set("tools", "[]")),
        ("missing_field", _drop("conversations")),
    ],
}


def generate_rows(source: str, config: dict | None, seed: int) -> tuple[list[dict | str], list[dict]]:
    """Raw rows for one source (dicts, or a str for a deliberately broken line) and, for each malformed row,
    ``{"row": index, "reason": expected reason}`` so tests can check the loaders count them right."""
    if source not in ROW_MAKERS:
        raise ValueError(f"unknown source {source!r}; expected one of {sorted(ROW_MAKERS)}")
    cfg = DEFAULTS[source] | (config or {})
    rng = random.Random(f"{source}:{seed}")  # str seeds are hashed with sha512: stable across processes
    make = ROW_MAKERS[source]
    rows: list[dict | str] = [make(rng, cfg) for _ in range(int(cfg["rows"]))]
    kinds = MALFORMED[source]
    planted = []
    for i in range(int(cfg["malformed"])):
        reason, breaker = kinds[i % len(kinds)]
        index = rng.randint(0, len(rows))
        rows.insert(index, breaker(make(rng, cfg)))
        planted = [p if p["row"] < index else p | {"row": p["row"] + 1} for p in planted]
        planted.append({"row": index, "reason": reason})
    return rows, sorted(planted, key=lambda p: p["row"])


def write_raw(rows: list[dict | str], path: str | Path) -> int:
    """JSONL in the source's schema; a str row is written verbatim (the not-JSON line)."""
    lines = (row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows)
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))
    return len(rows)


def synthesize(source: str, config: dict, seed: int, out: str, planted: str | None = None) -> None:
    rows, planted_rows = generate_rows(source, config, seed)
    n = write_raw(rows, out)
    if planted:
        write_jsonl(planted_rows, planted)
    print(f"{source}: wrote {n} raw rows ({len(planted_rows)} malformed on purpose) to {out}")


def synthesize_source(j) -> None:
    """The synthesize_source job (toolcall_repro.job): config is this source's data.synthetic subtree, the
    source an option, the seed seeds.data; output.raw the JSONL (output.planted, if named: the planted
    malformed rows)."""
    planted = j.paths("planted", "output")
    synthesize(j.option("source"), j.config, j.seed("data"), j.out("raw"), planted[0] if planted else None)
