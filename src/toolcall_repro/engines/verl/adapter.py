"""verl's legacy `RayPPOTrainer` with the paper's two speed-ups, and the sampler that feeds it.

- `StreakFilterSampler`: the train dataloader's sampler. Each data epoch (the first index an epoch's
  iterator yields, however often the dataloader calls `iter`) it asks `StreakFilter` for the active
  set, built from the full set, and yields it in a (seed, epoch)-seeded order. The dataloader's length therefore changes from epoch to epoch; verl
  computes `total_training_steps` from the first (full) epoch, an upper bound, so its LR schedule must
  stay constant (verl's default) and the last step is detected by `ToolcallPPOTrainer.fit`.
- `ToolcallPPOTrainer._update_actor`: records every prompt's n rewards in the filter, then keeps the
  `max_variance_subset` (or the configured selector) of each group, recomputes advantages over the
  group or the subset, re-balances the rows over data-parallel ranks, scales `ppo_mini_batch_size`
  by m/n and calls verl's update. Our per-step metrics ride along in the update's metrics.
- Checkpoints: each `global_step_<N>/` also holds `toolcall_state.json` (run fingerprint, the
  sampler's epoch and the filter's streaks); `_load_checkpoint` restores them with verl's state.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch
from omegaconf import OmegaConf
from torch.utils.data import Sampler
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from toolcall_repro.engines.verl.batch import (
    downsample_plan,
    groups_by_uid,
    reason_fractions,
    rewards_by_sample,
    sequence_rewards,
    subset_with_advantages,
    token_counts,
)
from toolcall_repro.engines.verl.hydra import ToolcallSection
from toolcall_repro.io import atomic_write_json
from toolcall_repro.rl import StreakFilter, step_metrics, without_timings
from toolcall_repro.runconfig import FILTER_KEYS

CHECKPOINT_STATE = "toolcall_state.json"  # in each global_step_<N>/: fingerprint, step, sampler + filter


def read_checkpoint_state(folder: str | os.PathLike) -> dict:
    path = os.path.join(folder, CHECKPOINT_STATE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing: not a checkpoint of the toolcall trainer")
    with open(path) as f:
        return json.load(f)


def checkpoint_step(folder: str | os.PathLike) -> int:
    return int(os.path.basename(os.path.normpath(folder)).split("global_step_")[-1])


def resumed_folder(config) -> str | None:
    """The `global_step_<N>` folder verl's `_load_checkpoint` restores under this config, or None."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    mode = config.trainer.resume_mode
    if mode == "disable":
        return None
    if mode == "resume_path":
        return str(config.trainer.resume_from_path)
    return find_latest_ckpt_path(config.trainer.default_local_dir)


def make_streak_filter(filter_cfg: Mapping | None, seed: int) -> StreakFilter:
    """The run's filter; without one, a `k=None` filter that never skips but still tracks groups."""
    if not filter_cfg:
        return StreakFilter(k=None, seed=seed)
    unknown = sorted(set(filter_cfg) - set(FILTER_KEYS))
    if unknown:
        raise ValueError(f"filter config has unknown keys {unknown}; known: {list(FILTER_KEYS)}")
    return StreakFilter(seed=seed, **{k: filter_cfg[k] for k in FILTER_KEYS if k in filter_cfg})


def dataset_sample_ids(dataset) -> list[str]:
    """Sample ids in dataset order, after verl dropped any overlong prompt (positions stay aligned)."""
    extra = dataset.dataframe["extra_info"]
    ids = [str(e["id"]) for e in extra]
    if len(set(ids)) != len(ids):
        raise ValueError("the training parquet has duplicate extra_info.id values")
    return ids


