"""One loader per raw source: rows in the source's own schema -> normalised samples + rejected rows.

Source schemas (what `download` writes, and what `synthetic` imitates):

* ``xlam`` (xLAM function-calling 60k): ``query`` str, ``tools`` JSON string of ``{name, description,
  parameters}`` with xLAM-style parameters ``{pname: {type: "str"|"int, optional"|..., description,
  default?}}``, ``answers`` JSON string of ``{name, arguments}``. One sample a row.
* ``toolace`` (ToolACE): ``system`` text holding the tool list as a JSON list, ``conversations`` list of
  ``{from: user|assistant|tool, value}``; assistant calls are Python-style ``[f(a=1)]``. One sample per
  assistant call turn (history = every turn before it).
* ``looptool`` (LoopTool-23k): ``instruction`` (system prompt with one tool JSON a line inside
  ``<tools>...</tools>``), ``input`` (the Qwen-formatted history without its leading
  ``<|im_start|>user\\n`` and trailing ``<|im_end|>\\n``; tool results are user turns of ``<tool_response>``
  blocks), ``output`` (the label: ``<tool_call>`` blocks, or a plain-text answer). One sample a row.
* ``tooln1`` (Tool-N1's RL data, for the filter policy): ``tools`` list (or JSON string), ``conversations``
  of ``{from: human|gpt|function_call|observation, value}``, ``answer`` (calls, list or JSON string),
  ``raw_system`` (ignored). One sample a row.

The sources' own system prompts are not kept: tools go to the ``tools`` column and the prompt is rendered
later by ``protocol.render`` with the protocol's system prompt. Tool results become ``tool`` messages, so
``num_turns`` (user messages) never counts them. A row that cannot become a sample raises ``MalformedRow``
(or ``ToolCallParseError`` from the one parser), is counted by reason and written to the rejects file.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from toolcall_repro.data import rawfields as rf
from toolcall_repro.data.schema import MalformedRow, Sample, check_calls_against_tools
from toolcall_repro.toolcall import ToolCallParseError, parse_tool_calls


# --------------------------------------------------------------------------------------------------------
# xLAM
# --------------------------------------------------------------------------------------------------------
def xlam_samples(index: int, row: dict) -> list[Sample]:
    query = rf.text(row, "query").strip()
    if not query:
        raise MalformedRow("missing_field", "empty query")
    tools = rf.tool_list(rf.load_json_field(row, "tools"))
    answers = rf.calls(rf.load_json_field(row, "answers"), "answers")
    if not answers:
        raise MalformedRow("empty_answer", "xLAM row without a labelled call")
    check_calls_against_tools(answers, tools)
    messages = [{"role": "user", "content": query}]
    return [
        Sample.build(
            id=f"xlam:{index}",
            source="xlam",
            setting="single_turn",
            tools=tools,
            messages=messages,
            ground_truth=answers,
        )
    ]


# --------------------------------------------------------------------------------------------------------
# ToolACE
# --------------------------------------------------------------------------------------------------------
_ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "tool": "tool",
    "observation": "tool",
    "function": "tool",
    "function_call": "function_call",
}


def tools_from_system(system: str) -> list:
    """The first JSON list of named objects embedded in a system prompt (ToolACE keeps its tools there)."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\[", system):
        try:
            value, _ = decoder.raw_decode(system, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, list) and value and all(isinstance(t, dict) and "name" in t for t in value):
            return value
    raise MalformedRow("no_tools_in_system", "no JSON tool list found in the system prompt")


def _turns(row: dict) -> list[tuple[str, str]]:
    conv = rf.load_json_field(row, "conversations")
    if not isinstance(conv, list) or not conv:
        raise MalformedRow("empty_conversation", "conversations missing or empty")
    turns = []
    for turn in conv:
        if not isinstance(turn, dict) or turn.get("from") not in _ROLE_ALIASES:
            raise MalformedRow("bad_message", f"turn without a known 'from': {str(turn)[:80]}")
        value = turn.get("value")
        if not isinstance(value, str):
            value = json.dumps(value, sort_keys=True, ensure_ascii=False)
        turns.append((_ROLE_ALIASES[turn["from"]], value))
    return turns


