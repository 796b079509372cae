"""The trainer subclass and the sampler inside verl's real trainer object, dataloader and batches.

Everything verl does on CPU is real here: Hydra config, RLHFDataset, StatefulDataLoader with our
sampler, DataProto batches, GRPO advantages, batch balancing. Only the worker call at the bottom of
`RayPPOTrainer._update_actor` (the GPU update) and `fit`'s loop body are stood in for.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

from _verl_helpers import chat_messages, make_sample, rewards_for, run_config, step_batch  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, Role  # noqa: E402

from toolcall_repro.data.schema import write_samples  # noqa: E402
from toolcall_repro.engines.verl import launch  # noqa: E402
from toolcall_repro.engines.verl.adapter import StreakFilterSampler, make_streak_filter  # noqa: E402
from toolcall_repro.engines.verl.main import build_trainer, compose_config  # noqa: E402
from toolcall_repro.engines.verl.metrics import convert  # noqa: E402
from toolcall_repro.rl import StreakFilter  # noqa: E402


@pytest.fixture
def trainer(tmp_path, tokenizer, model_dir, monkeypatch):
    write_samples([make_sample(i) for i in range(12)], tmp_path / "train_in.parquet")
    write_samples([make_sample(100 + i) for i in range(4)], tmp_path / "heldout_in.parquet")
    out = tmp_path / "train" / "single_turn" / "efficient"
    overrides = launch.prepare(
        train=str(tmp_path / "train_in.parquet"),
        heldout=str(tmp_path / "heldout_in.parquet"),
        base=str(model_dir),
        config=run_config(),
        out=str(out),
        seed=5,
        nodes=1,
        gpus_per_node=2,
        chat_messages=chat_messages,
        tokenizer=tokenizer,
        validate=False,
    )
    cfg = compose_config(overrides)  # verl's defaults: 8 dataloader workers, as on the cluster
    assert cfg.data.dataloader_num_workers == 8
    t = build_trainer(
        cfg,
        tokenizer=tokenizer,
        processor=None,
        role_worker_mapping={Role.ActorRollout: object},
        resource_pool_manager=None,
        ray_worker_group_cls=None,
    )
    t.actor_rollout_wg = SimpleNamespace(_dispatch_info={"actor": [0, 1]})  # two data-parallel ranks
    calls = []

    def worker_update(self, batch):
        calls.append(
            {
                "rows": len(batch),
                "mini": int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size),
                "per_group": sorted(
                    {
                        u: list(batch.non_tensor_batch["uid"]).count(u) for u in batch.non_tensor_batch["uid"]
                    }.values()
                ),
                "adv_rows": batch.batch["advantages"].abs().sum(-1).gt(0).sum().item(),
            }
        )
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {"actor/pg_loss": 0.0}})

    monkeypatch.setattr(RayPPOTrainer, "_update_actor", worker_update)
    t.calls = calls
    return t


def run_epoch(t):
    """One epoch as fit() drives it: batches from the dataloader, n rollouts each, then the update."""
    seen, metrics = [], []
    for batch_dict in t.train_dataloader:
        prompts = DataProto.from_single_dict(batch_dict)
        ids = [e["id"] for e in prompts.non_tensor_batch["extra_info"]]
        seen += ids
        out = t._update_actor(step_batch({i: rewards_for(i) for i in ids}, seed=t.global_steps))
        metrics.append(out.meta_info["metrics"])
        t.global_steps += 1
    return seen, metrics


def test_filter_shrinks_epochs_and_downsampling_shrinks_updates(trainer):
    trainer.global_steps = 1
    assert len(trainer.train_dataloader) == 3
    seen0, m0 = run_epoch(trainer)
    assert sorted(seen0) == sorted(f"xlam:{i}" for i in range(12))
    # every update: 4 prompts x m=2 rows, mini-batch scaled 4 -> 4*2/4 = 2 prompts, restored after
    assert [c["rows"] for c in trainer.calls] == [8, 8, 8]
    assert {c["mini"] for c in trainer.calls} == {2}
    assert trainer.config.actor_rollout_ref.actor.ppo_mini_batch_size == 4
    assert all(c["per_group"] == [2, 2, 2, 2] for c in trainer.calls)
    assert m0[0]["perf/gen_rows"] == 16 and m0[0]["perf/update_rows"] == 8
    assert m0[0]["actor/pg_loss"] == 0.0  # verl's own metrics are kept beside ours
    assert sum(m["group/all_correct_frac"] for m in m0) == pytest.approx(8 / 4)
    assert "update_seqlen/minmax_diff" in m0[0] or any(k.startswith("update_seqlen") for k in m0[0])

    seen1, m1 = run_epoch(trainer)  # all-correct prompts are skipped (k=1)
    assert len(trainer.train_dataloader) == 1
    assert set(seen1) == {f"xlam:{i}" for i in range(8, 12)} and len(seen1) == 4
    assert m1[0]["filter/skipped"] == 8 and m1[0]["filter/active"] == 4
    assert m1[0]["filter/coverage"] == pytest.approx(4 / 12)
    assert m1[0]["group/mixed_frac"] == 1.0
    assert m1[0]["transition/mixed_to_mixed"] == 4
    # the mixed groups keep one success and one failure: both rows carry a gradient
    assert trainer.calls[-1]["adv_rows"] == 8
    # what the trainer emits is what the log parser reads; verl itself fills timings and the token total
    verl_keys = {"training/global_step": 4, "training/epoch": 1, "timing_s/step": 1.0}
    (parsed,), _ = convert([(4, {**m1[0], **verl_keys})], n_gpus=2)
    assert parsed["filter/skipped"] == 8 and parsed["perf/update_rows"] == 8 and parsed["perf/gen_rows"] == 16
    assert parsed["reward/full_mean"] == pytest.approx((4 * 0.5 + 8 * 1.0) / 12)
    empty = {k for k, v in parsed.items() if v is None}
    assert empty == {
        "timing_s/gen",
        "timing_s/update_actor",
        "timing_s/optimizer",
        "perf/total_num_tokens",
        "filter/precision",  # no probe observed yet
    }

    seen2, _ = run_epoch(trainer)  # skipped for 1 epoch < probe_every=2: still skipped
    assert sorted(seen2) == sorted(seen1)
    seen3, m3 = run_epoch(trainer)  # probe epoch: the skipped eight come back
    assert len(seen3) == 12
    assert m3[-1]["filter/probed"] == 8


def _verl_loop(last_step):
    """verl's fit() as far as checkpoints go: save and validate every 2 steps, stop after last_step."""

    def fit(self):
        for step in range(1, last_step + 1):
            self.global_steps = step
            if step % 2 == 0:
                self._save_checkpoint()
                self._validate()
        self.global_steps = last_step + 1

    return fit


