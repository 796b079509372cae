"""The claims' verdict rules and statistics on hand-computed numbers, and the scorecard on the toy run."""

from __future__ import annotations

import math

import pytest

from toolcall_repro.analysis import claims as c
from toolcall_repro.analysis import report, scorecard, tables

E = c.Evidence


# --- statistics ---------------------------------------------------------------------------------------


def test_paired_difference_is_a_t_interval_over_the_shared_seeds():
    # differences 3, 2, 4: mean 3, sd 1 (ddof 1); t(0.975, 2) = 4.302653; half = 4.302653 / sqrt(3) = 2.48414
    ev = c.paired_difference({0: 10.0, 1: 12.0, 2: 14.0, 7: 1.0}, {0: 13.0, 1: 14.0, 2: 18.0})
    assert (ev.estimate, ev.n) == (3.0, 3)
    assert ev.low == pytest.approx(0.51586, abs=1e-5) and ev.high == pytest.approx(5.48414, abs=1e-5)


def test_paired_difference_of_one_seed_has_no_interval_and_of_none_says_why():
    ev = c.paired_difference({0: 1.0}, {0: 3.0, 1: 5.0})
    assert (ev.estimate, ev.n, ev.has_interval) == (2.0, 1, False)
    assert "no evaluation seed" in c.paired_difference({0: 1.0}, {1: 2.0}).missing


def test_spread_difference_resamples_seeds():
    # candidate peak-to-peak 4, baseline 0. A resample of one seed three times has spread 0 (3 of 27 draws,
    # above 2.5%); one holding seeds 0 and 2 has 4 (12 of 27, above 2.5%): the interval is [0, 4].
    ev = c.spread_difference([1.0, 1.0, 1.0], [0.0, 2.0, 4.0])
    assert (ev.estimate, ev.low, ev.high, ev.n) == (4.0, 0.0, 4.0, 3)
    assert "two" in c.spread_difference([1.0], [2.0]).missing


def test_share_is_a_wilson_interval_in_percent():
    # x=8, n=10, z=1.959964: centre 9.92073/13.84146 = 0.716740, half 3.136166/13.84146 = 0.226577
    ev = c.share(8, 10)
    assert ev.estimate == pytest.approx(80.0)
    assert ev.low == pytest.approx(49.0163, abs=1e-3) and ev.high == pytest.approx(94.3317, abs=1e-3)
    assert c.share(0, 0).missing


def test_ratio_of_sums_and_normal_difference():
    assert c.ratio_of_sums([3.0, 6.0], [1.0, 2.0]) == (3.0, 3.0, 3.0)
    d, lo, hi = c.normal_difference(50.0, 53.0, 3.0, 4.0)  # half = 1.959964 * 5
    assert d == 3.0 and lo == pytest.approx(-6.79982, abs=1e-4) and hi == pytest.approx(12.79982, abs=1e-4)


def test_update_growth():
    # n 4 -> 16: update 2 -> 8 s a step (x4), rollout 1 -> 2 s (x2): update grows twice as fast
    assert scorecard.update_growth([(16, 2.0, 8.0), (4, 1.0, 2.0)]) == 2.0


def test_paper_size_from_a_range_two_arms_or_a_value():
    assert c.paper_size({"range": [6, 8]}) == (7.0, 6.0, 8.0)
    value, lo, hi = c.paper_size({"arms": [[22.7, 0.9], [15.9, 0.4]]})  # spread hypot(0.9, 0.4) = 0.984886
    assert value == pytest.approx(-6.8) and lo == pytest.approx(-7.784886) and hi == pytest.approx(-5.815114)
    assert c.paper_size({"arms": [[22.9, None], [37.5, None]]}) == pytest.approx((14.6, 14.6, 14.6))
    assert c.paper_size({"value": 1.7}) == (1.7, 1.7, 1.7) and c.paper_size(None) is None


