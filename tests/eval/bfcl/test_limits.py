"""Per-category limits: multi-turn entries are capped separately from single-turn ones."""


def test_select_entries_applies_per_category_caps():
    from toolcall_repro.eval.bfcl.generate import select_entries

    got = select_entries(["simple_python", "multi_turn_base"], {"default": 3, "multi_turn_base": 1})
    assert len(got["simple_python"]) == 3 and len(got["multi_turn_base"]) == 1
    assert len(select_entries(["irrelevance"], 2)["irrelevance"]) == 2


def test_config_limit_is_a_count_or_caps_default_first():
    """evaluate.bfcl.limit reaches generate typed (generate_bfcl's job): 0/null = all, caps by name."""
    from toolcall_repro.eval.bfcl.jobs import config_limit

    assert config_limit(None) is None and config_limit(0) is None and config_limit(3) == 3
    caps = config_limit({"multi_turn_base": 1, "default": 3, "live_simple": None})
    assert caps == {"default": 3, "live_simple": 0, "multi_turn_base": 1}
    assert list(caps) == ["default", "live_simple", "multi_turn_base"]  # default first, then by name
    assert config_limit({"default": 3}) == 3
    assert config_limit({"multi_turn_base": 1}) == {"default": 0, "multi_turn_base": 1}
    assert config_limit({}) is None
