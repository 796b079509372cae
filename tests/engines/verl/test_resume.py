"""A resubmitted verl job resumes from the newest complete checkpoint of the same run.

The checkpoints are written by our trainer through verl's own `_save_checkpoint` (dataloader state,
completion marker); only the worker group's weight shards are stood in for (an empty `actor/`).
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

from _verl_helpers import cpu_trainer, drive, prepared_overrides  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402
from verl.utils.tracking import FileLogger  # noqa: E402

from toolcall_repro.engines.verl import launch  # noqa: E402
from toolcall_repro.engines.verl.main import compose_config  # noqa: E402

ACC = "val-core/single_turn/acc/mean@1"


@pytest.fixture
def gpu_free(monkeypatch):
    monkeypatch.setattr(
        RayPPOTrainer,
        "_update_actor",
        lambda self, batch: DataProto.from_single_dict(data={}, meta_info={"metrics": {}}),
    )


def attempt(tmp_path, tokenizer, model_dir, **changes):
    messages: list[str] = []
    overrides = prepared_overrides(tmp_path, tokenizer, model_dir, log=messages.append, **changes)
    return overrides, compose_config(overrides), messages


def killed_at(step, overrides, tokenizer):
    """A first attempt that checkpointed at `step` and died before the next. One loader process: the
    files a checkpoint leaves are what matters here; resuming under verl's 8 workers is
    test_sampler_dataloader's."""
    return drive(cpu_trainer([*overrides, "data.dataloader_num_workers=0"], tokenizer), stop_after=step)


def test_a_first_attempt_starts_fresh_and_a_retry_resumes_from_the_checkpoint(
    tmp_path, tokenizer, model_dir, gpu_free
):
    overrides, cfg, messages = attempt(tmp_path, tokenizer, model_dir)
    assert cfg.trainer.resume_mode == "disable" and cfg.trainer.resume_from_path is None
    assert messages == []  # nothing to resume, nothing discarded
    killed_at(2, overrides, tokenizer)
    _, retry, messages = attempt(tmp_path, tokenizer, model_dir)
    folder = f"{cfg.trainer.default_local_dir}/global_step_2"
    assert retry.trainer.resume_mode == "resume_path" and retry.trainer.resume_from_path == folder
    assert messages == [f"resuming from {folder}"]
    assert retry.toolcall.fingerprint == cfg.toolcall.fingerprint


def test_another_runs_checkpoints_are_moved_aside_with_a_log_line(tmp_path, tokenizer, model_dir, gpu_free):
    overrides, cfg, _ = attempt(tmp_path, tokenizer, model_dir)
    killed_at(2, overrides, tokenizer)
    checkpoints = tmp_path / "train" / "single_turn" / "efficient" / "checkpoints"
    shutil.copytree(checkpoints, tmp_path / "saved")
    for n, changes in enumerate(({"seed": 6}, {"lr": 2e-6}, {"epochs": 4}), start=1):  # seed, config
        if not checkpoints.exists():
            shutil.copytree(tmp_path / "saved", checkpoints)
        _, other, messages = attempt(tmp_path, tokenizer, model_dir, **changes)
        assert other.toolcall.fingerprint != cfg.toolcall.fingerprint, changes
        assert other.trainer.resume_mode == "disable" and other.trainer.resume_from_path is None
        aside = checkpoints.with_name(f"checkpoints.stale-{cfg.toolcall.fingerprint[:12]}-{n}")
        assert messages == [
            f"not resuming from {checkpoints}: global_step_2 is another run's (config, seed, data or base "
            f"weights differ); moved to {aside} (delete it when you do not need it)"
        ]
        assert not checkpoints.exists() and (aside / "global_step_2" / launch.CHECKPOINT_STATE).is_file()


def test_a_checkpoint_without_verls_completion_marker_does_not_count(
    tmp_path, tokenizer, model_dir, gpu_free
):
    overrides, cfg, _ = attempt(tmp_path, tokenizer, model_dir)
    killed_at(2, overrides, tokenizer)
    (tmp_path / "train" / "single_turn" / "efficient" / "checkpoints" / launch.TRACKER).unlink()
    _, retry, messages = attempt(tmp_path, tokenizer, model_dir)
    assert retry.trainer.resume_mode == "disable"
    root = cfg.trainer.default_local_dir
    assert messages == [f"not resuming from {root}: no {launch.TRACKER}: no checkpoint was completed; moved to "
                        f"{root}.stale-incomplete-1 (delete it when you do not need it)"]  # fmt: skip