# --- verdict rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ev", "kwargs", "label", "words"),
    [
        (E(7.0, 6.5, 7.5, 3), {"magnitude": {"range": [6, 8]}}, c.REPRODUCED, "agrees"),
        # paper's 7 outside [1, 5], our 3 outside [6, 8]: the sign holds, the size does not
        (E(3.0, 1.0, 5.0, 3), {"magnitude": {"range": [6, 8]}}, c.DIRECTION_ONLY, "size differs"),
        # no effect and (no size to compare) the effect both inside: inconclusive, not "not reproduced"
        (E(3.0, -1.0, 7.0, 3), {}, c.INCONCLUSIVE, "includes 0"),
        (E(3.0, -1.0, 7.0, 3), {"magnitude": {"range": [6, 8]}}, c.INCONCLUSIVE, "the paper's 7.00"),
        # includes no effect and stops short of the paper's size: that excludes the paper's effect
        (E(1.0, -1.0, 3.0, 3), {"magnitude": {"range": [6, 8]}}, c.NOT_REPRODUCED, "stops short of the paper's 6"),
        # the first evidence run's multi-turn speedup: 1.81 [0.00, 2.25] holds 1 and stops short of 2.6
        (E(1.81, 0.0, 2.25, 3), {"null": 1.0, "magnitude": {"value": 2.6}}, c.NOT_REPRODUCED, "short of the paper's 2.60"),
        (E(1.81, 0.9, 3.0, 3), {"null": 1.0, "magnitude": {"value": 2.6}}, c.INCONCLUSIVE, "includes 1"),
        # a fall that stops short: -1 [-3, +1] against the paper's -6.8 ± 0.98
        (E(-1.0, -3.0, 1.0, 3), {"sign": -1, "magnitude": {"arms": [[22.7, 0.9], [15.9, 0.4]]}},
         c.NOT_REPRODUCED, "short of the paper's -5.82"),
        # a pipeline check cannot compare sizes: an interval holding 0 is inconclusive whatever its reach
        (E(1.0, -1.0, 3.0, 3), {"magnitude": {"range": [6, 8]}, "comparable": False, "stand_in": "tiny"},
         c.INCONCLUSIVE, "not comparable: tiny"),
        (E(-3.0, -5.0, -1.0, 3), {}, c.NOT_REPRODUCED, "opposite"),
        # every seed scored the same on both sides (the tiny model at its floor): no signal, not a verdict
        (E(0.0, 0.0, 0.0, 3), {"magnitude": {"range": [6, 8]}}, c.NO_SIGNAL, "do not move"),
        # a fall: -6.8 (the paper's) inside [-8, -5]
        (E(-6.5, -8.0, -5.0, 3), {"sign": -1, "magnitude": {"arms": [[22.7, 0.9], [15.9, 0.4]]}}, c.REPRODUCED, ""),
        # -5 is neither around -6.8 ± 0.98 nor is -6.8 in [-6, -4]
        (E(-5.0, -6.0, -4.0, 3), {"sign": -1, "magnitude": {"arms": [[22.7, 0.9], [15.9, 0.4]]}},
         c.DIRECTION_ONLY, "size differs"),
        (E(7.0, 6.5, 7.5, 3), {"magnitude": {"range": [6, 8]}, "comparable": False, "stand_in": "tiny"},
         c.DIRECTION_ONLY, "not comparable: tiny"),
        # a single seed never earns a verdict, whichever side it falls on
        (E(2.0, n=1), {"null": 1.0}, c.NO_SIGNAL, "no interval"),
        (E(0.5, n=1), {"null": 1.0}, c.NO_SIGNAL, "no interval"),
        (E(1.5, 1.2, 1.9, 3), {"null": 1.0}, c.REPRODUCED, "above 1"),
        (c.absent("no such study"), {}, c.NOT_TESTABLE, "no such study"),
    ],
)  # fmt: skip
def test_direction_verdict(ev, kwargs, label, words):
    v = c.direction_verdict(ev, **kwargs)
    assert v.label == label and words in v.reason


@pytest.mark.parametrize(
    ("ev", "label", "words"),
    [
        (E(95.0, 91.0, 98.0, 50), c.REPRODUCED, "above 90"),
        (E(85.0, 80.0, 89.0, 50), c.NOT_REPRODUCED, "not above 90"),
        (E(92.0, 88.0, 96.0, 50), c.INCONCLUSIVE, "includes 90"),
        (E(92.0, n=1), c.NO_SIGNAL, "no interval"),
        (c.absent("no run"), c.NOT_TESTABLE, "no run"),
    ],
)
def test_threshold_verdict(ev, label, words):
    v = c.threshold_verdict(ev, above=90.0)
    assert v.label == label and words in v.reason


