"""Seed summaries: mean, sample std and per-seed values; mixing protocols is an error."""

import copy
import json

import pytest

from toolcall_repro.analysis import loaders, tables
from toolcall_repro.analysis.tabular import fmt_pm
from toolcall_repro.eval.seeds import summarise_seeds, without_seed


def _doc(seed, multi, simple, tokens=250.0, **card_extra):
    card = {"protocol": {"system_prompt": "stronger", "seed": seed}, "seed": seed, "model": {"tag": "base"}}
    card.update(card_extra)
    return {
        "card": card,
        "categories": {
            "simple_python": {"accuracy": simple, "correct": 0, "total": 1},
            "multi_turn_base": {"accuracy": multi, "correct": 0, "total": 1},
        },
        "summary": {"multi_turn": multi, "non_live": simple, "live": None, "mean_input_tokens": tokens},
    }


def test_mean_std_and_per_seed_values_in_seed_order():
    out = summarise_seeds([_doc(2, 0.30, 0.8), _doc(0, 0.20, 0.9), _doc(1, 0.25, 0.85)])
    assert out["seeds"] == [0, 1, 2] == out["card"]["seeds"]
    m = out["metrics"]["multi_turn"]
    assert m["per_seed"] == [0.20, 0.25, 0.30]
    assert m["mean"] == pytest.approx(0.25)
    assert m["std"] == pytest.approx(0.05)  # sample std (n - 1)
    assert m["peak_to_peak"] == pytest.approx(0.10)
    assert out["metrics"]["category/simple_python"]["per_seed"] == [0.9, 0.85, 0.8]
    assert "live" not in out["metrics"]  # undefined for the categories run
    assert "seed" not in out["card"] and "seed" not in out["card"]["protocol"]


def test_single_seed_has_undefined_std_and_tables_show_the_mean_alone():
    out = summarise_seeds([_doc(0, 0.2, 0.9)])
    m = out["metrics"]["multi_turn"]
    assert m["std"] is None and m["mean"] == 0.2 and m["peak_to_peak"] == 0.0
    assert "null for a single seed" in out["std_definition"]
    assert fmt_pm(m["mean"] * 100, loaders._num(m["std"])) == "20.0"  # no "± 0.0" for one seed


def test_different_protocols_or_models_cannot_be_averaged():
    other = _doc(1, 0.3, 0.8)
    other["card"]["protocol"]["system_prompt"] = "bfcl_default"
    with pytest.raises(ValueError, match="protocol"):
        summarise_seeds([_doc(0, 0.2, 0.9), other])
    with pytest.raises(ValueError, match="repeated seeds"):
        summarise_seeds([_doc(0, 0.2, 0.9), _doc(0, 0.3, 0.9)])
    fewer = _doc(1, 0.3, 0.8)
    del fewer["categories"]["simple_python"]
    with pytest.raises(ValueError, match="categories"):
        summarise_seeds([_doc(0, 0.2, 0.9), fewer])
    with pytest.raises(ValueError):
        summarise_seeds([])


def test_without_seed_strips_seed_at_any_depth_only():
    card = {"seed": 1, "a": {"seed": 2, "b": [{"seed": 3, "c": 4}]}, "per_query_seed": "x"}
    assert without_seed(card) == {"a": {"b": [{"c": 4}]}, "per_query_seed": "x"}
    assert card["seed"] == 1  # input untouched
    assert without_seed(copy.deepcopy(card)) == without_seed(card)


def test_mean_input_tokens_is_carried_like_every_summary_metric():
    out = summarise_seeds([_doc(0, 0.2, 0.9, tokens=240.0), _doc(1, 0.3, 0.8, tokens=260.0)])
    m = out["metrics"]["mean_input_tokens"]
    assert m["per_seed"] == [240.0, 260.0] and m["mean"] == 250.0
    assert m["std"] == pytest.approx(14.142135, rel=1e-6)
    old = _doc(1, 0.3, 0.8)
    del old["summary"]["mean_input_tokens"]
    with pytest.raises(ValueError, match="summary keys"):
        summarise_seeds([_doc(0, 0.2, 0.9), old])
    partial = _doc(1, 0.3, 0.8, tokens=None)
    with pytest.raises(ValueError, match="mean_input_tokens"):
        summarise_seeds([_doc(0, 0.2, 0.9), partial])


def test_analysis_reads_mean_input_tokens_from_summary_json(tmp_path):
    """The results stage's prompt-ablation table shows what `summarise` writes, unscaled."""
    for protocol, tokens in (("default", (228.0, 228.0)), ("doubled", (452.0, 454.0))):
        summary = summarise_seeds([_doc(s, 0.2 + s / 10, 0.9, tokens=t) for s, t in enumerate(tokens)])
        path = tmp_path / "eval" / "bfcl" / "base" / protocol / "summary.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(summary))
    units = [{"benchmark": "bfcl", "model": "base", "protocol": p, "kind": "summary",
              "path": str(tmp_path / "eval" / "bfcl" / "base" / p / "summary.json")} for p in ("default", "doubled")]  # fmt: skip
    scores = loaders.load_scores(units, loaders.Declared(tmp_path), "bfcl")
    t = tables.prompt_ablation_table(scores, [("base", "default"), ("base", "doubled")])
    assert list(t.frame[f"{tables.INPUT_TOKEN_METRIC}_mean"]) == [228.0, 453.0]
    assert list(t.display[tables.INPUT_TOKEN_METRIC]) == ["228 ± 0", "453 ± 1"]
