"""Synthetic ACEBench twins: every English category in ACEBench's own file schema, made from a seed.

The embedded default has no network and no ACEBench copy, so the pipeline writes its own data in the
layout `data.load_category` reads (`data_<category>.json` + `possible_answer/data_<category>.json`,
JSONL), scored by the same checkers as the real data. Requests and tools come from the training twins'
tool library (`data/synthetic_tools.py`: values said literally in the request, so a tiny model has a
chance); agent tasks run on our simulated phone classes, and their ground-truth end states are what our
environment reaches by executing the milestone calls. What a twin does not reproduce: the real data's
nested objects and lists as argument values, its domains and wording, and its misspelt class names.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from toolcall_repro.data import synthetic_tools as lib
from toolcall_repro.eval.acebench.agent.environment import Environment
from toolcall_repro.eval.acebench.data import CATEGORIES, NORMAL_CATEGORIES, category_files
from toolcall_repro.eval.acebench.scoring import IRRELEVANT_ANSWER
from toolcall_repro.toolcall import format_tool_calls

DISTRACTORS = 3  # tools offered per entry (needed ones included)
TIME = "2024-07-15 09:30"
PROFILE = {"basic_features": {"UserName": "Eve", "UserEmail": "eve@example.com", "UserHomeLocation": "oslo"}}


def _tools(rng: random.Random, needed: list[str]) -> list[dict]:
    return [t.schema_tool("dict") for t in lib.pick_tools(rng, needed, DISTRACTORS)]


def _request(rng: random.Random, exclude: tuple[str, ...] = ()) -> lib.Request:
    tool = rng.choice([t for t in lib.TOOLS if t.name not in exclude])
    return lib.sample_request(tool, rng, polite=False)


def _normal(category: str, rng: random.Random, i: int) -> list[tuple[dict, dict]]:
    """(prompt row, answer row) pairs; a multi-turn category gives one pair per dialogue turn."""
    cid = f"{category}_{i}"
    if category.startswith("normal_multi_turn"):
        first = _request(rng)
        second = _request(rng, exclude=() if category.endswith("adjust") else (first.call["name"],))
        tools = _tools(rng, [first.call["name"], second.call["name"]])
        history = f"user: {first.text}\n"
        rows = [
            ({"id": f"{cid}_0", "question": history, "function": tools}, _truth(f"{cid}_0", [first.call])),
        ]
        history += f"system: {lib.summary(first, lib.tool_result(first, rng))}\nuser: {second.text}\n"
        rows.append(
            ({"id": f"{cid}_1", "question": history, "function": tools}, _truth(f"{cid}_1", [second.call]))
        )
        return rows
    if category == "normal_single_turn_parallel_function":
        first = _request(rng)
        second = _request(rng, exclude=(first.call["name"],))
        calls, text = [first.call, second.call], f"{first.text}, and also {second.text}"
    else:
        request = _request(rng)
        calls, text = [request.call], request.text
    row = {"id": cid, "question": f"user: {text}\n", "function": _tools(rng, [c["name"] for c in calls])}
    if category == "normal_preference":
        row["profile"] = PROFILE
    else:
        row["time"] = TIME
    return [(row, _truth(cid, calls))]


def _truth(entry_id: str, calls: list[dict]) -> dict:
    return {"id": entry_id, "ground_truth": {c["name"]: c["arguments"] for c in calls}}


def _special(category: str, rng: random.Random, i: int) -> tuple[dict, dict]:
    cid = f"{category}_{i}"
    if category == "special_irrelevant":
        request = _request(rng)
        others = [t.name for t in lib.TOOLS if t.name != request.call["name"]]
        tools = _tools(rng, rng.sample(others, DISTRACTORS))
        truth: object = IRRELEVANT_ANSWER
        text = request.text
    elif category == "special_incomplete":
        tool = rng.choice([t for t in lib.TOOLS if any(p.required for p in t.params)])
        text = f"i need {tool.description.lower().rstrip('.')}."  # no value at all: every required one is missing
        tools = _tools(rng, [tool.name])
        truth = {tool.name: [p.name for p in tool.params if p.required]}
    else:  # special_error_param: an enum value outside its list, said in the request
        while True:
            request = _request(rng)
            enums = [k for k, v in request.call["arguments"].items() if request.tool.param(k).kind == "enum"]
            said = [k for k in enums if f" {request.call['arguments'][k]}" in f" {request.text}"]
            if said:
                break
        key = rng.choice(said)
        wrong = f"{request.call['arguments'][key]}x9"
        text = f" {request.text}".replace(f" {request.call['arguments'][key]}", f" {wrong}", 1).strip()
        tools = _tools(rng, [request.call["name"]])
        truth = {key: [wrong]}
    return {"id": cid, "question": f"user: {text}\n", "function": tools, "time": TIME}, {
        "id": cid,
        "ground_truth": truth,
    }


# Agent tasks on the simulated phone: (question, involved classes, milestone calls, the tools' docs).
_S = {"type": "string"}
_AGENT_DOCS = {
    "turn_on_wifi": ("Turn on WiFi connection.", {}),
    "send_message": (
        "Send a message from one user to another.",
        {"sender_name": _S, "receiver_name": _S, "message": _S},
    ),
    "add_reminder": ("Add a new reminder.", {"title": _S, "description": _S, "time": _S}),
}
_WORDS = ("lunch", "tickets", "keys", "music", "coffee", "report")


def _agent_doc(name: str) -> dict:
    description, props = _AGENT_DOCS[name]
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "dict", "required": list(props), "properties": props},
    }


def _agent(category: str, rng: random.Random, i: int) -> tuple[dict, dict]:
    cid = f"{category}_{i}"
    sender, receiver = rng.sample(sorted(("Eve", "Frank", "Grace")), 2)
    word = rng.choice(_WORDS)
    calls = [
        {"name": "turn_on_wifi", "arguments": {}},
        {
            "name": "send_message",
            "arguments": {"sender_name": sender, "receiver_name": receiver, "message": word},
        },
    ]
    classes = ["BaseApi", "MessageApi"]
    question = f"I am {sender}. Turn on the wifi and send {receiver} the message '{word}'."
    if rng.random() < 0.5:
        calls.append(
            {"name": "add_reminder", "arguments": {"title": word, "description": word, "time": TIME}}
        )
        classes.append("ReminderApi")
        question += f" Then add a reminder titled '{word}' with description '{word}' at {TIME}."
    config = {"BaseApi": {"wifi": False, "logged_in": True}}
    env = Environment(classes, config)
    env.execute_all(calls)
    row = {
        "id": cid,
        "question": question,
        "initial_config": config,
        "path": [],
        "function": [_agent_doc(c["name"]) for c in calls],
        "involved_classes": classes,
    }
    milestones = [format_tool_calls([c], "python") for c in calls]
    return row, {"id": cid, "ground_truth": env.final_state(), "mile_stone": milestones}


def synthesize(out_dir: str | Path, rows: int, seed: int) -> dict[str, int]:
    """Write `rows` entries (dialogues for normal multi-turn) per category; returns lines per category."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    counts = {}
    for category in CATEGORIES:
        rng = random.Random(f"{seed}:{category}")
        pairs: list[tuple[dict, dict]] = []
        for i in range(rows):
            if category in NORMAL_CATEGORIES:
                pairs.extend(_normal(category, rng, i))
            elif category.startswith("special"):
                pairs.append(_special(category, rng, i))
            else:
                pairs.append(_agent(category, rng, i))
        prompt_path, answer_path = category_files(out_dir, category)
        answer_path.parent.mkdir(parents=True, exist_ok=True)
        for path, items in ((prompt_path, [p for p, _ in pairs]), (answer_path, [a for _, a in pairs])):
            path.write_text(
                "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in items), encoding="utf-8"
            )
        counts[category] = len(pairs)
    return counts
