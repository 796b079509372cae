"""Model output -> bfcl-eval checker input, decoded as bfcl-eval's reference handler decodes it.

* ``python`` (BFCL's default prompt, reference handler ``QwenHandler``): bfcl-eval's own decoder,
  ``default_decode_ast_prompting`` (an ``ast`` parse read by ``resolve_ast_call``), so that its leniency
  is ours: positional arguments are dropped, a bare name reads as its string, a nested call with keywords
  becomes ``{name: {args}}`` and one without becomes its source text, tuples stay tuples, ``not x`` reads
  as ``-x``. One part of that decoder runs model text: an arithmetic expression (``ast.BinOp``) in an
  argument goes to ``eval``. We never hand model text to ``eval``: such an expression is computed here by
  a bounded arithmetic over literals (same value as Python's), and refused when it holds anything else
  (a name, a call, an attribute) or would be unbounded (`KNOWN_DIVERGENCES` below lists the first; the
  second is `MAX_RESULT_BITS` / `MAX_RESULT_ITEMS`).
  Java and JavaScript entries go to bfcl's tree-sitter parsers (they read text, they run nothing).
* ``xml_json`` (reference ``QwenFCHandler``): the package's one tool-call parser,
  ``toolcall.parse_tool_calls`` (its deliberate differences are listed in `KNOWN_DIVERGENCES` too).

Multi-turn steps are turned into bfcl-eval's own execution text (``decoded_output_to_execution_list``
for python, ``convert_to_function_call`` for xml_json, as the two handlers do), which our executor
(`execute.py`) reads with ``ast`` and dispatches without ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

from bfcl_eval.constants.enums import ReturnFormat
from bfcl_eval.model_handler.utils import (
    convert_to_function_call,
    decoded_output_to_execution_list,
    default_decode_ast_prompting,
    resolve_ast_call,
)

from toolcall_repro.eval.bfcl.execute import DecodedCall
from toolcall_repro.toolcall import FORMATS, ToolCallParseError, parse_tool_calls

_FOREIGN_SYNTAX = (ReturnFormat.JAVA, ReturnFormat.JAVASCRIPT)
# bfcl's prompting decoder strips these from both ends before parsing; so do we, so that verdicts match.
_BFCL_PYTHON_STRIP = "`\n "
DECODER_ID = {
    "python": "bfcl_eval.model_handler.utils.default_decode_ast_prompting (BinOp computed without eval)",
    "xml_json": "toolcall_repro.toolcall.parse_tool_calls(fmt='xml_json')",
}

# Where our verdict differs from bfcl's on purpose, (format, edge variant) -> why. The BFCL card lists them;
# the agreement harness (tests/eval/bfcl/agreement_harness.py) allows exactly these and fails on any other.
KNOWN_DIVERGENCES = {
    ("python", "builtin_in_expression"): (
        "bfcl hands an argument expression to `eval`, so `len('x')*7` runs and gives 7; we compute only "
        "arithmetic over literals and refuse names and calls (model text is never run)"
    ),
    ("xml_json", "no_newlines"): "bfcl's Qwen FC regex needs newlines inside <tool_call>; we parse the block",
    ("xml_json", "good_and_bad_block"): "bfcl silently drops an unparsable block; we reject the output",
    ("xml_json", "list_in_block"): "bfcl reads a JSON list inside one block as no call; we read the calls",
}

# ---- bounded arithmetic: what bfcl's `eval(ast.unparse(binop))` computes, for literals only ----

MAX_RESULT_BITS = 4096  # an integer result larger than this is refused (`9**9**9` would hang bfcl)
MAX_RESULT_ITEMS = 100_000  # a string / list result longer than this is refused
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}


class ExpressionRefused(ToolCallParseError):
    """An argument expression bfcl would `eval` but that is not plain arithmetic over literals."""

    def __init__(self, detail: str) -> None:
        super().__init__("non_literal", detail)


def _bits(value: Any) -> float:
    return abs(value).bit_length() if isinstance(value, int) else 0


def _bounded(left: Any, op: ast.operator, right: Any) -> Any:
    ints = isinstance(left, int) and isinstance(right, int)
    if isinstance(op, ast.Pow) and ints and right > 0 and abs(left) > 1:
        if right * math.log2(abs(left)) > MAX_RESULT_BITS:
            raise ExpressionRefused("power too large to compute")
    if isinstance(op, ast.LShift) and ints and right > MAX_RESULT_BITS:
        raise ExpressionRefused("shift too large to compute")
    if isinstance(op, ast.Mult):
        for seq, n in ((left, right), (right, left)):
            if (
                isinstance(seq, str | bytes | list | tuple)
                and isinstance(n, int)
                and len(seq) * n > MAX_RESULT_ITEMS
            ):
                raise ExpressionRefused("repeated sequence too long")
    value = _BINOPS[type(op)](left, right)
    if _bits(value) > MAX_RESULT_BITS:
        raise ExpressionRefused("integer result too large")
    if isinstance(value, str | bytes | list | tuple) and len(value) > MAX_RESULT_ITEMS:
        raise ExpressionRefused("sequence result too long")
    return value


def arithmetic_value(node: ast.AST) -> Any:
    """Python's value of an expression made only of literals and operators; ExpressionRefused otherwise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](arithmetic_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = arithmetic_value(node.left), arithmetic_value(node.right)
        try:
            return _bounded(left, node.op, right)
        except ExpressionRefused:
            raise
        except Exception as e:  # noqa: BLE001 - e.g. 1/0 or "a" - 1: eval raises in bfcl too
            raise ToolCallParseError("non_literal", f"{type(e).__name__}: {e}") from None
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [arithmetic_value(e) for e in node.elts]
        return (
            tuple(items)
            if isinstance(node, ast.Tuple)
            else set(items)
            if isinstance(node, ast.Set)
            else items
        )
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {arithmetic_value(k): arithmetic_value(v) for k, v in zip(node.keys, node.values, strict=True)}
    raise ExpressionRefused(f"{type(node).__name__} in an arithmetic argument: model text is never run")


