"""Parse, format and canonicalise tool calls: the only tool-call parser in the package.

Two output formats, as the paper uses them:

* ``xml_json`` (Qwen / Tool-N1 / LoopTool): an optional leading ``<think>...</think>`` block, then zero or
  more ``<tool_call>{json}</tool_call>`` blocks. A block holds one ``{"name", "arguments"}`` object or a JSON
  list of them. Text outside the blocks is allowed by the parser (the single-turn reward checks layout
  separately with :func:`check_xml_layout`). No block at all means "no call" and parses to ``[]``.
* ``python`` (BFCL's default prompt): an optional leading ``<think>`` block and optional code fence, then
  ``[func(a=1, b="x"), mod.g()]`` (or one bare call). Arguments are keyword-only literals read from the
  ``ast`` tree; nothing is evaluated and no attribute is looked up (a dotted name is only a string). Text that
  is not Python call syntax at all is a plain answer and parses to ``[]``.

Every malformed output raises :class:`ToolCallParseError`, whose ``reason`` is a short stable code
(listed in ``PARSE_ERROR_REASONS``) and whose message says what was wrong.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from toolcall_repro.calls import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    PARSE_ERROR_REASONS,
    ToolCallParseError,
    calls_equal,
    canonical_call,
    canonical_calls,
    canonical_json,
    check_call,
)
from toolcall_repro.toolcall_python import format_python_calls, parse_python_calls

__all__ = [  # the call model lives in calls.py and the Python format in toolcall_python.py
    "FORMATS",
    "MAX_INPUT_CHARS",
    "PARSE_ERROR_REASONS",
    "ToolCallParseError",
    "calls_equal",
    "canonical_call",
    "canonical_calls",
    "canonical_json",
    "check_xml_layout",
    "format_tool_calls",
    "parse_tool_calls",
    "split_think",
]

FORMATS = ("xml_json", "python")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
MAX_INPUT_CHARS = 1_000_000  # refuse pathological outputs before any parser sees them

_FENCE_RE = re.compile(r"\A```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?```\Z", re.DOTALL)


# --------------------------------------------------------------------------------------------------------
# think block
# --------------------------------------------------------------------------------------------------------


def split_think(text: str) -> tuple[str | None, str]:
    """Split an optional leading ``<think>...</think>`` block off ``text``.

    Returns ``(reasoning or None, rest)``. A ``<think>`` that is not closed, or any think tag after the
    leading block, raises :class:`ToolCallParseError`.
    """
    stripped = text.lstrip()
    reasoning = None
    rest = text
    if stripped.startswith(THINK_OPEN):
        end = stripped.find(THINK_CLOSE)
        if end < 0:
            raise ToolCallParseError("think_unclosed", "<think> is never closed (truncated output?)")
        reasoning = stripped[len(THINK_OPEN) : end]
        if THINK_OPEN in reasoning:
            raise ToolCallParseError("think_misplaced", "nested <think>")
        rest = stripped[end + len(THINK_CLOSE) :]
    if THINK_OPEN in rest or THINK_CLOSE in rest:
        raise ToolCallParseError("think_misplaced", "think tag outside a single leading <think> block")
    return reasoning, rest


# --------------------------------------------------------------------------------------------------------
# xml_json
# --------------------------------------------------------------------------------------------------------


def _xml_blocks(rest: str) -> tuple[list[str], list[str]]:
    """Split text (think block already removed) into tool-call block bodies and the text between them."""
    bodies: list[str] = []
    outside: list[str] = []
    pos = 0
    open_at = -1
    for m in re.finditer(r"</?tool_call>", rest):
        tag = m.group(0)
        if tag == CALL_OPEN:
            if open_at >= 0:
                raise ToolCallParseError("tag_nested", "<tool_call> opened inside another <tool_call>")
            outside.append(rest[pos : m.start()])
            open_at = m.end()
        else:
            if open_at < 0:
                raise ToolCallParseError("tag_unbalanced", "</tool_call> without an opening <tool_call>")
            bodies.append(rest[open_at : m.start()])
            open_at = -1
            pos = m.end()
    if open_at >= 0:
        raise ToolCallParseError("tag_unbalanced", "<tool_call> is never closed (truncated output?)")
    outside.append(rest[pos:])
    return bodies, outside


def _reject_constant(token: str) -> Any:
    raise ToolCallParseError("non_finite_number", f"{token} is not a JSON number")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ToolCallParseError("non_finite_number", f"{token[:40]} overflows a float")
    return value


def _checked_int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_INT_DIGITS:
        raise ToolCallParseError("number_too_large", f"integer with {len(token)} digits")
    return int(token)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ToolCallParseError("duplicate_key", f"key {key[:40]!r} appears twice in one object")
        obj[key] = value
    return obj


def _loads_strict(body: str) -> Any:
    try:
        return json.loads(
            body,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_checked_int,
            object_pairs_hook=_unique_object,
        )
    except ToolCallParseError:
        raise
    except RecursionError as exc:
        raise ToolCallParseError("too_deep", "JSON nested too deeply") from exc
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise ToolCallParseError("invalid_json", str(exc)[:200]) from exc


def _check_depth(value: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise ToolCallParseError("too_deep", f"arguments nested deeper than {MAX_DEPTH}")
    if isinstance(value, dict):
        for v in value.values():
            _check_depth(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_depth(v, depth + 1)


def _call_from_json(obj: Any) -> dict:
    if not isinstance(obj, dict):
        raise ToolCallParseError("bad_call_shape", f"a call must be a JSON object, got {type(obj).__name__}")
    if set(obj) != {"name", "arguments"}:
        raise ToolCallParseError(
            "bad_call_shape", f"a call needs exactly the keys name and arguments, got {sorted(obj)[:10]}"
        )
    name, arguments = obj["name"], obj["arguments"]
    if not isinstance(name, str) or not name.strip():
        raise ToolCallParseError("bad_name", "name must be a non-empty string")
    if not isinstance(arguments, dict):
        raise ToolCallParseError(
            "bad_arguments", f"arguments must be an object, got {type(arguments).__name__}"
        )
    _check_depth(arguments)
    return {"name": name, "arguments": arguments}


def _parse_xml_json(text: str) -> list[dict]:
    _, rest = split_think(text)
    bodies, _ = _xml_blocks(rest)
    calls: list[dict] = []
    for body in bodies:
        if not body.strip():
            raise ToolCallParseError("empty_block", "<tool_call></tool_call> holds nothing")
        obj = _loads_strict(body)
        if isinstance(obj, list):
            if not obj:
                raise ToolCallParseError("empty_block", "<tool_call> holds an empty list")
            calls.extend(_call_from_json(item) for item in obj)
        else:
            calls.append(_call_from_json(obj))
    return calls


def check_xml_layout(text: str) -> str | None:
    """Return why ``text`` is not in the strict ``<think>`` + ``<tool_call>`` layout, or None if it is.

    The layout is: a leading ``<think>...</think>`` block, then either only ``<tool_call>`` blocks separated
    by whitespace, or a plain-text answer with no tags. Block contents are not parsed here.
    """
    try:
        reasoning, rest = split_think(text)
        if reasoning is None:
            return "no leading <think>...</think> block"
        bodies, outside = _xml_blocks(rest)
    except ToolCallParseError as exc:
        return str(exc)
    if bodies and any(part.strip() for part in outside):
        return "text outside the <tool_call> blocks"
    return None


# --------------------------------------------------------------------------------------------------------
# python
# --------------------------------------------------------------------------------------------------------


def _strip_fence(text: str) -> str:
    m = _FENCE_RE.match(text)
    return m.group(1).strip() if m else text


def _parse_python(text: str) -> list[dict]:
    _, rest = split_think(text)
    if CALL_OPEN in rest or CALL_CLOSE in rest:
        raise ToolCallParseError("bad_call_shape", "<tool_call> tags in python-format output")
    return parse_python_calls(_strip_fence(rest.strip()))


# --------------------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------------------


def parse_tool_calls(text: str, fmt: str) -> list[dict]:
    """Parse model output into ``[{"name": str, "arguments": dict}, ...]``; ``[]`` means no call.

    Raises :class:`ToolCallParseError` for malformed output. Never evaluates the text.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown tool-call format {fmt!r}; expected one of {FORMATS}")
    if not isinstance(text, str):
        raise TypeError(f"model output must be str, got {type(text).__name__}")
    if len(text) > MAX_INPUT_CHARS:
        raise ToolCallParseError("too_long", f"output of {len(text)} characters")
    return _parse_xml_json(text) if fmt == "xml_json" else _parse_python(text)


