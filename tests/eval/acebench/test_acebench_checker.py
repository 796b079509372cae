"""ACEBench's normal/special checks on small hand-made schemas (semantics documented in checker.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolcall_repro.eval.acebench.checker import (
    check_call,
    check_normal,
    check_special,
    standardise,
    strip_whitespace,
)

BOOK = {
    "name": "book",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "nights": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "plain": {"type": "array"},
            "guest": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            },
            "rooms": {"type": "array", "items": {"type": "object"}},
            "late": {"type": "boolean"},
            "note": {"type": "string"},
        },
        "required": ["city"],
    },
}
TRUTH = {
    "city": "New York",
    "nights": 3,
    "tags": ["sea view", "quiet"],
    "plain": ["a b"],
    "guest": {"name": "Ann Lee", "age": 40},
    "rooms": [{"kind": "double"}],
    "late": True,
    "note": "",
}


def call(**arguments):
    return {"name": "book", "arguments": arguments}


def test_the_ground_truth_itself_passes_and_optional_arguments_may_be_left_out():
    assert check_call(BOOK, call(**TRUTH), TRUTH).valid
    assert check_call(BOOK, call(city="New York"), TRUTH).valid


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        ({"city": "Boston"}, "wrong_value"),
        ({"tags": ["quiet", "sea view"]}, "wrong_value"),  # lists keep their order
        ({"guest": {"name": "Ann Lee"}}, "wrong_value"),  # objects need every key
        ({"guest": {"name": "Bob", "age": 40}}, "wrong_value"),
        ({"rooms": [{"kind": "single"}]}, "wrong_value"),
        ({"nights": "3"}, "type_error"),
        ({"late": "yes"}, "type_error"),
        ({"extra": 1}, "addition_args"),
    ],
)
def test_each_wrong_argument_fails_with_its_kind(change, kind):
    verdict = check_call(BOOK, call(**{**TRUTH, **change}), TRUTH)
    assert not verdict.valid and verdict.error.startswith(f"[{kind}]")


def test_missing_required_argument_fails():
    args = dict(TRUTH)
    del args["city"]
    assert check_call(BOOK, call(**args), TRUTH).error.startswith("[lack_args]")


def test_strings_match_as_standardised_substrings_as_acebench_does():
    assert standardise("New-York, N.Y.") == "newyorkny"
    assert check_call(BOOK, call(city="new york city"), TRUTH).valid
    assert check_call(BOOK, call(city="NEW_YORK"), TRUTH).valid


def test_integers_and_booleans_are_type_checked_only_as_acebench_does():
    # Upstream has no value check for int/float/bool: a wrong number still passes.
    assert check_call(BOOK, call(city="New York", nights=7, late=False), TRUTH).valid
    assert check_call(BOOK, call(city="New York", late="true"), TRUTH).valid  # "true" reads as a bool


def test_calls_are_matched_by_name_and_count():
    truth = {"book_1": {"city": "Rome"}, "book_2": {"city": "Oslo"}}
    rome, oslo = call(city="Rome"), call(city="Oslo")
    assert check_normal([BOOK], [oslo, rome], truth).valid
    assert check_normal([BOOK], [rome], truth).error.startswith("[wrong_count]")
    assert check_normal([BOOK], [rome, rome], truth).error.startswith("[wrong_value]")
    renamed = {"name": "book2", "arguments": {"city": "Oslo"}}
    assert check_normal([BOOK], [rome, renamed], truth).error.startswith("[function_mismatch]")


def test_alternatives_pass_when_any_alternative_passes():
    alternatives = [{"book": {"city": "Rome"}}, {"book": {"city": "Oslo"}}]
    assert check_normal([BOOK], [call(city="Oslo")], alternatives).valid
    assert not check_normal([BOOK], [call(city="Paris")], alternatives).valid


def test_upstream_mode_keeps_the_three_defects_that_fail_correct_answers():
    empty_list = {"city": "Rome", "tags": []}
    assert check_call(BOOK, call(**empty_list), empty_list).valid
    assert not check_call(BOOK, call(**empty_list), empty_list, upstream=True).valid
    itemless = {"city": "Rome", "plain": ["a b"]}
    assert check_call(BOOK, call(**itemless), itemless).valid
    assert not check_call(BOOK, call(**itemless), itemless, upstream=True).valid
    spaced = {"book": {"city": "Rome", "guest": {"name": ["Ann Lee"], "age": 1}}}  # a list inside an object
    calls = [{"name": "book", "arguments": spaced["book"]}]
    assert check_normal([BOOK], calls, spaced).valid
    assert not check_normal([BOOK], calls, spaced, upstream=True).valid


def test_unknown_schema_type_is_a_counted_failure_not_a_crash():
    odd = {
        "name": "f",
        "parameters": {"type": "object", "properties": {"x": {"type": "quaternion"}}, "required": []},
    }
    verdict = check_call(odd, {"name": "f", "arguments": {"x": 1}}, {"x": 1})
    assert not verdict.valid and verdict.error.startswith("[schema]")


def test_special_categories_need_the_phrase_and_every_named_item():
    missing = {"book": ["city", "nights"]}
    good = "Missing necessary parameters (city, nights) for the api (book)"
    assert check_special("special_incomplete", good, missing).valid
    assert not check_special("special_incomplete", good.replace("nights", "days"), missing).valid
    assert not check_special("special_incomplete", "city nights book", missing).valid
    wrong = {"date": ["12-Feb-2021"]}
    assert check_special(
        "special_error_param", "There is incorrect value (12-Feb-2021) for the parameters (date)", wrong
    ).valid
    assert not check_special("special_error_param", "There is incorrect value (2021) for date", wrong).valid
    text = "Due to the limitations of the function, I cannot solve this problem."
    assert check_special("special_irrelevant", text, "anything").valid
    assert not check_special("special_irrelevant", "[book(city='Rome')]", "anything").valid


json_values = st.recursive(
    st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.none()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(json_values)
def test_strip_whitespace_leaves_no_whitespace_in_any_string_and_keeps_shape(value):
    out = strip_whitespace(value)

    def walk(a, b):
        if isinstance(a, str):
            assert not any(c.isspace() for c in b) and b == "".join(a.split())
        elif isinstance(a, dict):
            assert len(b) <= len(a)  # keys that differ only in whitespace merge
            for k, v in a.items():
                key = "".join(k.split())
                if list(a).count(k) == 1 and sum("".join(x.split()) == key for x in a) == 1:
                    walk(v, b[key])
        elif isinstance(a, list):
            assert len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                walk(x, y)
        else:
            assert a == b

    walk(value, out)
