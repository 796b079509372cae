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

import re

from toolcall_repro.toolcall.calls import (
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
from toolcall_repro.toolcall.python_list import format_python_calls, parse_python_calls
from toolcall_repro.toolcall.xml_json import (
    CALL_CLOSE,
    CALL_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    check_xml_layout,
    format_xml_json,
    hide_tags,
    parse_xml_json,
    split_think,
)

__all__ = [  # the call model is calls.py, the formats xml_json.py and python_list.py
    "CALL_CLOSE",
    "CALL_OPEN",
    "FORMATS",
    "MAX_DEPTH",
    "MAX_INPUT_CHARS",
    "MAX_INT_DIGITS",
    "PARSE_ERROR_REASONS",
    "THINK_CLOSE",
    "THINK_OPEN",
    "ToolCallParseError",
    "calls_equal",
    "canonical_call",
    "canonical_calls",
    "canonical_json",
    "check_call",
    "check_xml_layout",
    "format_tool_calls",
    "parse_tool_calls",
    "split_think",
]

FORMATS = ("xml_json", "python")
MAX_INPUT_CHARS = 1_000_000  # refuse pathological outputs before any parser sees them

_FENCE_RE = re.compile(r"\A```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?```\Z", re.DOTALL)


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
    return parse_xml_json(text) if fmt == "xml_json" else _parse_python(text)


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
        return format_xml_json(checked)
    return hide_tags(format_python_calls(checked), "\\x3c")