def _computed(node: ast.expr) -> ast.expr:
    """`node` with every BinOp that bfcl's `resolve_ast_by_type` would `eval` replaced by its value.

    Only the positions that function visits are touched (keyword values, list / tuple elements, dict keys
    and values, keywords of a nested call with keywords); positional arguments, the operand of a sign and
    nested calls without keywords are not resolved by bfcl (or only turned back into text), so neither here.
    """
    if isinstance(node, ast.BinOp):
        return ast.Constant(value=arithmetic_value(node))
    if isinstance(node, ast.Lambda):  # bfcl's lambda branch raises before its eval: a decoder failure
        raise ExpressionRefused("lambda in an argument")
    if isinstance(node, ast.List | ast.Tuple):
        return type(node)(elts=[_computed(e) for e in node.elts], ctx=node.ctx)
    if isinstance(node, ast.Dict):
        keys = [None if k is None else _computed(k) for k in node.keys]
        return ast.Dict(keys=keys, values=[_computed(v) for v in node.values])
    if isinstance(node, ast.Call) and node.keywords:
        return _computed_call(node)
    return node


def _computed_call(node: ast.Call) -> ast.Call:
    keywords = [ast.keyword(arg=k.arg, value=_computed(k.value)) for k in node.keywords]
    return ast.Call(func=node.func, args=node.args, keywords=keywords)


def _has_binop(node: ast.AST) -> bool:
    return any(isinstance(n, ast.BinOp | ast.Lambda) for n in ast.walk(node))


def bfcl_python_calls(text: str) -> list[dict]:
    """`[{name: arguments}]` exactly as bfcl's ``default_decode_ast_prompting`` decodes `text`, without eval.

    Raises on what bfcl's decoder fails on (so a failure is a failure on both sides).
    """
    if not _has_binop_text(text):
        return default_decode_ast_prompting(text, ReturnFormat.PYTHON)
    # bfcl's own text preparation (default_decode_ast_prompting, then ast_parse) ...
    body = text.strip(_BFCL_PYTHON_STRIP)
    body = body if body.startswith("[") else "[" + body
    body = body if body.endswith("]") else body + "]"
    tree = ast.parse(body.strip().strip("'"), mode="eval").body
    # ... and its top level (ast_parse reads text, so the computed tree is walked here with its resolver)
    elements = [tree] if isinstance(tree, ast.Call) else tree.elts  # AttributeError as in bfcl
    out = []
    for element in elements:
        if not isinstance(element, ast.Call):
            raise ToolCallParseError("not_a_call", f"list element is a {type(element).__name__}, not a call")
        out.append(resolve_ast_call(_computed_call(element)))
    return out


def _has_binop_text(text: str) -> bool:
    """Whether the parsed output holds an operator expression or lambda anywhere (then we decode it)."""
    body = text.strip(_BFCL_PYTHON_STRIP)
    body = body if body.startswith("[") else "[" + body
    body = body if body.endswith("]") else body + "]"
    try:
        tree = ast.parse(body.strip().strip("'"), mode="eval")
    except Exception:  # noqa: BLE001 - bfcl's decoder will fail the same way on the same text
        return False
    return _has_binop(tree)


def _check_format(output_format: str) -> None:
    if output_format not in FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; expected one of {FORMATS}")


def _check_text(text: Any) -> None:
    if not isinstance(text, str):
        raise TypeError(f"model output must be text, got {type(text).__name__}")


def decode_ast(text: str, output_format: str, language: ReturnFormat = ReturnFormat.PYTHON) -> list[dict]:
    """Calls as `[{name: arguments}]`; raises (ToolCallParseError or bfcl's parser error) on malformed text."""
    _check_format(output_format)
    _check_text(text)
    if output_format == "python":
        if language in _FOREIGN_SYNTAX:
            return default_decode_ast_prompting(text, language)
        return bfcl_python_calls(text)
    return [{c["name"]: c["arguments"]} for c in parse_tool_calls(text, output_format)]


def decode_execute(text: str, output_format: str) -> list[DecodedCall]:
    """One step's calls as bfcl-eval's execution text; `[]` when the step holds no call (the turn ends)."""
    _check_format(output_format)
    _check_text(text)
    if output_format == "python":
        decoded = bfcl_python_calls(text)
        texts = decoded_output_to_execution_list(decoded)  # raises where bfcl's does (e.g. `a={}`)
    else:
        decoded = [{c["name"]: c["arguments"]} for c in parse_tool_calls(text, output_format)]
        texts = convert_to_function_call(decoded) if decoded else []
    return [DecodedCall.from_text(t) for t in texts]