@pytest.mark.parametrize(
    ("ev", "label", "words"),
    [
        (E(0.5, -1.0, 1.9, 40), c.REPRODUCED, "within ±2"),
        (E(3.0, 2.5, 3.5, 40), c.NOT_REPRODUCED, "changed"),
        (E(0.5, -3.0, 4.0, 40), c.INCONCLUSIVE, "reaches beyond"),
        (E(0.0, 0.0, 0.0, 40), c.NO_SIGNAL, "do not move"),
    ],
)
def test_unchanged_verdict(ev, label, words):
    v = c.unchanged_verdict(ev, margin=2.0)
    assert v.label == label and words in v.reason


def test_beyond_the_paper_states_the_sign_without_a_verdict():
    assert c.beyond_verdict(E(3.0, 1.0, 5.0, 3)).reason.startswith("helps")
    assert c.beyond_verdict(E(-3.0, -5.0, -1.0, 3)).reason.startswith("hurts")
    assert c.beyond_verdict(E(0.0, -1.0, 1.0, 3)).label == c.BEYOND


def test_judge_dispatches_on_the_kind_and_names_the_allowed_ones():
    assert c.judge({"kind": "threshold", "above": 80}, E(90.0, 85.0, 95.0, 9)).label == c.REPRODUCED
    assert c.judge({"kind": "direction", "no_effect": 1.0}, E(0.5, 0.2, 0.8, 3)).label == c.NOT_REPRODUCED
    with pytest.raises(ValueError, match="allowed: direction, threshold, unchanged, beyond"):
        c.judge({"kind": "vibes"}, E(1.0))


def test_fmt_evidence():
    assert c.fmt_evidence(E(3.0, 0.51586, 5.48414, 3, "points")) == "+3.0 [0.5, 5.5] points, n=3"
    assert c.fmt_evidence(E(2.0, n=1, unit="x"), 2) == "2.00x, n=1 (no interval)"
    assert c.fmt_evidence(c.absent("x")) == "n/a"


# --- the claims file and the scorecard ------------------------------------------------------------------


def test_every_claim_of_the_issue_has_a_fixed_test():
    spec = c.load_claims()
    ids = [cl["id"] for cl in spec["claims"]]
    assert len(ids) == len(set(ids))
    for needed in (
        "seed_spread", "template_native", "thinking_keep", "prompt_stronger", "prompt_rules_not_length",
        "factorial_format", "data_format_multi_hurts", "zero_variance_early", "all_correct_dominates",
        "update_dominates", "update_grows_with_n", "retention_single", "retention_multi", "speedup_single",
        "speedup_multi", "rl_gain_bfcl", "rl_gain_acebench", "general_unchanged",
    ):  # fmt: skip
        assert needed in ids
    for cl in spec["claims"]:
        assert cl["test"]["kind"] in ("direction", "threshold", "unchanged", "beyond")
        assert set(cl["test"]["tables"]) <= {scorecard.PAPER_SCALE, scorecard.PIPELINE_CHECK}
        assert set(cl["test"]["tables"].values()) <= set(report.TABLE_NAMES)


def _card(run_dir, run_units, pipeline_check: bool):
    res = report.RunResults(run_dir, run_units)
    built = report.build_tables(res, {"pipeline_check": pipeline_check})
    return report.build_scorecard(res, built, {"pipeline_check": pipeline_check}).frame.set_index("claim")


