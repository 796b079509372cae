"""The ``xml_json`` call format (Qwen / Tool-N1 / LoopTool) and the leading ``<think>`` block.

An optional leading ``<think>...</think>`` block, then zero or more ``<tool_call>{json}</tool_call>`` blocks;
a block holds one ``{"name", "arguments"}`` object or a JSON list of them. JSON is read strictly (no NaN, no
duplicate keys, bounded depth and integer size). Use it through :func:`toolcall_repro.toolcall.parse_tool_calls`
/ ``format_tool_calls``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from toolcall_repro.toolcall.calls import MAX_DEPTH, MAX_INT_DIGITS, ToolCallParseError

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"


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


def parse_xml_json(text: str) -> list[dict]:
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


def hide_tags(code: str, escaped_lt: str) -> str:
    """Escape the ``<`` of every tag inside ``code`` (tags can only occur inside string literals there).

    The parsers find tags by scanning text, so escaping keeps the tag scan unambiguous.
    """
    for tag in (THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE):
        code = code.replace(tag, escaped_lt + tag[1:])
    return code


def format_xml_json(checked: list[tuple[str, dict]]) -> str:
    """One ``<tool_call>\\n{json}\\n</tool_call>`` block per checked (name, arguments), newline-separated."""
    blocks = []
    for name, arguments in checked:
        payload = hide_tags(
            json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, allow_nan=False),
            "\\u003c",
        )
        blocks.append(f"{CALL_OPEN}\n{payload}\n{CALL_CLOSE}")
    return "\n".join(blocks)
