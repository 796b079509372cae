"""verl's JSONL log, as its own FileLogger writes it, becomes our metrics and curve lines."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

from verl.utils.tracking import FileLogger  # noqa: E402

from toolcall_repro.engines.verl.metrics import VerlLogError, convert, read_log, summary  # noqa: E402
from toolcall_repro.rl import STEP_KEYS, TRANSITION_KEYS  # noqa: E402

ACC = "val-core/single_turn/acc/mean@1"


def train_line(step, epoch, step_s, **extra):
    return {
        "training/global_step": step,
        "training/epoch": epoch,
        "timing_s/step": step_s,
        "timing_s/gen": step_s * 0.3,
        "timing_s/update_actor": step_s * 0.6,
        "perf/total_num_tokens": 1000 * step,
        "perf/gen_tokens": 400,
        "perf/update_tokens": 500,
        "group/all_correct_frac": 0.5,
        "filter/skipped": 3.0,
        "filter/precision": math.nan,  # verl reduces our None to NaN, FileLogger writes null
        "transition/all_correct_to_mixed": 2.0,
        "reward/reason/correct": 0.5,
        "actor/pg_loss": 0.1,
        **extra,
    }


def write_log(tmp_path, monkeypatch, entries):
    path = tmp_path / "log.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    logger = FileLogger("p", "e")
    for step, data in entries:
        logger.log(data, step)
    logger.finish()
    return path.read_text().splitlines()


def test_log_becomes_contract_lines(tmp_path, monkeypatch):
    lines = write_log(
        tmp_path,
        monkeypatch,
        [
            (0, {ACC: 0.25}),
            (1, train_line(1, 0, 10.0)),
            (2, train_line(2, 0, 12.0, **{ACC: 0.5, "timing_s/testing": 3.0})),
            (3, train_line(3, 1, 8.0)),
        ],
    )
    metrics, curve = convert(read_log(lines), n_gpus=8)
    assert [m["step"] for m in metrics] == [1, 2, 3] and [m["epoch"] for m in metrics] == [0, 0, 1]
    assert set(metrics[0]) == set(STEP_KEYS) | set(TRANSITION_KEYS) | {"reward/reason/correct"}
    assert metrics[0]["filter/skipped"] == 3 and isinstance(metrics[0]["filter/skipped"], int)
    assert metrics[0]["filter/precision"] is None and metrics[0]["timing_s/optimizer"] is None
    assert (
        metrics[0]["transition/all_correct_to_mixed"] == 2 and metrics[0]["transition/mixed_to_mixed"] is None
    )
    assert metrics[0]["timing_s/update_actor"] == pytest.approx(6.0)
    assert [m["time/cumulative_s"] for m in metrics] == [10.0, 25.0, 33.0]
    assert metrics[2]["time/cumulative_device_s"] == 33.0 * 8
    assert [(c["step"], c["heldout_accuracy"], c["time/cumulative_s"]) for c in curve] == [
        (0, 0.25, 0.0),
        (2, 0.5, 25.0),
    ]


def test_final_validation_extends_the_curve_once(tmp_path, monkeypatch):
    lines = write_log(tmp_path, monkeypatch, [(0, {ACC: 0.25}), (1, train_line(1, 0, 5.0))])
    final = {"step": 1, "epoch": 0, "metrics": {ACC: 0.75}}
    _, curve = convert(read_log(lines), n_gpus=1, final_validation=final)
    assert [(c["step"], c["heldout_accuracy"]) for c in curve] == [(0, 0.25), (1, 0.75)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "verl log:1: not JSON"),
        ('{"step": 1}', "expected"),
        (
            '{"step": 2, "data": {"training/global_step": 1, "training/epoch": 0, "timing_s/step": 1}}',
            "holds",
        ),
        ('{"step": 1, "data": {"training/global_step": 1, "training/epoch": 0}}', "lacks timing_s/step"),
    ],
)
def test_malformed_logs_are_named(text, message):
    with pytest.raises(VerlLogError, match=message):
        convert(read_log([text]), n_gpus=1)


def test_summary_counts_gpu_hours_from_wall_clock():
    metrics, curve = convert(read_log([]), n_gpus=16)
    out = summary(
        metrics, curve, wall_clock_s=1800.0, nodes=2, gpus_per_node=8, run={"setting": "multi_turn"}
    )
    assert out["gpu_hours"] == pytest.approx(8.0) and out["n_gpus"] == 16
    assert out["final_heldout_accuracy"] is None and out["steps"] == 0
