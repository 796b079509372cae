import ast
import builtins
import json
import keyword
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcall_repro.toolcall import (
    MAX_INPUT_CHARS,
    PARSE_ERROR_REASONS,
    ToolCallParseError,
    calls_equal,
    canonical_call,
    canonical_json,
    check_xml_layout,
    format_tool_calls,
    parse_tool_calls,
    split_think,
)

CORPUS = Path(__file__).parent / "data" / "toolcall_corpus" / "corpus.jsonl"
PWNED = Path("/tmp/toolcall_corpus_PWNED")  # every code-injection case in the corpus targets this file


def load_corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------------------
# round trip (property tests)
# --------------------------------------------------------------------------------------------------------

identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s)
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def calls_strategy(name_strategy, key_strategy):
    call = st.fixed_dictionaries(
        {"name": name_strategy, "arguments": st.dictionaries(key_strategy, values, max_size=5)}
    )
    return st.lists(call, max_size=4)


dotted_names = st.lists(identifiers, min_size=1, max_size=3).map(".".join)


@settings(max_examples=200, deadline=None)
@given(calls_strategy(st.text(min_size=1, max_size=12).filter(str.strip), st.text(max_size=10)))
def test_xml_json_round_trip(calls):
    assert parse_tool_calls(format_tool_calls(calls, "xml_json"), "xml_json") == calls


@settings(max_examples=200, deadline=None)
@given(calls_strategy(dotted_names, identifiers))
def test_python_round_trip(calls):
    assert parse_tool_calls(format_tool_calls(calls, "python"), "python") == calls


@settings(max_examples=50, deadline=None)
@given(calls_strategy(dotted_names, identifiers), st.text(max_size=30).filter(lambda s: "<" not in s))
def test_round_trip_after_think_block(calls, reasoning):
    for fmt in ("xml_json", "python"):
        text = f"<think>{reasoning}</think>\n" + format_tool_calls(calls, fmt)
        assert parse_tool_calls(text, fmt) == calls


@settings(max_examples=100, deadline=None)
@given(calls_strategy(dotted_names, identifiers))
def test_canonical_form_is_stable_across_formats(calls):
    via_xml = parse_tool_calls(format_tool_calls(calls, "xml_json"), "xml_json")
    via_py = parse_tool_calls(format_tool_calls(calls, "python"), "python")
    assert calls_equal(via_xml, via_py)
    assert calls_equal(calls, list(reversed(via_py)))


# --------------------------------------------------------------------------------------------------------
# adversarial corpus
# --------------------------------------------------------------------------------------------------------


@pytest.fixture
def no_code_execution(monkeypatch):
    """Fail loudly if parsing ever evaluates code: eval/exec are banned, compile only builds an AST."""

    def banned(*args, **kwargs):
        raise AssertionError("the parser must never evaluate model output")

    real_compile = builtins.compile

    def ast_only_compile(source, filename, mode, flags=0, *args, **kwargs):
        if not flags & ast.PyCF_ONLY_AST:
            raise AssertionError("the parser compiled model output to bytecode")
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "eval", banned)
    monkeypatch.setattr(builtins, "exec", banned)
    monkeypatch.setattr(builtins, "compile", ast_only_compile)
    PWNED.unlink(missing_ok=True)
    yield
    assert not PWNED.exists(), "a corpus payload had a side effect"


def test_corpus_is_large_and_mostly_adversarial():
    corpus = load_corpus()
    assert len(corpus) >= 200
    assert sum(c["expect"] == "error" for c in corpus) >= 150
    assert {c["fmt"] for c in corpus} == {"xml_json", "python"}
    assert {c["reason"] for c in corpus if c["expect"] == "error"} <= set(PARSE_ERROR_REASONS)


def test_corpus_outcomes(no_code_execution):
    mismatches = []
    for case in load_corpus():
        try:
            outcome = ("calls", parse_tool_calls(case["text"], case["fmt"]))
        except ToolCallParseError as exc:
            outcome = ("error", exc.reason)
        expected = ("calls", case["calls"]) if case["expect"] == "calls" else ("error", case["reason"])
        if outcome != expected:
            mismatches.append((case["id"], case["note"], expected, outcome))
    assert not mismatches


@pytest.mark.parametrize(
    ("text", "fmt", "reason"),
    [
        (
            '<tool_call>{"name": "f", "arguments": {"a": ' + "[" * 100_000 + "}}</tool_call>",
            "xml_json",
            "too_deep",
        ),
        ("<tool_call>" * 10_000 + "</tool_call>" * 10_000, "xml_json", "tag_nested"),
        ("x" * (MAX_INPUT_CHARS + 1), "xml_json", "too_long"),
        ("[" * 100_000, "python", "invalid_python"),
        ("[f(a=1)]" + " " * MAX_INPUT_CHARS, "python", "too_long"),
    ],
)
def test_huge_inputs(text, fmt, reason, no_code_execution):
    with pytest.raises(ToolCallParseError) as info:
        parse_tool_calls(text, fmt)
    assert info.value.reason == reason


