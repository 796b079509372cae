"""Summary scores: BFCL's own aggregates (checked against bfcl-eval's leaderboard code) + paper candidates."""

import csv
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolcall_repro.eval.bfcl.aggregate import MULTI_TURN, SINGLE_TURN, summarise_categories

ALL = SINGLE_TURN + MULTI_TURN


def _random_categories(seed):
    rng = random.Random(seed)
    cats = {}
    for c in ALL:
        total = rng.randint(5, 400)
        correct = rng.randint(0, total)
        cats[c] = {"accuracy": correct / total, "correct": correct, "total": total}
    return cats


def test_bfcl_aggregates_equal_bfcl_leaderboard_csv(tmp_path):
    from bfcl_eval.eval_checker.eval_runner_helper import generate_leaderboard_csv

    cats = _random_categories(0)
    table = {
        "Qwen_Qwen3-8B": {c: {"accuracy": v["accuracy"], "total_count": v["total"]} for c, v in cats.items()}
    }
    generate_leaderboard_csv(table, tmp_path)
    with open(tmp_path / "data_overall.csv") as f:
        (row,) = list(csv.DictReader(f))
    summary, coverage = summarise_categories(cats)

    def pct(column):
        return float(row[column].rstrip("%")) / 100

    assert summary["non_live"] == pytest.approx(pct("Non-Live AST Acc"), abs=5e-5)
    assert summary["live"] == pytest.approx(pct("Live Acc"), abs=5e-5)
    assert summary["multi_turn"] == pytest.approx(pct("Multi Turn Acc"), abs=5e-5)
    assert summary["irrelevance"] == pytest.approx(pct("Irrelevance Detection"), abs=5e-5)
    assert all(c["complete"] for c in coverage.values())


def test_paper_candidates_follow_their_formulas():
    cats = _random_categories(1)
    summary, _ = summarise_categories(cats)
    assert summary["single_turn_mean_nl_l"] == pytest.approx((summary["non_live"] + summary["live"]) / 2)
    correct = sum(cats[c]["correct"] for c in SINGLE_TURN)
    total = sum(cats[c]["total"] for c in SINGLE_TURN)
    assert summary["single_turn_weighted"] == pytest.approx(correct / total)
    assert summary["avg"] == pytest.approx((summary["multi_turn"] + summary["single_turn_mean_nl_l"]) / 2)
    assert summary["avg_weighted"] == pytest.approx(
        (summary["multi_turn"] + summary["single_turn_weighted"]) / 2
    )


def test_subset_runs_average_over_what_ran_and_say_what_is_missing():
    cats = {
        "simple_python": {"accuracy": 0.5, "correct": 1, "total": 2},
        "multiple": {"accuracy": 1.0, "correct": 2, "total": 2},
        "live_simple": {"accuracy": 0.25, "correct": 1, "total": 4},
        "irrelevance": {"accuracy": 1.0, "correct": 2, "total": 2},
    }
    summary, coverage = summarise_categories(cats)
    assert summary["non_live"] == pytest.approx(0.75)  # not deflated by the four categories not run
    assert summary["live"] == pytest.approx(0.25)
    assert summary["multi_turn"] is None and summary["avg"] is None and summary["avg_weighted"] is None
    assert coverage["non_live"]["missing"] == [
        "simple_java",
        "simple_javascript",
        "parallel",
        "parallel_multiple",
    ]
    assert not coverage["single_turn_weighted"]["complete"]
    assert summary["single_turn_weighted"] == pytest.approx(6 / 10)


def test_inconsistent_counts_are_rejected():
    with pytest.raises(ValueError, match="correct"):
        summarise_categories({"multiple": {"accuracy": 1.0, "correct": 3, "total": 2}})


@given(
    st.dictionaries(
        st.sampled_from(ALL),
        st.integers(1, 50).flatmap(lambda t: st.tuples(st.integers(0, t), st.just(t))),
        min_size=1,
    )
)
def test_every_aggregate_lies_within_its_member_accuracies(raw):
    cats = {c: {"accuracy": k / n, "correct": k, "total": n} for c, (k, n) in raw.items()}
    summary, coverage = summarise_categories(cats)
    for key, value in summary.items():
        if value is None:
            continue
        members = [cats[c]["accuracy"] for c in coverage[key]["run"]]
        assert min(members) - 1e-12 <= value <= max(members) + 1e-12