def _hide_tags(code: str, escaped_lt: str) -> str:
    # tags can only occur inside string literals here; escaping their "<" keeps the tag scan unambiguous
    for tag in (THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE):
        code = code.replace(tag, escaped_lt + tag[1:])
    return code


def format_tool_calls(calls: list[dict], fmt: str) -> str:
    """Write calls the way a model following ``fmt`` would; the inverse of :func:`parse_tool_calls`.

    ``xml_json`` gives one ``<tool_call>\\n{json}\\n</tool_call>`` block per call, newline-separated (as the
    Qwen chat templates write them); ``python`` gives ``[f(a=1), g()]``. ``[]`` gives ``""`` for xml_json
    and ``"[]"`` for python. A tag such as ``</tool_call>`` inside a string argument is written with its
    ``<`` escaped (``\\u003c`` / ``\\x3c``): the parser finds tags by scanning text, so a raw tag inside a
    string is read as structure (and usually fails to parse).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown tool-call format {fmt!r}; expected one of {FORMATS}")
    checked = [check_call(c) for c in calls]
    for _, arguments in checked:
        canonical_json(arguments)  # ValueError for non-string keys, non-finite floats, non-JSON values
    if fmt == "xml_json":
        blocks = []
        for name, arguments in checked:
            payload = _hide_tags(
                json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, allow_nan=False),
                "\\u003c",
            )
            blocks.append(f"{CALL_OPEN}\n{payload}\n{CALL_CLOSE}")
        return "\n".join(blocks)
    return _hide_tags(format_python_calls(checked), "\\x3c")