# --------------------------------------------------------------------------------------------------------
# formats and helpers
# --------------------------------------------------------------------------------------------------------


def test_xml_format_matches_qwen_layout():
    calls = [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {"s": "é"}}]
    assert format_tool_calls(calls, "xml_json") == (
        '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "g", "arguments": {"s": "é"}}\n</tool_call>'
    )
    assert format_tool_calls([], "xml_json") == ""


def test_python_format():
    calls = [{"name": "m.f", "arguments": {"a": 1, "b": "x'y", "c": [True, None], "d": {"k": 2.5}}}]
    assert format_tool_calls(calls, "python") == "[m.f(a=1, b=\"x'y\", c=[True, None], d={'k': 2.5})]"
    assert format_tool_calls([], "python") == "[]"


@pytest.mark.parametrize(
    "call",
    [
        {"name": "get-weather", "arguments": {}},
        {"name": "f", "arguments": {"not an identifier": 1}},
        {"name": "f", "arguments": {"class": 1}},
        {"name": "f", "arguments": {"a": float("nan")}},
        {"name": "f", "arguments": {"a": {1: 2}}},
        {"name": "f", "arguments": {"a": object()}},
    ],
)
def test_python_format_rejects_unwritable_calls(call):
    with pytest.raises(ValueError):
        format_tool_calls([call], "python")


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "f"},
        {"name": "", "arguments": {}},
        {"name": "f", "arguments": []},
        "f",
        {"name": "f", "arguments": {"a": {1: 2}}},
        {"name": "f", "arguments": {"a": float("inf")}},
        {"name": "f", "arguments": {"a": {1, 2}}},
    ],
)
def test_format_rejects_bad_calls(bad):
    with pytest.raises(ValueError):
        format_tool_calls([bad], "xml_json")


def test_unknown_format():
    with pytest.raises(ValueError, match="unknown tool-call format"):
        parse_tool_calls("[]", "yaml")
    with pytest.raises(ValueError, match="unknown tool-call format"):
        format_tool_calls([], "yaml")


def test_parse_error_is_a_value_error_with_reason():
    with pytest.raises(ValueError) as info:
        parse_tool_calls("<tool_call>{</tool_call>", "xml_json")
    assert isinstance(info.value, ToolCallParseError)
    assert info.value.reason == "invalid_json"
    assert str(info.value).startswith("invalid_json:")


def test_split_think():
    assert split_think("<think>a</think>b") == ("a", "b")
    assert split_think("no think") == (None, "no think")
    with pytest.raises(ToolCallParseError):
        split_think("<think>a")


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('<think>r</think>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', True),
        ("<think>r</think><tool_call>{}</tool_call>\n<tool_call>{}</tool_call>\n", True),
        ("<think>r</think>\nA plain answer.", True),
        ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', False),
        ('<think>r</think>\nSure: <tool_call>{"name": "f", "arguments": {}}</tool_call>', False),
        ('<think>r</think><tool_call>{"name": "f", "arguments": {}}</tool_call> done', False),
        ("<think>r</think><tool_call>{", False),
        ("<think>r", False),
        ("", False),
    ],
)
def test_check_xml_layout(text, ok):
    assert (check_xml_layout(text) is None) == ok


# --------------------------------------------------------------------------------------------------------
# canonicalisation
# --------------------------------------------------------------------------------------------------------


def test_canonical_json_number_forms_and_key_order():
    assert canonical_json({"b": 2.0, "a": [1.0, {"y": -0.0, "x": 3}]}) == '{"a":[1,{"x":3,"y":0}],"b":2}'
    assert canonical_json({"a": 2.5}) != canonical_json({"a": 2})
    assert canonical_json({"a": "é"}) == '{"a":"é"}'


def test_bools_are_not_numbers():
    assert canonical_json({"a": True}) != canonical_json({"a": 1})
    assert canonical_json({"a": False}) != canonical_json({"a": 0.0})


def test_canonical_call_and_multiset_equality():
    assert canonical_call({"name": "f", "arguments": {"b": 1, "a": [2.0]}}) == ("f", '{"a":[2],"b":1}')
    a = [{"name": "f", "arguments": {"x": 1}}, {"name": "f", "arguments": {"x": 2}}]
    assert calls_equal(a, list(reversed(a)))
    assert not calls_equal(a, [a[0], a[0]])
    assert not calls_equal(a, a[:1])


@pytest.mark.parametrize("value", [float("inf"), float("nan"), {1: "x"}, {"a": {1, 2}}])
def test_canonical_json_rejects_non_json(value):
    with pytest.raises(ValueError):
        canonical_json({"v": value})
