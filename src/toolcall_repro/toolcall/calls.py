"""What a tool call is: its shape, the error for output that is not one, and its canonical form.

A call is ``{"name": str, "arguments": dict}``. Calls compare as a multiset of (name, canonical JSON of the
arguments): sorted keys, no spaces, unicode kept, integral floats written as ints (``2 == 2.0``,
``-0.0 == 0``), tuples as lists; booleans stay booleans (``True != 1``). Everything public here is
re-exported by :mod:`toolcall_repro.toolcall`, the package callers import.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

MAX_DEPTH = 64  # nesting deeper than any real schema; bounds recursion on adversarial input
MAX_INT_DIGITS = 400  # far beyond any real argument; keeps str(int) under Python's 4300-digit limit

# Stable reason codes carried by ToolCallParseError (for counting failure kinds).
PARSE_ERROR_REASONS = (
    "think_unclosed",
    "think_misplaced",
    "tag_unbalanced",
    "tag_nested",
    "empty_block",
    "invalid_json",
    "duplicate_key",
    "non_finite_number",
    "number_too_large",
    "too_long",
    "too_deep",
    "bad_call_shape",
    "bad_name",
    "bad_arguments",
    "invalid_python",
    "not_a_call",
    "positional_argument",
    "non_literal",
)


class ToolCallParseError(ValueError):
    """Model output that cannot be read as tool calls; ``reason`` is one of ``PARSE_ERROR_REASONS``."""

    def __init__(self, reason: str, detail: str = ""):
        if reason not in PARSE_ERROR_REASONS:
            raise ValueError(f"unknown parse-error reason {reason!r}")
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


def check_call(call: Any) -> tuple[str, dict]:
    """``(name, arguments)`` of a well-formed call; ValueError otherwise."""
    if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
        raise ValueError(f"a call must be a dict with keys name and arguments, got {call!r:.200}")
    if not isinstance(call["name"], str) or not call["name"]:
        raise ValueError(f"call name must be a non-empty string, got {call['name']!r:.100}")
    if not isinstance(call["arguments"], dict):
        raise ValueError(f"call arguments must be a dict, got {type(call['arguments']).__name__}")
    return call["name"], call["arguments"]


def _canonical_value(value: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError(f"value nested deeper than {MAX_DEPTH}")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite float in arguments")
        return int(value) if value.is_integer() else value  # 2 and 2.0 are the same argument
    if isinstance(value, list | tuple):
        return [_canonical_value(v, depth + 1) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"argument keys must be strings, got {k!r:.50}")
            out[k] = _canonical_value(v, depth + 1)
        return out
    raise ValueError(f"unsupported argument value of type {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, integral floats written as ints, unicode kept."""
    return json.dumps(
        _canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def canonical_call(call: dict) -> tuple[str, str]:
    """``(name, canonical JSON of arguments)``: the unit of call comparison."""
    name, arguments = check_call(call)
    return name, canonical_json(arguments)


def canonical_calls(calls: list[dict]) -> Counter:
    """Calls as a multiset of :func:`canonical_call` tuples (order-free comparison)."""
    return Counter(canonical_call(c) for c in calls)


def calls_equal(a: list[dict], b: list[dict]) -> bool:
    """True when two call lists are equal as multisets of (name, canonical arguments)."""
    return canonical_calls(a) == canonical_calls(b)
