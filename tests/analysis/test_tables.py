from __future__ import annotations

import math

import pandas as pd
import pytest

from toolcall_repro.analysis import efficiency, loaders, tables, tabular


@pytest.fixture
def bfcl(run_dir, run_units):
    return loaders.load_scores(run_units["scores"], loaders.Declared(run_dir), "bfcl")


def test_table4_rows_in_percent_with_quoted_rows_marked(bfcl):
    t = tables.table4(bfcl, [(m, p) for m in ("base", "rl-multi") for p in ("default", "stronger")])
    ours = t.frame[t.frame["protocol"] != "quoted"]
    assert len(ours) == 4 and len(t.frame) == 4 + len(tables.QUOTED_TABLE4)
    rl = ours[(ours["model"] == "rl-multi") & (ours["protocol"] == "stronger")].iloc[0]
    assert rl["multi_turn_mean"] == pytest.approx(40.0) and rl["multi_turn_std"] == pytest.approx(1.0)
    quoted = t.frame[t.frame["protocol"] == "quoted"]
    assert quoted["source"].str.startswith("quoted").all() and quoted["manifest"].isna().all()
    md = t.markdown()
    assert "40.0 ± 1.0" in md and "| quoted |" in md
    assert (
        "`eval/bfcl/rl-multi/stronger/summary.json` (manifest: `manifests/summarise_bfcl/rl-multi-stronger.json`)"
        in md
    )


def test_missing_study_row_is_shown_and_noted(bfcl):
    t = tables.study_table(bfcl, "x", "X", [("base", "default"), ("ghost", "default")])
    assert t.display.iloc[1]["BFCL multi"] == "n/a"
    assert any("ghost/default" in n for n in t.notes)


def test_prompt_ablation_shows_input_tokens_unscaled(bfcl):
    t = tables.prompt_ablation_table(bfcl, [("base", "default"), ("base", "doubled")])
    assert list(t.frame["mean_input_tokens_mean"]) == [270.0, 270.0]
    assert list(t.frame["system_prompt"]) == ["bfcl_default", "bfcl_default_x2"]
    # the paper's measure (system instruction alone, from the card) beside ours, and the paper's figures
    assert list(t.display[tables.INSTRUCTION_COLUMN]) == ["120", "150"]
    assert list(t.frame["paper_instruction_tokens"]) == [228, 452]


def test_seed_spread_peak_to_peak(run_dir, run_units):
    v = loaders.load_scores(run_units["scores"], loaders.Declared(run_dir), "bfcl", kind="variance")
    t = tables.seed_spread_table(v)
    multi = t.frame[t.frame["metric"] == "multi_turn"].iloc[0]
    assert multi["peak_to_peak"] == pytest.approx(3.5) and multi["seeds"] == "0,1,2,3"


def test_acebench_groups(run_dir, run_units):
    df = loaders.load_scores(run_units["scores"], loaders.Declared(run_dir), "acebench")
    t = tables.acebench_table(df)
    assert t.display.iloc[0]["overall"] == "61.0 ± 1.4"  # upstream's checker: the headline
    assert t.display.iloc[0]["overall fixed"] == "66.0 ± 1.4"
    assert t.display.iloc[0]["special fixed"] == "n/a"  # not in this summary
    assert "normal_atom_bool_mean" in t.frame.columns and "fixed/normal_mean" in t.frame.columns


def test_general_table_delta_and_hash_check(run_dir, run_units):
    df = loaders.load_general(run_units["scores"], loaders.Declared(run_dir))
    t = tables.general_table(df, "base", ["rl-multi"])
    row = t.frame.iloc[0]
    assert (row["base"], row["rl"], row["delta"]) == pytest.approx((40.0, 45.0, 5.0))
    assert row["source_rl"] == "eval/general/rl-multi/summary.json"
    df.loc[df["model"] == "rl-multi", "task_hash"] = "other"
    with pytest.raises(ValueError, match="different documents"):
        tables.general_table(df, "base", ["rl-multi"])


