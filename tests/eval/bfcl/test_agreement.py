"""Our harness and the official `bfcl evaluate` CLI (separate process and project root) agree per entry."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the harness is a test helper beside this file
import agreement_harness as agreement  # noqa: E402

# slow: the module's fixture scores ~250 entries twice, once through the official `bfcl evaluate` in a
# process of its own (~7 s), before any of its tests.
pytestmark = pytest.mark.slow

CATEGORIES = [
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_relevance",
    "multi_turn_base",
]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    corpora = {fmt: agreement.corpus(CATEGORIES, 14, fmt)[0] for fmt in ("python", "xml_json")}
    for fmt, results in corpora.items():
        for category, rows in agreement.edge_corpus(fmt, start=14).items():  # after the 14 above
            results[category] += rows
    ours = {fmt: agreement.harness_verdicts(results, fmt) for fmt, results in corpora.items()}
    official = agreement.official_verdicts(corpora, tmp_path_factory.mktemp("bfcl_official"))
    return corpora, ours, official


@pytest.mark.parametrize("fmt", ["python", "xml_json"])
def test_identical_per_entry_verdicts_outside_documented_divergences(verdicts, fmt):
    corpora, ours, official = verdicts
    found = agreement.disagreements(ours[fmt], official[fmt], corpora[fmt])
    assert [d for d in found if (fmt, d["variant"]) not in agreement.KNOWN_DIVERGENCES] == []
    assert set(official[fmt]) == set(CATEGORIES)


@pytest.mark.parametrize("fmt", ["python", "xml_json"])
def test_documented_divergences_are_real(verdicts, fmt):
    corpora, ours, official = verdicts
    edge = {
        r["variant"]: (category, r["id"])
        for category, rows in corpora[fmt].items()
        for r in rows
        if r.get("format") == fmt
    }
    for (f, variant), _why in agreement.KNOWN_DIVERGENCES.items():
        if f == fmt:
            category, entry = edge[variant]
            assert ours[fmt][category][entry] != official[fmt][category][entry], variant


@pytest.mark.parametrize("fmt", ["python", "xml_json"])
def test_every_edge_shape_agrees_entry_by_entry_unless_listed(verdicts, fmt):
    corpora, ours, official = verdicts
    for category, variants in agreement.EDGE_VARIANTS[fmt].items():
        rows = [r for r in corpora[fmt][category] if r.get("format") == fmt]
        assert [r["variant"] for r in rows] == list(variants)
        for r in rows:
            same = ours[fmt][category][r["id"]] == official[fmt][category][r["id"]]
            assert same != ((fmt, r["variant"]) in agreement.KNOWN_DIVERGENCES), (category, r)


def test_the_issues_shapes_get_bfcls_verdicts(verdicts):
    corpora, ours, _ = verdicts
    by_variant = {
        (c, r["variant"]): ours["python"][c][r["id"]]
        for c, rows in corpora["python"].items()
        for r in rows
        if r.get("format") == "python"
    }
    assert by_variant[("irrelevance", "positional_call")] is False  # `[f(70, 1.75)]` is a call
    assert by_variant[("live_relevance", "positional_call")] is True
    assert by_variant[("simple_python", "bare_name_value")] is True  # `start_location=Sydney` reads as text
    assert by_variant[("simple_python", "binop_value")] is True  # `9+1` is 10, computed without eval


@pytest.mark.parametrize("fmt", ["python", "xml_json"])
def test_corpus_exercises_both_verdicts_in_every_category(verdicts, fmt):
    _, ours, _ = verdicts
    for category, by_id in ours[fmt].items():
        assert True in by_id.values() and False in by_id.values(), category


def test_disagreements_are_reported_per_entry():
    found = agreement.disagreements({"c": {"a": True, "b": False}}, {"c": {"a": True, "b": True, "x": False}})
    assert [(d["id"], d["ours"], d["official"]) for d in found] == [("b", False, True), ("x", None, False)]
