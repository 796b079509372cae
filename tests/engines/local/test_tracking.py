"""Live curves of a local training: TensorBoard event files, read back with TensorBoard's own reader."""

from __future__ import annotations

import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from toolcall_repro.engines.local.grpo import parse_config, train_grpo
from toolcall_repro.engines.local.tracking import Tracker, heldout_tags, step_scalars
from toolcall_repro.rl import STEP_KEYS

# What a person watching a run looks for, by the names verl's loggers use (rl.STEP_KEYS).
WATCHED = (
    "reward/active_mean",
    "group/mixed_frac",
    "group/all_correct_frac",
    "group/all_wrong_frac",
    "filter/skipped",
    "perf/gen_tokens",
    "perf/update_tokens",
    "perf/gen_rows",
    "perf/update_rows",
    "timing_s/gen",
    "timing_s/update_actor",
)


def _train(files, base, out, cfg, trackers):
    return train_grpo(
        train=str(files["multi_turn"]),
        heldout=str(files["heldout_multi_turn"]),
        base=str(base),
        out=str(out),
        config=parse_config(cfg),
        seed=3,
        threads=1,
        log=lambda m: None,
        trackers=trackers,
    )


def test_a_training_writes_every_metric_per_step_to_tensorboard(
    sample_files, base_model, tmp_path, make_config, variants
):
    cfg = make_config(setting="multi_turn", variant="efficient", heldout_samples=2, **variants["efficient"])
    summary = _train(sample_files, base_model, tmp_path, cfg, ("tensorboard",))
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    steps = [json.loads(line)["step"] for line in open(tmp_path / "metrics.jsonl")]
    assert len(steps) == summary["steps"] > 0
    for tag in WATCHED:
        assert tag in tags, tag
        assert [e.step for e in events.Scalars(tag)] == steps, tag
    assert tags <= set(STEP_KEYS) | set(heldout_tags("multi_turn").values())
    curve = [json.loads(line) for line in open(tmp_path / "curve.jsonl")]
    for key, tag in heldout_tags("multi_turn").items():
        scalars = events.Scalars(tag)
        assert [e.step for e in scalars] == [c["step"] for c in curve], tag
        assert [e.value for e in scalars] == pytest.approx([c[key] for c in curve]), tag
    first = json.loads(open(tmp_path / "metrics.jsonl").readline())
    assert events.Scalars("reward/active_mean")[0].value == pytest.approx(first["reward/active_mean"])


def test_no_tracker_no_event_files(sample_files, base_model, tmp_path, make_config):
    _train(sample_files, base_model, tmp_path, make_config(setting="multi_turn", epochs=1), ())
    assert not (tmp_path / "tensorboard").exists()


def test_step_scalars_keep_numbers_only():
    line = {"step": 3, "epoch": 0, "reward/active_mean": 0.5, "filter/precision": None, "perf/gen_tokens": 7}
    line["group/mixed_frac"] = float("nan")
    assert step_scalars(line) == {"reward/active_mean": 0.5, "perf/gen_tokens": 7.0}


def test_the_local_engine_names_its_one_tracker(tmp_path):
    with pytest.raises(ValueError, match=r"among \['tensorboard'\] for the local engine, got \['wandb'\]"):
        Tracker(tmp_path, "single_turn", ("tensorboard", "wandb"))