def toolace_samples(index: int, row: dict) -> list[Sample]:
    tools = rf.tool_list(tools_from_system(rf.text(row, "system")))
    history: list[dict] = []
    samples: list[Sample] = []
    for role, value in _turns(row):
        if role == "assistant":
            text = value.strip()
            # LoopTool's own converter uses the same test: a call turn is one bracketed list
            calls = parse_tool_calls(text, "python") if text.startswith("[") and text.endswith("]") else []
            if calls:
                check_calls_against_tools(calls, tools)
                samples.append(
                    Sample.build(
                        id=f"toolace:{index}:{len(samples)}",
                        source="toolace",
                        setting="single_turn",
                        tools=tools,
                        messages=list(history),
                        ground_truth=calls,
                    )
                )
                history.append({"role": "assistant", "content": "", "tool_calls": calls})
            else:
                history.append({"role": "assistant", "content": text})
        elif role == "function_call":
            raise MalformedRow("bad_message", "ToolACE has no function_call turns")
        else:
            history.append({"role": role, "content": value})
    if not samples:
        raise MalformedRow("no_call_turn", "conversation without an assistant tool call")
    return samples


# --------------------------------------------------------------------------------------------------------
# LoopTool
# --------------------------------------------------------------------------------------------------------
_TOOLS_BLOCK = re.compile(r"<tools>(.*?)</tools>", re.DOTALL)
_CHAT_BLOCK = re.compile(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>", re.DOTALL)
_RESPONSE_BLOCK = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_CALL_SPAN = re.compile(r"<tool_call>.*</tool_call>", re.DOTALL)


def tools_from_instruction(instruction: str) -> list:
    # the prompt also *mentions* "<tools></tools> XML tags": the tool list is the last non-empty block
    blocks = [b.strip() for b in _TOOLS_BLOCK.findall(instruction) if b.strip()]
    if not blocks:
        raise MalformedRow("no_tools_in_instruction", "no <tools>...</tools> block")
    body = blocks[-1]
    if body.startswith("["):
        try:
            return json.loads(body)
        except json.JSONDecodeError as e:
            raise MalformedRow("bad_json", f"tools block: {e}") from e
    tools = []
    for line in body.splitlines():
        if line.strip():
            try:
                tools.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise MalformedRow("bad_json", f"tools block line: {e}") from e
    return tools


def _assistant_message(content: str) -> dict:
    think = _THINK_BLOCK.search(content)
    message: dict = {"role": "assistant"}
    if think:
        message["reasoning_content"] = think.group(1).strip()
        content = _THINK_BLOCK.sub("", content, count=1)
    span = _CALL_SPAN.search(content)
    if span:
        message["tool_calls"] = parse_tool_calls(span.group(0), "xml_json")
        content = content[: span.start()] + content[span.end() :]
    message["content"] = content.strip()
    return message


def looptool_history(text: str) -> list[dict]:
    """LoopTool's Qwen-formatted ``input`` -> role messages (tool-response user turns -> tool messages)."""
    if not text.strip():
        raise MalformedRow("empty_history", "empty input")
    full = "<|im_start|>user\n" + text
    if not full.rstrip().endswith("<|im_end|>"):
        full = full.rstrip("\n") + "<|im_end|>"
    messages, pos = [], 0
    for m in _CHAT_BLOCK.finditer(full):
        if full[pos : m.start()].strip():
            raise MalformedRow("bad_history", f"text outside chat blocks: {full[pos : m.start()][:60]!r}")
        pos = m.end()
        role, content = m.group(1), m.group(2)
        if role == "user":
            responses = _RESPONSE_BLOCK.findall(content)
            if responses and not _RESPONSE_BLOCK.sub("", content).strip():
                messages.extend({"role": "tool", "content": r.strip()} for r in responses)
            else:
                messages.append({"role": "user", "content": content.strip()})
        elif role == "assistant":
            messages.append(_assistant_message(content))
        else:
            raise MalformedRow("bad_history", f"unexpected role {role!r} in input")
    if full[pos:].strip():
        raise MalformedRow("bad_history", f"text after the last chat block: {full[pos:][:60]!r}")
    return messages


def looptool_samples(index: int, row: dict) -> list[Sample]:
    tools = rf.tool_list(tools_from_instruction(rf.text(row, "instruction")))
    messages = looptool_history(rf.text(row, "input"))
    output = rf.text(row, "output").strip()
    if not output:
        raise MalformedRow("empty_output", "empty label")
    calls = parse_tool_calls(output, "xml_json")  # [] for a plain-text answer
    check_calls_against_tools(calls, tools)
    return [
        Sample.build(
            id=f"looptool:{index}",
            source="looptool",
            setting="multi_turn",
            tools=tools,
            messages=messages,
            ground_truth=calls,
        )
    ]


# --------------------------------------------------------------------------------------------------------
# Tool-N1
# --------------------------------------------------------------------------------------------------------
def tooln1_samples(index: int, row: dict) -> list[Sample]:
    tools = rf.tool_list(rf.load_json_field(row, "tools"))
    answer = rf.calls(rf.load_json_field(row, "answer"), "answer")
    if not answer:
        raise MalformedRow("empty_answer", "Tool-N1 row without a labelled call")
    check_calls_against_tools(answer, tools)
    messages = []
    for role, value in _turns(row):
        if role == "function_call":
            try:
                raw_calls = json.loads(value)
            except json.JSONDecodeError as e:
                raise MalformedRow("bad_json", f"function_call turn: {e}") from e
            messages.append(
                {"role": "assistant", "content": "", "tool_calls": rf.calls(raw_calls, "history")}
            )
        else:
            messages.append({"role": role, "content": value})
    return [
        Sample.build(
            id=f"tooln1:{index}",
            source="tooln1",
            setting="single_turn",
            tools=tools,
            messages=messages,
            ground_truth=answer,
        )
    ]


LOADERS: dict[str, Callable[[int, dict], list[Sample]]] = {
    "xlam": xlam_samples,
    "toolace": toolace_samples,
    "looptool": looptool_samples,
    "tooln1": tooln1_samples,
}


# --------------------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------------------
@dataclass
class LoadResult:
    source: str
    rows: int = 0
    samples: list[Sample] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)

    def reject_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(r["reason"] for r in self.rejects).items()))


def load_rows(source: str, rows: Iterable[tuple[int, dict | MalformedRow]]) -> LoadResult:
    """Normalise (index, raw row) pairs; every row ends as samples or as one reject with its reason."""
    if source not in LOADERS:
        raise ValueError(f"unknown source {source!r}; expected one of {sorted(LOADERS)}")
    loader = LOADERS[source]
    result = LoadResult(source)
    seen_ids: set[str] = set()
    for index, row in rows:
        result.rows += 1
        try:
            if isinstance(row, MalformedRow):
                raise row
            samples = loader(index, row)
        except MalformedRow as e:
            result.rejects.append(_reject(source, index, e.reason, e.detail, row))
            continue
        except ToolCallParseError as e:
            result.rejects.append(_reject(source, index, "bad_call", str(e), row))
            continue
        for s in samples:
            if s.id in seen_ids:
                raise ValueError(f"duplicate sample id {s.id}: row indices must be unique")
            seen_ids.add(s.id)
        result.samples.extend(samples)
    return result


def _reject(source: str, index: int, reason: str, detail: str, row: object) -> dict:
    raw = None if isinstance(row, MalformedRow) else row
    return {"source": source, "row": index, "reason": reason, "detail": detail, "raw": raw}
