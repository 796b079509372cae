"""Per-category limits: multi-turn entries are capped separately from single-turn ones."""

import pytest

from toolcall_repro.eval.bfcl.__main__ import parse_limit


def test_parse_limit_plain_and_per_category():
    assert parse_limit("3") == 3
    assert parse_limit("0") == 0
    assert parse_limit("3,multi_turn_base=1") == {"default": 3, "multi_turn_base": 1}
    with pytest.raises(ValueError):
        parse_limit("three")


def test_select_entries_applies_per_category_caps():
    from toolcall_repro.eval.bfcl.generate import select_entries

    got = select_entries(["simple_python", "multi_turn_base"], {"default": 3, "multi_turn_base": 1})
    assert len(got["simple_python"]) == 3 and len(got["multi_turn_base"]) == 1
    assert len(select_entries(["irrelevance"], 2)["irrelevance"]) == 2
