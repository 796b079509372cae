"""prepare -> (verl) -> finalize, around the GPU part: files, validation against verl, summary."""

from __future__ import annotations

import json
import time

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

import pyarrow.parquet as pq  # noqa: E402
from _verl_helpers import chat_messages, make_sample, run_config, tiny_qwen2_config  # noqa: E402
from verl.utils.tracking import FileLogger  # noqa: E402

from toolcall_repro import protocol  # noqa: E402
from toolcall_repro.data.schema import write_samples  # noqa: E402
from toolcall_repro.engines.verl import __main__ as cli  # noqa: E402
from toolcall_repro.engines.verl import hydra, launch  # noqa: E402
from toolcall_repro.engines.verl.adapter import make_streak_filter  # noqa: E402
from toolcall_repro.engines.verl.main import check_config, compose_config  # noqa: E402

ACC = "val-core/single_turn/acc/mean@1"


@pytest.fixture
def inputs(tmp_path):
    write_samples([make_sample(i) for i in range(8)], tmp_path / "train.parquet")
    write_samples([make_sample(50 + i) for i in range(5)], tmp_path / "heldout.parquet")
    return tmp_path


def prepare(inputs, model_dir, tokenizer, **kw):
    out = inputs / "results" / "train" / "single_turn" / "efficient"
    args = dict(
        train=str(inputs / "train.parquet"),
        heldout=str(inputs / "heldout.parquet"),
        base=str(model_dir),
        config={**run_config(), "verl": {"gpus_per_node": 8, "tensor_parallel": 2}},
        out=str(out),
        seed=7,
        nodes=1,
        gpus_per_node=2,
        chat_messages=chat_messages,
        tokenizer=tokenizer,
    )
    args.update(kw)
    launch.prepare(**args)
    return out


def test_prepare_writes_validated_inputs(inputs, model_dir, tokenizer):
    out = prepare(inputs, model_dir, tokenizer)
    work = out / "verl"
    overrides = hydra.read_overrides((work / "overrides.txt").read_text())
    cfg = compose_config(overrides)
    check_config(cfg)
    assert cfg.trainer.n_gpus_per_node == 2  # --gpus-per-node wins over the config's 8
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 2
    assert pq.read_table(work / "train.parquet").num_rows == 8
    assert pq.read_table(work / "heldout.parquet").num_rows == 3  # heldout_size
    report = json.loads((work / "data_report.json").read_text())
    assert report["heldout"]["dropped_counts"] == {"beyond_limit": 2}
    info = json.loads((work / "run.json").read_text())
    assert info["seed"] == 7 and info["geometry"]["m"] == 2 and info["verl"]["nodes"] == 1


def test_prepare_refuses_a_geometry_verl_would_reject(inputs, model_dir, tokenizer):
    with pytest.raises(hydra.VerlConfigError, match="tensor_parallel"):
        prepare(inputs, model_dir, tokenizer, gpus_per_node=3)
    assert not (inputs / "results").exists()  # nothing written before the check


def fake_run(out, monkeypatch, steps=3, final=True):
    """What a verl run leaves behind: its JSONL log (by verl's FileLogger), final score, filter state."""
    info = json.loads((out / "verl" / "run.json").read_text())
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", info["paths"]["log_jsonl"])
    logger = FileLogger("p", "e")
    logger.log({ACC: 0.2}, 0)
    for step in range(1, steps + 1):
        data = {
            "training/global_step": step,
            "training/epoch": 0,
            "timing_s/step": 60.0,
            "perf/gen_tokens": 100,
        }
        if step == 2:
            data[ACC] = 0.4
        logger.log(data, step)
    logger.finish()
    if final:
        (out / "verl" / "final_validation.json").write_text(
            json.dumps({"step": steps, "metrics": {ACC: 0.6}})
        )
    streak = make_streak_filter(info["run"]["filter"], info["seed"])
    streak.active_set(0, ["a", "b"])
    streak.update(0, {"a": [1.0, 1.0], "b": [0.0, 1.0]})
    (out / "verl" / "filter_state.json").write_text(json.dumps(streak.state_dict()))


def test_finalize_writes_metrics_curve_and_summary(inputs, model_dir, tokenizer, capsys, monkeypatch):
    out = prepare(inputs, model_dir, tokenizer)
    fake_run(out, monkeypatch)
    start = time.time() - 3600
    assert cli.main(["finalize", "--out", str(out), "--job-start-s", str(start), "--no-merge"]) == 0
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    curve = [json.loads(x) for x in (out / "curve.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert [(c["step"], c["heldout_accuracy"]) for c in curve] == [(0, 0.2), (2, 0.4), (3, 0.6)]
    assert summary["gpu_hours"] == pytest.approx(2.0, rel=0.01)  # one hour x 2 GPUs
    assert summary["final_heldout_accuracy"] == 0.6 and summary["steps"] == 3
    assert summary["filter"]["observed_types"] == {"all_correct": 1, "all_wrong": 0, "mixed": 1}
    assert summary["data"]["train"]["rows_out"] == 8
    assert '"gpu_hours"' in capsys.readouterr().out


def test_latest_checkpoint_is_the_one_verl_names(tmp_path):
    with pytest.raises(FileNotFoundError, match="saved no checkpoint"):
        launch.latest_actor_checkpoint(tmp_path)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("6")
    with pytest.raises(FileNotFoundError, match="names step 6"):
        launch.latest_actor_checkpoint(tmp_path)
    (tmp_path / "global_step_6" / "actor").mkdir(parents=True)
    assert launch.latest_actor_checkpoint(tmp_path) == tmp_path / "global_step_6" / "actor"


@pytest.mark.skipif(
    not hasattr(protocol, "chat_messages"),
    reason="toolcall_repro.protocol.chat_messages is not there yet: prepare cannot template for verl",
)
def test_prepare_with_the_real_training_protocol(inputs, tmp_path):
    from toolcall_repro.engines.local.tokenizer import provisional_tokenizer

    base = tmp_path / "model"
    provisional_tokenizer(protocol.load_chat_template()).save_pretrained(base)
    tiny_qwen2_config().save_pretrained(base)
    multi = tmp_path / "multi.parquet"
    write_samples([make_sample(i, "multi_turn") for i in range(4)], multi)
    out = tmp_path / "out"
    cfg = json.dumps(
        {**run_config(setting="multi_turn", max_prompt_tokens=8192), "verl": {"gpus_per_node": 2}}
    )
    argv = ["prepare", "--train", str(multi), "--heldout", str(multi), "--base", str(base), "--config", cfg]
    assert cli.main([*argv, "--out", str(out), "--seed", "1"]) == 0  # every prompt equals protocol.render
    assert pq.read_table(out / "verl" / "train.parquet").num_rows == 4
