"""BFCL's Python-list call format, ``[func(a=1, b="x"), mod.g()]``: read from the ``ast`` tree, never run.

Arguments are keyword-only literals (numbers, strings, booleans, None, lists, tuples, string-keyed dicts,
a sign on a number). A dotted function name is only a string: no attribute is ever looked up. Use it
through :func:`toolcall_repro.toolcall.parse_tool_calls` / ``format_tool_calls``.

This strict reader serves training data and rewards (ToolACE's calls) and ACEBench. BFCL scoring does not
use it: a BFCL verdict must be bfcl's, so ``eval/bfcl/decode.py`` runs bfcl-eval's own lenient decoder
(positional arguments dropped, bare names as strings, nested calls, tuples), with its one ``eval`` replaced.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import warnings
from typing import Any

from toolcall_repro.toolcall.calls import MAX_DEPTH, MAX_INT_DIGITS, ToolCallParseError

# output that starts like a call list or a bare call is judged as one; anything else is a plain answer
CALL_START_RE = re.compile(r"\A(\[|[A-Za-z_][A-Za-z0-9_.]*\()")
_INT_LIMIT = 10**MAX_INT_DIGITS  # the JSON reader's bound, in digits
_DOTTED_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def _number(value: int | float) -> int | float:
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:
        raise ToolCallParseError("number_too_large", f"integer of more than {MAX_INT_DIGITS} digits")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolCallParseError("non_finite_number", "float literal overflows")
    return value


def _literal(node: ast.AST, depth: int) -> Any:
    """Read a literal from an ast node without evaluating anything."""
    if depth > MAX_DEPTH:
        raise ToolCallParseError("too_deep", f"argument nested deeper than {MAX_DEPTH}")
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, int | float):
            return _number(value)
        raise ToolCallParseError("non_literal", f"unsupported constant of type {type(value).__name__}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = node.operand
        if not (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, int | float)
            and not isinstance(operand.value, bool)
        ):
            raise ToolCallParseError("non_literal", "a sign applies only to a number literal")
        value = _number(operand.value)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(elt, depth + 1) for elt in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if key_node is None:
                raise ToolCallParseError("non_literal", "** unpacking in a dict literal")
            key = _literal(key_node, depth + 1)
            if not isinstance(key, str):
                raise ToolCallParseError("non_literal", "dict keys must be strings")
            if key in out:
                raise ToolCallParseError("duplicate_key", f"key {key[:40]!r} appears twice in one dict")
            out[key] = _literal(value_node, depth + 1)
        return out
    raise ToolCallParseError("non_literal", f"{type(node).__name__} is not a literal")


def dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` for a (dotted) name node, None for anything else; read from the tree, never looked up."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _call_from_ast(node: ast.AST) -> dict:
    if not isinstance(node, ast.Call):
        raise ToolCallParseError("not_a_call", f"list element is a {type(node).__name__}, not a call")
    name = dotted_name(node.func)
    if name is None:
        raise ToolCallParseError("bad_name", "a function name must be a plain or dotted identifier")
    if node.args:
        raise ToolCallParseError("positional_argument", f"{name} has positional arguments")
    arguments: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ToolCallParseError("non_literal", "** unpacking in a call")
        if kw.arg in arguments:
            raise ToolCallParseError("duplicate_key", f"keyword {kw.arg!r} repeated in {name}")
        arguments[kw.arg] = _literal(kw.value, 1)  # depth 1: the arguments dict itself is depth 0
    return {"name": name, "arguments": arguments}


def parse_python_calls(body: str) -> list[dict]:
    """Calls in ``body`` (think block and code fence already removed); ``[]`` for a plain-text answer."""
    if not body:
        return []
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal": noise, the output is judged below
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        if not CALL_START_RE.match(body):
            return []  # not Python at all: a plain-text answer
        reason = "too_deep" if isinstance(exc, RecursionError | MemoryError) else "invalid_python"
        if "Exceeds the limit" in str(exc):
            reason = "number_too_large"
        raise ToolCallParseError(reason, f"{type(exc).__name__}: {str(exc)[:200]}") from exc
    if not CALL_START_RE.match(body):
        return []  # e.g. a word, a number or a quoted string: a plain-text answer
    expr = tree.body
    if isinstance(expr, ast.List | ast.Tuple):
        return [_call_from_ast(elt) for elt in expr.elts]
    if isinstance(expr, ast.Call):
        return [_call_from_ast(expr)]
    raise ToolCallParseError("not_a_call", "output starts like a call but is not a list of calls")


def _py_literal(value: Any) -> str:
    if value is None or isinstance(value, bool | int | str):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite float cannot be written as a tool-call argument")
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"dict keys must be strings, got {k!r:.50}")
            items.append(f"{k!r}: {_py_literal(v)}")
        return "{" + ", ".join(items) + "}"
    raise ValueError(f"unsupported argument value of type {type(value).__name__}")


def format_python_calls(calls: list[tuple[str, dict]]) -> str:
    """``[f(a=1), g()]`` for checked ``(name, arguments)`` pairs; ValueError for what Python cannot write."""
    parts = []
    for name, arguments in calls:
        if not _DOTTED_NAME_RE.match(name) or any(keyword.iskeyword(p) for p in name.split(".")):
            raise ValueError(f"{name!r} is not a valid Python function name")
        args = []
        for key, value in arguments.items():
            if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
                raise ValueError(f"argument name {key!r} is not a Python identifier")
            args.append(f"{key}={_py_literal(value)}")
        parts.append(f"{name}({', '.join(args)})")
    return "[" + ", ".join(parts) + "]"