def test_a_different_base_model_is_another_run(tmp_path, tokenizer, model_dir, gpu_free):
    overrides, cfg, _ = attempt(tmp_path, tokenizer, model_dir)
    original = (model_dir / "config.json").read_text()
    (model_dir / "config.json").write_text(original.replace('"hidden_size": 16', '"hidden_size": 32'))
    try:
        _, other, _ = attempt(tmp_path, tokenizer, model_dir)
    finally:
        (model_dir / "config.json").write_text(original)
    assert other.toolcall.fingerprint != cfg.toolcall.fingerprint


def log_attempt(path, steps, validated, start_val=None):
    """verl's FileLogger lines of one attempt: the validation at its start, then one line a step."""
    logger = FileLogger("p", "e")
    assert logger.filepath == str(path)
    if start_val is not None:
        logger.log({ACC: start_val}, steps[0] - 1)
    for step in steps:
        data = {"training/global_step": step, "training/epoch": 0, "filter/epoch": 1.0 * (step > 3),
                "timing_s/step": 10.0}  # fmt: skip
        if step in validated:
            data[ACC] = step / 10
        logger.log(data, step)
    logger.finish()


def test_metrics_and_curve_continue_without_a_gap_or_a_duplicate(
    tmp_path, tokenizer, model_dir, gpu_free, monkeypatch
):
    overrides, cfg, _ = attempt(tmp_path, tokenizer, model_dir, epochs=6)
    out = tmp_path / "train" / "single_turn" / "efficient"
    log = out / "verl" / "log.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    start = time.time() - 100
    # attempt 1: validates at 0, checkpoints and validates at 2 and 4, dies during step 6
    log_attempt(log, [1, 2, 3, 4, 5], validated={2, 4}, start_val=0.0)
    killed_at(4, overrides, tokenizer)
    with open(log, "a") as f:
        f.write('{"step":6,"data":{"training/glo')  # the kill cut verl's last write short
    _, retry, _ = attempt(tmp_path, tokenizer, model_dir, epochs=6)
    assert retry.trainer.resume_from_path.endswith("global_step_4")
    assert not log.exists()  # verl's FileLogger would truncate it: the kept lines moved aside
    # attempt 2: verl validates at its start step (4) again, then steps 5.. to the end
    log_attempt(log, [5, 6, 7, 8], validated={6, 8}, start_val=0.4)
    summary = launch.finalize(out=str(out), job_start_s=start, merge=False)
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    curve = [json.loads(x) for x in (out / "curve.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 9))
    assert [(c["step"], c["heldout_accuracy"]) for c in curve] == [
        (0, 0.0),
        (2, 0.2),
        (4, 0.4),
        (6, 0.6),
        (8, 0.8),
    ]
    assert [m["epoch"] for m in metrics] == [0, 0, 0, 1, 1, 1, 1, 1]  # the filter's epoch
    assert metrics[-1]["time/cumulative_s"] == pytest.approx(80.0)  # step 5 of attempt 1 is not counted
    assert summary["steps"] == 8 and summary["resumed_from_steps"] == [4] and summary["missing_steps"] == []
    assert summary["gpu_hours_all_attempts"] >= summary["gpu_hours"]


def test_a_retry_after_the_last_step_trains_nothing_more(
    tmp_path, tokenizer, model_dir, gpu_free, monkeypatch
):
    """Killed while scoring its last step (max_steps): the retry scores it, verl's loop is not entered."""
    from types import SimpleNamespace

    overrides, cfg, _ = attempt(tmp_path, tokenizer, model_dir, max_steps=3)
    assert cfg.trainer.total_training_steps == 3
    killed_at(3, overrides, tokenizer)
    retry_overrides, retry, _ = attempt(tmp_path, tokenizer, model_dir, max_steps=3)
    assert retry.trainer.resume_from_path.endswith("global_step_3")
    monkeypatch.setattr(RayPPOTrainer, "fit", lambda self: pytest.fail("verl's loop would train step 4"))
    monkeypatch.setattr(RayPPOTrainer, "_validate", lambda self, merged=False: {ACC: 0.5})
    t = cpu_trainer([*retry_overrides, "data.dataloader_num_workers=0"], tokenizer)
    t.checkpoint_manager = SimpleNamespace(update_weights=lambda step: None)
    t.fit()
    final = json.loads(open(t.toolcall.final_validation).read())
    assert final["step"] == 3 and final["metrics"] == {ACC: 0.5}
