"""Model output -> bfcl checker input, through toolcall.parse_tool_calls (and bfcl's Java/JS parsers)."""

import pytest
from bfcl_eval.constants.enums import ReturnFormat

from toolcall_repro.eval.bfcl.decode import decode_ast, decode_execute
from toolcall_repro.eval.bfcl.execute import DecodedCall
from toolcall_repro.toolcall import ToolCallParseError


def test_python_format_decodes_dotted_names_and_literals():
    out = decode_ast("[math.hypot(x=3, y=4.5), spotify.play(artist='A', tags=['x'])]", "python")
    assert out == [{"math.hypot": {"x": 3, "y": 4.5}}, {"spotify.play": {"artist": "A", "tags": ["x"]}}]


def test_xml_json_format_decodes_tool_call_blocks():
    text = '<think>\nplan\n</think>\n<tool_call>\n{"name": "f", "arguments": {"a": [1, 2]}}\n</tool_call>'
    assert decode_ast(text, "xml_json") == [{"f": {"a": [1, 2]}}]
    assert decode_ast("I cannot help with that.", "xml_json") == []


def test_plain_text_is_no_call_and_malformed_calls_raise():
    assert decode_ast("The answer is that no function applies.", "python") == []
    with pytest.raises(ToolCallParseError):
        decode_ast("[f(a=1), g(b=", "python")
    with pytest.raises(ToolCallParseError):
        decode_ast("[f(a=x + 1)]", "python")  # an expression is not a literal: never evaluated
    with pytest.raises(ToolCallParseError):
        decode_ast('<tool_call>\n{"name": "f"', "xml_json")


def test_java_and_javascript_use_bfcl_language_parsers_under_python_format():
    java = decode_ast("[Geo.create(controller=mapController, n=5)]", "python", ReturnFormat.JAVA)
    assert java == [{"Geo.create": {"controller": "mapController", "n": "5"}}]
    js = decode_ast("[validate(isComplete=true)]", "python", ReturnFormat.JAVASCRIPT)
    assert js == [{"validate": {"isComplete": "true"}}]
    # the xml_json prompt asks for JSON everywhere, so the JSON parser decides
    assert decode_ast(
        '<tool_call>\n{"name": "v", "arguments": {"a": true}}\n</tool_call>', "xml_json", ReturnFormat.JAVA
    ) == [{"v": {"a": True}}]


def test_decode_execute_gives_decoded_calls():
    calls = decode_execute("[cd(folder='docs'), ls()]", "python")
    assert all(isinstance(c, DecodedCall) for c in calls)
    assert [str(c) for c in calls] == ["cd(folder='docs')", "ls()"]
    assert decode_execute("Done.", "python") == []


def test_unknown_format_and_non_text_are_errors():
    with pytest.raises(ValueError):
        decode_ast("[f()]", "yaml")
    with pytest.raises(TypeError):
        decode_execute(["[f()]"], "python")


def test_python_format_sees_the_text_as_bfcl_decoder_does():
    # bfcl strips backticks, newlines and spaces at both ends before parsing; a fenced block then fails
    assert decode_ast("`[f(a=1)]`\n", "python") == [{"f": {"a": 1}}]
    assert decode_ast("```python\n[f(a=1)]\n```", "python") == []
    assert decode_ast("f(a=1)", "python") == [{"f": {"a": 1}}]
