"""Model output -> bfcl-eval checker input, through the package's one tool-call parser.

bfcl-eval's checkers take `[{name: {arg: value}}]` (AST categories) and, per multi-turn step, a list of
executable calls. Both come from `toolcall.parse_tool_calls` in the protocol's output format. One
exception: Java and JavaScript entries under the BFCL-default (python) prompt are answered in those
languages' syntax, which is bfcl-eval's own tree-sitter parsers' job (they read text, they run nothing).
"""

from __future__ import annotations

from bfcl_eval.constants.enums import ReturnFormat
from bfcl_eval.model_handler.utils import default_decode_ast_prompting

from toolcall_repro.eval.bfcl.execute import DecodedCall
from toolcall_repro.toolcall import FORMATS, parse_tool_calls

_FOREIGN_SYNTAX = (ReturnFormat.JAVA, ReturnFormat.JAVASCRIPT)
# bfcl's prompting decoder strips these from both ends before parsing; so do we, so that verdicts match.
_BFCL_PYTHON_STRIP = "`\n "


def _bfcl_view(text: str, output_format: str) -> str:
    return text.strip(_BFCL_PYTHON_STRIP) if output_format == "python" else text


def _check_format(output_format: str) -> None:
    if output_format not in FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; expected one of {FORMATS}")


def decode_ast(text: str, output_format: str, language: ReturnFormat = ReturnFormat.PYTHON) -> list[dict]:
    """Calls as `[{name: arguments}]`; raises (ToolCallParseError or bfcl's parser error) on malformed text."""
    _check_format(output_format)
    if not isinstance(text, str):
        raise TypeError(f"model output must be text, got {type(text).__name__}")
    if output_format == "python" and language in _FOREIGN_SYNTAX:
        return default_decode_ast_prompting(text, language)
    return [
        {c["name"]: c["arguments"]} for c in parse_tool_calls(_bfcl_view(text, output_format), output_format)
    ]


def decode_execute(text: str, output_format: str) -> list[DecodedCall]:
    """Calls for the multi-turn executor; `[]` when the step holds no call (the turn then ends)."""
    _check_format(output_format)
    if not isinstance(text, str):
        raise TypeError(f"model output must be text, got {type(text).__name__}")
    calls = parse_tool_calls(_bfcl_view(text, output_format), output_format)
    return [DecodedCall(c["name"], c["arguments"]) for c in calls]