@pytest.fixture
def recorded(trainer, monkeypatch):
    saved, validated = [], []
    monkeypatch.setattr(RayPPOTrainer, "_save_checkpoint", lambda self: saved.append(self.global_steps))

    def validate(self, merged=False):
        validated.append(self.global_steps)
        return {"val-core/single_turn/acc/mean@1": 0.75}

    monkeypatch.setattr(RayPPOTrainer, "_validate", validate)
    return saved, validated


def test_fit_saves_and_scores_the_last_step_when_epochs_shrank(trainer, recorded, monkeypatch):
    monkeypatch.setattr(RayPPOTrainer, "fit", _verl_loop(5))  # epochs ran out at step 5, not a save step
    trainer.fit()
    saved, validated = recorded
    assert saved == [2, 4, 5] and validated == [2, 4, 5]
    final = json.loads(open(trainer.toolcall.final_validation).read())
    assert final["step"] == 5 and final["metrics"] == {"val-core/single_turn/acc/mean@1": 0.75}
    state = json.loads(open(trainer.toolcall.filter_state).read())
    assert state["config"]["k"] == 1


def test_fit_does_not_repeat_what_verl_did_on_its_last_step(trainer, recorded, monkeypatch):
    monkeypatch.setattr(RayPPOTrainer, "fit", _verl_loop(4))
    trainer.fit()
    assert recorded == ([2, 4], [2, 4])
    assert not os.path.exists(trainer.toolcall.final_validation)


def test_sampler_epochs_are_seeded_and_built_from_the_full_set():
    ids = [f"s{i}" for i in range(10)]
    a = StreakFilterSampler(ids, StreakFilter(k=None), seed=1)
    b = StreakFilterSampler(ids, StreakFilter(k=None), seed=1)
    c = StreakFilterSampler(ids, StreakFilter(k=None), seed=2)
    first = list(a)
    assert first == list(b) and first != list(c) and sorted(first) == list(range(10))
    assert list(a) != first  # a new epoch, a new order
    assert a.epoch == 1 and len(a) == 10
    with pytest.raises(RuntimeError, match="before the first epoch"):
        StreakFilterSampler(ids, StreakFilter(k=None), seed=1).record({"s0": [1.0, 1.0]})


def test_filter_config_is_checked():
    assert make_streak_filter(None, 0).k is None
    with pytest.raises(ValueError, match="unknown keys"):
        make_streak_filter({"k": 1, "probe_every": 2, "skip": True}, 0)
    with pytest.raises(ValueError, match="probe"):
        make_streak_filter({"k": 1, "semantics": "temporary"}, 0)