def test_speedup_table_on_constructed_runs(run_dir, run_units):
    runs = loaders.load_training_runs(run_dir, run_units["runs"], loaders.Declared(run_dir))
    t = efficiency.speedup_table(runs)
    eff = t.frame.set_index("variant").loc["efficient"]
    assert eff["target_accuracy"] == pytest.approx(0.6)
    assert eff["baseline_time_h"] == pytest.approx(3.0) and eff["time_to_target_h"] == pytest.approx(1.5)
    assert eff["speedup"] == pytest.approx(2.0) and math.isnan(eff["speedup_std"])  # one seed: no spread
    assert eff["filter_rate"] == pytest.approx(0.25) and eff["kept_fraction"] == pytest.approx(0.5)
    # predicted: f from the efficient run, u = 3/4 from vanilla, m/n = 4/8
    assert eff["predicted_speedup"] == pytest.approx(1 / (0.75 * 0.25 + 0.75 * 0.75 * 0.5))
    assert t.frame.set_index("variant").loc["vanilla", "update_share"] == pytest.approx(0.75)


def test_speedup_table_says_not_reached(run_dir, run_units):
    runs = loaders.load_training_runs(run_dir, run_units["runs"], loaders.Declared(run_dir))
    t = efficiency.speedup_table(runs, target=0.9)
    assert t.display.set_index("variant").loc["efficient", "speedup"] == "not reached"
    assert any("not reached" in n for n in t.notes)


def test_speedup_table_says_when_the_target_is_the_starting_accuracy(run_dir, run_units):
    # Both runs start from the same base at 0.1: a target met at time 0 measures no speedup.
    runs = loaders.load_training_runs(run_dir, run_units["runs"], loaders.Declared(run_dir))
    t = efficiency.speedup_table(runs, target=0.1)
    assert t.display.set_index("variant").loc["efficient", "speedup"] == "at start"
    assert any("initial held-out accuracy" in n for n in t.notes)
    assert not any("not reached" in n for n in t.notes)


def test_markdown_escapes_pipes():
    md = tabular.markdown_table(pd.DataFrame({"a": ["x|y"]}))
    assert "x\\|y" in md


def test_heldout_study_tables_and_the_factorial_layout(run_dir, run_units):
    from toolcall_repro.analysis import report

    res = report.RunResults(run_dir, run_units)
    cfg = {
        "pipeline_check": True,
        "evaluate": {
            "studies": {
                "template": {"models": ["base"], "protocols": ["stronger", "context"]},
                "prompt_ablation": {"models": ["base"], "protocols": ["default", "stronger"]},
                "prompt_factorial": {"models": ["base"], "protocols": ["context"], "benchmarks": ["heldout"]},
            }
        },
    }
    built = {t.name: t for t in report.build_tables(res, cfg)}
    assert tuple(built) == report.TABLE_NAMES
    held = built["template_heldout"]
    assert list(held.display["held-out multi"]) == ["55.0 ± 1.0", "48.0 ± 1.0"]
    assert "held-out reserve benchmark" in held.notes[0]
    assert tables.PIPELINE_CHECK_NOTE in built["template"].notes  # the tiny model's BFCL tables
    # make run's efficiency table says in its first line that it is a check, and where the evidence is
    first = built["speedup"].markdown().splitlines()[0]
    assert first.startswith("# Pipeline check, not evidence") and "make evidence" in first
    assert tables.PIPELINE_CHECK_NOTE not in held.notes
    # the factorial runs on the held-out benchmark only here: no BFCL rows, held-out rows beside the paper's
    assert built["prompt_factorial"].frame.empty
    factorial = built["prompt_factorial_heldout"]
    assert list(factorial.frame["protocol"]) == ["context", "default", "stronger"]
    assert list(factorial.display["rule"])[1:] == ["paper: BFCL default", "paper: stronger (1-4)"]