class StreakFilterSampler(Sampler[int]):
    """Dataset positions of each epoch's active prompts, in a (seed, epoch)-seeded order.

    One data epoch is one filter epoch whatever the dataloader does: torchdata's StatefulDataLoader
    calls `iter(sampler)` more than once an epoch (in its iterator's `__init__` and `_reset` with
    workers, again when it restores a state dict), so `__iter__` has no side effect. The epoch starts
    when an iterator yields its first index; an iterator restored from a dataloader state dict
    continues the epoch and position it recorded instead of starting the next one.
    """

    def __init__(
        self, sample_ids: Sequence[str], streak_filter: StreakFilter, seed: int, shuffle: bool = True
    ):
        self.sample_ids = [str(i) for i in sample_ids]
        self._position = {sid: pos for pos, sid in enumerate(self.sample_ids)}
        if len(self._position) != len(self.sample_ids):
            raise ValueError("duplicate sample ids")
        self.filter = streak_filter
        self.seed, self.shuffle = int(seed), bool(shuffle)
        self.epoch = -1  # no epoch started yet
        self._active: list[str] = list(self.sample_ids)

    def __iter__(self) -> Iterator[int]:
        return _EpochIterator(self)

    def __len__(self) -> int:
        return len(self._active)

    def _order(self, epoch: int) -> list[int]:
        """Epoch `epoch`'s dataset positions; starts that epoch in the filter if it is the next one."""
        if epoch != self.epoch:
            if epoch != self.epoch + 1:
                raise RuntimeError(f"sampler at epoch {self.epoch} cannot start epoch {epoch}")
            self.epoch = epoch
        self._active = self.filter.active_set(epoch, self.sample_ids)
        order = np.arange(len(self._active))
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch]).permutation(len(self._active))
        return [self._position[self._active[j]] for j in order]

    def record(self, results: Mapping[str, Sequence[float]]) -> None:
        """One step's groups ({sample id: n rewards}) into the current epoch's filter state."""
        if self.epoch < 0:
            raise RuntimeError("record() before the first epoch started")
        self.filter.update(self.epoch, results)

    # --- checkpointing (the trainer's; the dataloader's own state holds only epoch and position) ---
    def checkpoint_state(self) -> dict:
        return {"epoch": self.epoch, "filter": self.filter.state_dict()}

    def restore(self, state: Mapping) -> None:
        """The streaks and the epoch in progress at a checkpoint (before the dataloader resumes)."""
        self.filter.load_state_dict(state["filter"])
        self.epoch = int(state["epoch"])
        if self.epoch >= 0:
            self._active = self.filter.active_set(self.epoch, self.sample_ids)  # the saved set, unchanged


class _EpochIterator(Iterator[int]):
    """One epoch of a `StreakFilterSampler`; torchdata saves and restores it (Stateful protocol)."""

    def __init__(self, sampler: StreakFilterSampler):
        self.sampler = sampler
        self.epoch: int | None = None  # fixed at the first index (or by load_state_dict)
        self.yielded = 0
        self._order: list[int] | None = None

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if self._order is None:
            if self.epoch is None:
                self.epoch = self.sampler.epoch + 1
            self._order = self.sampler._order(self.epoch)
        if self.yielded >= len(self._order):
            raise StopIteration
        self.yielded += 1
        return self._order[self.yielded - 1]

    def state_dict(self) -> dict:
        epoch = self.epoch if self.epoch is not None else self.sampler.epoch + 1
        return {"epoch": epoch, "yielded": self.yielded}

    def load_state_dict(self, state: Mapping) -> None:
        self.epoch, self.yielded, self._order = int(state["epoch"]), int(state["yielded"]), None


@contextlib.contextmanager
def mini_batch_size(config, prompts: int):
    """Temporarily set `actor.ppo_mini_batch_size`, which verl's `_update_actor` multiplies by n."""
    actor = config.actor_rollout_ref.actor
    saved = actor.ppo_mini_batch_size
    actor.ppo_mini_batch_size = int(prompts)
    try:
        yield
    finally:
        actor.ppo_mini_batch_size = saved