def test_scorecard_at_paper_scale_reads_bfcl(run_dir, run_units):
    card = _card(run_dir, run_units, pipeline_check=False)
    assert len(card) == len(c.load_claims()["claims"])
    # stronger 35, context 28 in every seed: +7 [7, 7], the paper's 6-8: reproduced, read from `template`
    row = card.loc["template_native"]
    assert (row["estimate"], row["low"], row["high"], row["n"]) == pytest.approx((7.0, 7.0, 7.0, 3))
    assert (row["verdict"], row["table"]) == (c.REPRODUCED, "template")
    # RL +5 against the paper's 2.2 ± hypot(1.4, 0.7): the sign, not the size
    assert card.loc["rl_gain_bfcl", "verdict"] == c.DIRECTION_ONLY
    # variance.json offsets (-2, 0, 1, 1.5) points multi, half that single: 3.5 - 1.75
    assert card.loc["seed_spread", "estimate"] == pytest.approx(1.75)
    # vanilla's transition counts: 3 of 4 all-correct prompts stay so; Wilson [30.1, 95.4] includes 80
    assert card.loc["retention_single", "estimate"] == pytest.approx(75.0)
    assert card.loc["retention_single", "verdict"] == c.INCONCLUSIVE
    # one training seed: 2.0x, no interval: no signal, never a verdict
    assert (card.loc["speedup_single", "estimate"], card.loc["speedup_single", "verdict"]) == (
        2.0,
        c.NO_SIGNAL,
    )
    assert card.loc["speedup_multi", "verdict"] == c.NOT_TESTABLE
    assert "no rl-multi row" in card.loc["rl_gain_acebench", "reason"]
    # base 40, RL 45, stderr 5 each: +5 [-8.86, 18.86] reaches beyond the ±2 margin
    assert card.loc["general_unchanged", "low"] == pytest.approx(-8.8599, abs=1e-3)
    assert card.loc["general_unchanged", "verdict"] == c.INCONCLUSIVE
    assert "n sweep" in card.loc["update_grows_with_n", "reason"]


def test_scorecard_on_a_pipeline_check_reads_the_held_out_studies_and_compares_no_sizes(run_dir, run_units):
    card = _card(run_dir, run_units, pipeline_check=True)
    row = card.loc["template_native"]
    assert (row["table"], row["verdict"]) == ("template_heldout", c.DIRECTION_ONLY)
    assert "stands in for BFCL" in row["reason"]
    assert card.loc["rl_gain_acebench", "verdict"] == c.NOT_TESTABLE
    assert "pipeline check" in card.loc["rl_gain_acebench", "reason"]


def test_scorecard_is_written_first_in_the_index(run_dir, tmp_path, run_units):
    res = report.RunResults(run_dir, run_units)
    built = report.build_tables(res, {"pipeline_check": True})
    card = report.build_scorecard(res, built, {"pipeline_check": True})
    report.write_tables(built, tmp_path, card)
    for ext in ("md", "csv", "html"):
        assert (tmp_path / f"claims.{ext}").stat().st_size > 0
    index = (tmp_path / "index.md").read_text()
    assert index.startswith("# Claims scorecard") and index.index("# Tables") > index.index(
        "template_heldout"
    )
    assert "[template_heldout](md/template_heldout.md)" in (tmp_path / "claims.md").read_text()


def test_paper_columns_at_paper_scale_only(run_dir, run_units):
    res = report.RunResults(run_dir, run_units)
    paper = {t.name: t for t in report.build_tables(res, {"pipeline_check": False})}
    t4 = paper["table4_bfcl"].frame.set_index(["model", "protocol"])
    # ours 20.0 (base, default) against the paper's 22.7; 40.0 (RL, stronger) against 39.4
    assert t4.loc[("base", "default"), "multi_turn_mean_paper"] == 22.7
    assert t4.loc[("base", "default"), "multi_turn_mean_diff"] == pytest.approx(-2.7)
    assert t4.loc[("rl-multi", "stronger"), "avg_mean_diff"] == pytest.approx(62.0 - 62.1)
    assert math.isnan(t4.loc[("base", "context"), "multi_turn_mean_paper"])
    fmt = paper["data_format"].frame.set_index(["model", "protocol"])["multi_turn_mean_paper"]
    assert (fmt[("fmt-single", "default")], fmt[("fmt-multi", "default")]) == (20.2, 15.9)
    assert "paper multi_turn" in paper["prompt_ablation"].display.columns
    check = {t.name: t for t in report.build_tables(res, {"pipeline_check": True})}
    assert "multi_turn_mean_paper" not in check["table4_bfcl"].frame.columns


def test_quoted_rows_come_from_the_claims_file():
    rows = c.load_claims()["reported"]["table4_bfcl"]["rows"]
    assert tables.QUOTED_TABLE4[0] == ("Qwen3-4B, BFCL default prompt", (22.7, 0.9), (83.9, 0.5), (53.3, 0.5))
    assert len(tables.QUOTED_TABLE4) == len(rows) == 7
    assert tables.PAPER_INSTRUCTION_TOKENS == {
        "bfcl_default": 228, "bfcl_default_x2": 452, "default_rules12": 302, "stronger": 448,
    }  # fmt: skip
