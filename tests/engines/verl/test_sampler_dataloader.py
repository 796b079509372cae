"""The filter's sampler inside verl's own StatefulDataLoader, with verl's default dataloader workers.

verl's `RayPPOTrainer._create_dataloader` builds the loader (8 workers by default); the epochs are
driven as `RayPPOTrainer.fit` drives them, GPU work left out: restore a checkpoint, take the epoch as
`global_steps // len(dataloader)`, loop over the remaining epochs and their batches.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

from _verl_helpers import cpu_trainer, drive, prepared_overrides  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402

from toolcall_repro.engines.verl.adapter import StreakFilterSampler  # noqa: E402
from toolcall_repro.rl import StreakFilter  # noqa: E402

EPOCHS = 4  # k=1, probe_every=2: full, 4 mixed, 4 mixed, full again (the eight skipped are probed)


@pytest.fixture(scope="module")
def overrides(tmp_path_factory, tokenizer, model_dir):
    with pytest.MonkeyPatch.context() as mp:
        # the GPU update is the only stand-in: verl's _update_actor would call the worker group
        mp.setattr(
            RayPPOTrainer,
            "_update_actor",
            lambda self, batch: DataProto.from_single_dict(data={}, meta_info={"metrics": {}}),
        )
        yield prepared_overrides(tmp_path_factory.mktemp("run"), tokenizer, model_dir, epochs=EPOCHS)


@pytest.fixture(scope="module")
def uninterrupted(overrides, tokenizer):
    t = cpu_trainer(overrides, tokenizer)
    return t, drive(t)


def epochs_of(steps):
    return [s["filter_epoch"] for s in steps]


def test_one_filter_epoch_per_data_epoch_with_verl_default_workers(uninterrupted):
    t, steps = uninterrupted
    assert t.train_dataloader.num_workers == 8  # verl's default, not overridden
    # 12 prompts (3 steps), 4 mixed (1 step), 4 mixed (1 step), 12 after the probe (3 steps)
    assert epochs_of(steps) == [0, 0, 0, 1, 2, 3, 3, 3]
    assert [s["skipped"] for s in steps] == [0, 0, 0, 8, 8, 0, 0, 0]
    assert t.streak_sampler.epoch == EPOCHS - 1
    assert t.streak_sampler.filter.stats()["probed"] == 8


def test_workers_skip_exactly_what_a_single_process_loader_skips(overrides, tokenizer, uninterrupted):
    single = cpu_trainer([*overrides, "data.dataloader_num_workers=0"], tokenizer)
    assert single.train_dataloader.num_workers == 0
    assert drive(single) == uninterrupted[1]


# mid-epoch; the end of the full first epoch; the end of a shrunk epoch (verl's own guess of epoch
# boundaries, global_steps % len(dataloader), is wrong for both ends once epochs shrink)
@pytest.mark.parametrize("stop_after", [2, 3, 5])
def test_resume_from_a_checkpoint_continues_the_same_batches(overrides, tokenizer, uninterrupted, stop_after):
    done, whole = uninterrupted
    killed = cpu_trainer(overrides, tokenizer)
    first = drive(killed, stop_after=stop_after)
    assert first == whole[:stop_after]
    folder = f"{killed.config.trainer.default_local_dir}/global_step_{stop_after}"
    resumed = cpu_trainer(
        [*overrides, "trainer.resume_mode=resume_path", f"trainer.resume_from_path={folder}"], tokenizer
    )
    rest = drive(resumed)
    assert first + rest == whole  # same batches, steps and filter epochs: no gap, no repeat
    assert resumed.streak_sampler.filter.state_dict() == done.streak_sampler.filter.state_dict()


def test_sampler_iter_has_no_side_effect_until_it_yields():
    ids = [f"s{i}" for i in range(6)]
    sampler = StreakFilterSampler(ids, StreakFilter(k=None), seed=0)
    unused = iter(sampler), iter(sampler)
    assert sampler.epoch == -1 and len(unused) == 2
    first = list(iter(sampler))
    assert sampler.epoch == 0 and sorted(first) == list(range(6))
    it = iter(sampler)
    next(it)
    state = it.state_dict()
    assert state == {"epoch": 1, "yielded": 1}
    again = iter(sampler)
    again.load_state_dict(state)
    assert [next(it) for _ in range(5)] == list(again)
