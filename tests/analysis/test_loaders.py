from __future__ import annotations

import json

import pytest

from toolcall_repro.analysis import loaders


def test_score_summaries_keep_card_fields_and_trace_to_manifest(run_dir, run_units):
    index = loaders.Declared(run_dir)
    df = loaders.load_scores(run_units["scores"], index, "bfcl")
    row = df[(df["model"] == "base") & (df["protocol"] == "context") & (df["metric"] == "multi_turn")].iloc[0]
    assert row["template"] == "context" and row["system_prompt"] == "stronger"
    assert row["mean"] == pytest.approx(0.28) and row["n_seeds"] == 3 and row["seeds"] == [0, 1, 2]
    assert row["source"] == "eval/bfcl/base/context/summary.json"
    assert row["manifest"] == "manifests/summarise_bfcl/base-context.json"


def test_file_without_manifest_says_so(run_dir, run_units):
    (run_dir / "manifests" / "summarise_bfcl" / "base-context.json").unlink()
    df = loaders.load_scores(run_units["scores"], loaders.Declared(run_dir), "bfcl")
    assert df[df["protocol"] == "context"]["manifest"].isna().all()


def test_bad_jsonl_line_is_an_error_naming_file_and_line(run_dir, run_units):
    path = run_dir / "train" / "single_turn" / "vanilla" / "metrics.jsonl"
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(loaders.ResultFileError, match=r"metrics.jsonl:5"):
        loaders.load_training_runs(run_dir, run_units["runs"], loaders.Declared(run_dir))


def test_summary_without_metrics_is_an_error(run_dir, run_units):
    (run_dir / "eval" / "bfcl" / "base" / "default" / "summary.json").write_text(json.dumps({"card": {}}))
    with pytest.raises(loaders.ResultFileError, match="no 'metrics'"):
        loaders.load_scores(run_units["scores"], loaders.Declared(run_dir), "bfcl")


def test_training_runs_take_config_from_the_manifest(run_dir, run_units):
    runs = loaders.load_training_runs(run_dir, run_units["runs"], loaders.Declared(run_dir))
    eff = next(r for r in runs if r.variant == "efficient")
    assert eff.config["downsample"] == {"m": 4} and eff.seed == 0 and len(eff.metrics) == 4
    assert eff.trace["manifest"] == "manifests/train_grpo/single_turn-efficient.json"


def test_training_run_missing_a_file_is_an_error(run_dir, run_units):
    (run_dir / "train" / "single_turn" / "vanilla" / "curve.jsonl").unlink()
    with pytest.raises(loaders.ResultFileError, match="lacks"):
        loaders.load_training_runs(run_dir, run_units["runs"], loaders.Declared(run_dir))


def test_filter_report_chains_and_sources(run_dir, run_units):
    df = loaders.load_filter_report(run_units["filter_report"], loaders.Declared(run_dir))
    assert list(df["chain"]) == ["normalise/xlam", "single_turn", "multi_turn"]
    assert list(df["in"]) == [243, 360, 360] and list(df["out"]) == [240, 120, 200]
    assert df.iloc[1]["dropped"] == "both_right 200, both_wrong 40"
    assert df["manifest"].notna().all()


def test_filter_report_other_shapes_and_errors(run_dir, run_units):
    path = run_dir / "data" / "filter_report.json"
    path.write_text(json.dumps({"steps": [{"name": "kept", "count": 3}]}))
    df = loaders.load_filter_report(run_units["filter_report"], loaders.Declared(run_dir))
    assert list(df["step"]) == ["kept"] and list(df["count"]) == [3]
    path.write_text(json.dumps({"steps": [{"count": 3}]}))
    with pytest.raises(loaders.ResultFileError, match="no name"):
        loaders.load_filter_report(run_units["filter_report"], loaders.Declared(run_dir))


def test_with_declared_inputs_nothing_else_is_read(run_dir, run_units):
    """A rule's declared inputs are all the analysis reads: an undeclared summary (a stale file, another
    target's run) and an undeclared manifest stay out, even a malformed one."""
    declared = [
        run_dir / "eval" / "bfcl" / "base" / "context" / "summary.json",
        run_dir / "manifests" / "summarise_bfcl" / "base-context.json",
        *(run_dir / "train" / "single_turn" / "vanilla" / n for n in ("summary.json", "metrics.jsonl", "curve.jsonl")),
    ]
    (run_dir / "eval" / "bfcl" / "base" / "default" / "summary.json").write_text("{not json")
    (run_dir / "manifests" / "train_grpo" / "single_turn-vanilla.json").write_text("{not json")
    index = loaders.Declared(run_dir, [str(p) for p in declared])
    scores = loaders.load_scores(run_units["scores"], index, "bfcl")
    assert set(scores["protocol"]) == {"context"}
    assert set(scores["manifest"]) == {"manifests/summarise_bfcl/base-context.json"}
    runs = loaders.load_training_runs(run_dir, run_units["runs"], index)
    assert [(r.setting, r.variant) for r in runs] == [("single_turn", "vanilla")]
    assert runs[0].trace["manifest"] is None  # its manifest was not declared, so not read
    assert len(loaders.load_filter_report(run_units["filter_report"], index)) == 0  # not declared
    # read as a whole, the same directory fails on the malformed summary
    with pytest.raises(loaders.ResultFileError):
        loaders.load_scores(run_units["scores"], loaders.Declared(run_dir, None), "bfcl")