def _nan_for_none(metrics: Mapping) -> dict:
    # verl reduces metrics with np.mean; NaN survives it and the JSONL writer turns it into null.
    return {k: (math.nan if v is None else v) for k, v in metrics.items()}


def _write_json(path: str, obj: object) -> None:
    atomic_write_json(path, obj, indent=None, ensure_ascii=True, allow_nan=False, default=str)


class ToolcallPPOTrainer(RayPPOTrainer):
    """`RayPPOTrainer` whose update sees only the kept rollouts and whose sampler skips prompts."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.toolcall = ToolcallSection.read(OmegaConf.to_container(self.config.toolcall, resolve=True))
        sampler = self.train_dataloader.sampler
        if not isinstance(sampler, StreakFilterSampler):
            raise TypeError(f"ToolcallPPOTrainer needs a StreakFilterSampler, got {type(sampler).__name__}")
        self.streak_sampler = sampler
        self._total_epochs = int(self.config.trainer.total_epochs)
        self._last_saved_step: int | None = None
        self._last_validated_step: int | None = None

    # --- the update ----------------------------------------------------------------------------
    def _update_actor(self, batch: DataProto) -> DataProto:
        results = rewards_by_sample(batch)
        self.streak_sampler.record(results)
        down = self.toolcall.downsample
        gen = token_counts(batch)
        extra: dict = {}
        if not down:
            update, out = gen, super()._update_actor(batch)
        else:
            rng = np.random.default_rng([self.toolcall.seed, int(self.global_steps)])
            rows, adv = downsample_plan(
                sequence_rewards(batch),
                groups_by_uid(batch),
                down.m,
                down.selection,
                down.advantage_scope,
                rng,
            )
            sub = subset_with_advantages(batch, rows, adv)
            scaled = self.toolcall.scaled_mini_batch_size
            mini_rows = scaled * int(self.config.actor_rollout_ref.rollout.n)
            if len(sub) % mini_rows:
                raise ValueError(
                    f"{len(sub)} kept rows do not split into mini-batches of {mini_rows}: "
                    "check batch_size, ppo_mini_batch_size, n and m (hydra.geometry)"
                )
            if self.config.trainer.balance_batch:
                self._balance_batch(sub, metrics=extra, logging_prefix="update_seqlen")
            update = token_counts(sub)
            with mini_batch_size(self.config, scaled):
                out = super()._update_actor(sub)
        extra.update(self._step_metrics(results, gen, update))
        extra.update(reason_fractions(batch))
        out.meta_info.setdefault("metrics", {}).update(_nan_for_none(extra))
        return out

    def _step_metrics(self, results: Mapping[str, Sequence[float]], gen: Mapping, update: Mapping) -> dict:
        """The RL core's step metrics, less what verl itself logs (step, epoch, timings, totals)."""
        line = step_metrics(
            step=self.global_steps,
            epoch=self.streak_sampler.epoch,
            groups=list(results.values()),
            filter_stats=self.streak_sampler.filter.stats(),
            skipped_reward_mean=self.streak_sampler.filter.skipped_reward_mean(),
            gen_tokens=gen["response_tokens"],
            update_tokens=update["total_tokens"],
            total_num_tokens=gen["total_tokens"],
            gen_rows=gen["rows"],
            update_rows=update["rows"],
            timings={"gen": 0.0, "update_actor": 0.0, "optimizer": 0.0, "step": 0.0},
            cumulative_s=0.0,
            cumulative_device_s=0.0,
        )
        line = without_timings(line)
        for key in ("step", "epoch", "perf/total_num_tokens"):
            line.pop(key)
        line["filter/epoch"] = self.streak_sampler.epoch
        return line

    # --- the run's end -------------------------------------------------------------------------
    def _save_checkpoint(self):
        # Our state goes into the step's folder first: verl writes its completion marker
        # (latest_checkpointed_iteration.txt) last, so a checkpoint it names always holds this file.
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        _write_json(os.path.join(folder, CHECKPOINT_STATE), self._checkpoint_state())
        super()._save_checkpoint()
        self._last_saved_step = self.global_steps
        _write_json(self.toolcall.filter_state, self.streak_sampler.filter.state_dict())

    def _checkpoint_state(self) -> dict:
        return {
            "fingerprint": self.toolcall.fingerprint,
            "step": int(self.global_steps),
            "sampler": self.streak_sampler.checkpoint_state(),
        }

    def _load_checkpoint(self):
        """verl's restore (weights, optimizer, step), then the filter, the sampler and the dataloader.

        verl guesses epochs from `global_steps // len(dataloader)`, which the filter's shrinking
        epochs break: the filter's epoch comes from the checkpoint, the dataloader state is always
        restored (an exhausted one ends its epoch at once), and `total_epochs` is shifted so that verl's
        loop runs exactly the epochs left.
        """
        out = super()._load_checkpoint()
        folder = resumed_folder(self.config)
        if folder is None:
            return out
        state = read_checkpoint_state(folder)
        if state["fingerprint"] != self.toolcall.fingerprint:
            raise ValueError(
                f"{folder} was written by another run (fingerprint differs): not resuming from it"
            )
        if int(state["step"]) != int(self.global_steps):
            raise ValueError(f"{folder} holds step {state['step']} but verl resumed at {self.global_steps}")
        self.streak_sampler.restore(state["sampler"])
        data = os.path.join(folder, "data.pt")
        if not os.path.isfile(data):
            raise FileNotFoundError(f"{data} is missing: verl's dataloader state is part of a checkpoint")
        self.train_dataloader.load_state_dict(torch.load(data, weights_only=False))
        verl_epoch = self.global_steps // len(self.train_dataloader)  # what fit() will compute next
        self.config.trainer.total_epochs = self._total_epochs - self.streak_sampler.epoch + verl_epoch
        print(f"toolcall: resumed at step {self.global_steps}, filter epoch {self.streak_sampler.epoch}")
        return out

    def _validate(self, merged: bool = False):
        result = super()._validate(merged=merged)
        self._last_validated_step = self.global_steps
        return result

    def fit(self):
        """verl's loop, then the last checkpoint and held-out score it skips when epochs shrink.

        verl saves and validates on `global_steps == total_training_steps`, a count taken from the
        full first epoch; once the filter skips prompts that step never comes. A retry whose
        checkpoint is already the last step (killed while scoring it) trains nothing more: verl's
        loop would run one step past `total_training_steps` (the filter policy's 80).
        """
        folder = resumed_folder(self.config)
        if folder is not None and checkpoint_step(folder) >= self.total_training_steps:
            print(f"toolcall: {folder} is the run's last step, nothing left to train")
            self._load_checkpoint()
            self.checkpoint_manager.update_weights(self.global_steps)
            self._last_saved_step = last = self.global_steps
        else:
            super().fit()
            last = self.global_steps - 1  # fit() counts one past the last step it ran
        if last < 1:
            return
        self.global_steps = last
        if self.config.trainer.save_freq > 0 and self._last_saved_step != last:
            self._save_checkpoint()
        if self.config.trainer.test_freq > 0 and self._last_validated_step != last:
            self._init_dump_executor()
            metrics = self._validate()
            self._shutdown_dump_executor()
            _write_json(
                self.toolcall.final_validation,
                {"step": last, "epoch": self.streak_sampler.epoch, "metrics": _json_safe(metrics)},
            )
        _write_json(self.toolcall.filter_state, self.streak_sampler.filter.state_dict())


def _json_safe(metrics: Mapping) -> dict:
    out = {}
    for k, v in metrics.items():
        v = v.item() if hasattr(v, "item") else v
        out[k] = None if isinstance(v, float) and not math.isfinite(v) else v
    return out
