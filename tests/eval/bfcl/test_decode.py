"""Model output -> bfcl checker input: bfcl's own Python-list decoder (never eval), our parser for xml_json."""

import pytest
from bfcl_eval.constants.enums import ReturnFormat
from bfcl_eval.model_handler.utils import default_decode_ast_prompting, default_decode_execute_prompting

from toolcall_repro.eval.bfcl.decode import ExpressionRefused, decode_ast, decode_execute
from toolcall_repro.eval.bfcl.execute import DecodedCall
from toolcall_repro.toolcall import ToolCallParseError


def test_python_format_decodes_dotted_names_and_literals():
    out = decode_ast("[math.hypot(x=3, y=4.5), spotify.play(artist='A', tags=['x'])]", "python")
    assert out == [{"math.hypot": {"x": 3, "y": 4.5}}, {"spotify.play": {"artist": "A", "tags": ["x"]}}]


def test_xml_json_format_decodes_tool_call_blocks():
    text = '<think>\nplan\n</think>\n<tool_call>\n{"name": "f", "arguments": {"a": [1, 2]}}\n</tool_call>'
    assert decode_ast(text, "xml_json") == [{"f": {"a": [1, 2]}}]
    assert decode_ast("I cannot help with that.", "xml_json") == []


def test_plain_text_and_malformed_calls_fail_to_decode_as_in_bfcl():
    # bfcl's decoder fails on prose (a decoder failure is "no call" for relevance, wrong for AST entries)
    for text in ["The answer is that no function applies.", "[f(a=1), g(b=", "<think>x</think>[f(a=1)]"]:
        with pytest.raises(SyntaxError):
            decode_ast(text, "python")
    with pytest.raises(ToolCallParseError):
        decode_ast("[f(a=x + 1)]", "python")  # an expression over a name: never evaluated
    with pytest.raises(ToolCallParseError):
        decode_ast('<tool_call>\n{"name": "f"', "xml_json")


@pytest.mark.parametrize(
    "text",
    [
        "[f(70, 1.75)]",  # positional arguments are dropped
        "[get_directions(start_location=Sydney, end_location=Melbourne)]",  # bare names read as strings
        "[f(a=g(b=1)), h(x=g())]",  # nested call with keywords -> dict, without -> its source text
        "[f(a=(1, 2), b=[(3,)])]",  # tuples stay tuples
        "[f(a=not True, b=+5)]",  # bfcl negates any unary operand
        "[f(a=x[0], b=...)]",  # subscripts as text, Ellipsis as '...'
        "f(a=1)",
        "`[f(a=1)]`\n",
    ],
)
def test_python_decoding_is_bfcl_decoder_on_shapes_without_expressions(text):
    assert decode_ast(text, "python") == default_decode_ast_prompting(text, ReturnFormat.PYTHON)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("[f(a=9+1)]", 10),
        ("[f(a=[2*3, 1])]", [6, 1]),
        ("[f(a=2**10)]", 1024),
        ("[f(a='ab'*2)]", "abab"),
        ("[f(a=g(b=1.5/3))]", {"g": {"b": 0.5}}),
        ("[f(a={'k': 1-2})]", {"k": -1}),
    ],
)
def test_arithmetic_over_literals_is_computed_like_bfcl_eval_without_eval(text, value):
    assert decode_ast(text, "python") == [{"f": {"a": value}}]


@pytest.mark.parametrize(
    "text",
    [
        "[f(a=x+1)]",
        "[f(a=len('ab')+1)]",
        "[f(a=__import__('os').getcwd()+'x')]",
        "[f(a=9**9**9)]",
        "[f(a='a'*10**9)]",
    ],
)
def test_expressions_bfcl_would_run_are_refused(text):
    with pytest.raises(ExpressionRefused):
        decode_ast(text, "python")


def test_expressions_bfcl_does_not_resolve_are_left_alone():
    # positional arguments, nested calls without keywords and a sign's operand are not eval'd by bfcl
    assert decode_ast("[f(__import__('os').getcwd()+'x', a=g(1+1))]", "python") == [{"f": {"a": "g(1 + 1)"}}]
    with pytest.raises(AttributeError):
        decode_ast("[f(a=-(1+1))]", "python")  # bfcl reads `.value` of the operand


def test_java_and_javascript_use_bfcl_language_parsers_under_python_format():
    java = decode_ast("[Geo.create(controller=mapController, n=5)]", "python", ReturnFormat.JAVA)
    assert java == [{"Geo.create": {"controller": "mapController", "n": "5"}}]
    js = decode_ast("[validate(isComplete=true)]", "python", ReturnFormat.JAVASCRIPT)
    assert js == [{"validate": {"isComplete": "true"}}]
    # the xml_json prompt asks for JSON everywhere, so the JSON parser decides
    assert decode_ast(
        '<tool_call>\n{"name": "v", "arguments": {"a": true}}\n</tool_call>', "xml_json", ReturnFormat.JAVA
    ) == [{"v": {"a": True}}]


def test_decode_execute_gives_bfcl_execution_text():
    calls = decode_execute("[cd(folder='docs'), ls()]", "python")
    assert all(isinstance(c, DecodedCall) for c in calls)
    assert [str(c) for c in calls] == ["cd(folder='docs')", "ls()"]
    assert calls[0] == default_decode_execute_prompting("[cd(folder='docs'), ls()]")[0]
    assert decode_execute("[f(1, a=g(b=2))]", "python") == ["f(a=g(b=2))"]
    assert decode_execute("[]", "python") == []
    with pytest.raises(SyntaxError):
        decode_execute("Done.", "python")  # bfcl: decoder failure, the turn ends
    with pytest.raises(IndexError):
        decode_execute("[f(a={})]", "python")  # bfcl's execution text builder fails on an empty dict
    fc = decode_execute('<tool_call>\n{"name": "f", "arguments": {"a": {"b": {}}}}\n</tool_call>', "xml_json")
    assert fc == ["f(a={'b': {}})"]  # QwenFCHandler's convert_to_function_call: repr, no nested call


def test_unknown_format_and_non_text_are_errors():
    with pytest.raises(ValueError):
        decode_ast("[f()]", "yaml")
    with pytest.raises(TypeError):
        decode_execute(["[f()]"], "python")


def test_python_format_sees_the_text_as_bfcl_decoder_does():
    # bfcl strips backticks, newlines and spaces at both ends before parsing; a fenced block then fails
    assert decode_ast("`[f(a=1)]`\n", "python") == [{"f": {"a": 1}}]
    with pytest.raises(SyntaxError):
        decode_ast("```python\n[f(a=1)]\n```", "python")  # reads as `[python\n[f(a=1)]`
    assert decode_ast("f(a=1)", "python") == [{"f": {"a": 1}}]
