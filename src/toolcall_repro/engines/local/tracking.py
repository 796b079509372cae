"""Live training curves for the local engine, under the metric names verl's own loggers use.

verl's trainer logs every key our RL core adds to its step metrics (`rl.STEP_KEYS`: reward, the mixed /
all-correct / all-wrong shares, skipped prompts, generated and updated tokens and rows, rollout and
update seconds) and, at checkpoints, `val-core/<setting>/acc/mean@1`; with `trainer.logger` holding
`tensorboard` it writes them as TensorBoard event files (`engines.verl.hydra`). The local engine writes
the same names the same way: the numeric STEP_KEYS a step, `val-core/<setting>/acc/mean@1` (greedy) and
`val-core/<setting>/acc/sampled` at each checkpoint, through torch's own TensorBoard writer
(`torch.utils.tensorboard`, the `tensorboard` package of the main lock), into `<run folder>/tensorboard/`.
Weights & Biases and MLflow are verl's loggers and are named by config for verl runs only (off by
default: they need accounts or servers, never offline).

Event files carry wall-clock timestamps: they are a view of the run, not a result. Nothing reads them back;
the same numbers are in metrics.jsonl and curve.jsonl, which the analysis reads.

Watch a run: `tensorboard --logdir results/<run_id>/train` (every training of the run, one curve each).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from toolcall_repro.rl import STEP_KEYS

__all__ = ["TRACKERS", "Tracker", "heldout_tags", "step_scalars"]

TRACKERS = ("tensorboard",)
SKIP = ("step", "epoch")  # the x axis, not a curve


def step_scalars(metrics: Mapping) -> dict[str, float]:
    """The numeric STEP_KEYS of one step (None / missing / non-finite left out), by their verl names."""
    out = {}
    for key in STEP_KEYS:
        value = metrics.get(key)
        if key in SKIP or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


def heldout_tags(setting: str) -> dict[str, str]:
    """curve.jsonl key -> the tag of a checkpoint's held-out accuracy (verl's name for the greedy one)."""
    return {
        "heldout_accuracy": f"val-core/{setting}/acc/mean@1",
        "heldout_sampled_accuracy": f"val-core/{setting}/acc/sampled",
    }


class Tracker:
    """Writes a run's curves as it trains; `trackers` = () writes nothing (no import of tensorboard)."""

    def __init__(self, log_dir: str | Path, setting: str, trackers: tuple[str, ...] = TRACKERS):
        unknown = sorted(set(trackers) - set(TRACKERS))
        if unknown:
            raise ValueError(f"trackers must be among {list(TRACKERS)} for the local engine, got {unknown}")
        self.setting = setting
        self._writer = None
        if "tensorboard" in trackers:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(log_dir))

    def step(self, step: int, metrics: Mapping) -> None:
        if self._writer is None:
            return
        for tag, value in step_scalars(metrics).items():
            self._writer.add_scalar(tag, value, global_step=step)
        self._writer.flush()

    def checkpoint(self, step: int, row: Mapping) -> None:
        if self._writer is None:
            return
        for key, tag in heldout_tags(self.setting).items():
            value = row.get(key)
            if isinstance(value, (int, float)) and math.isfinite(value):
                self._writer.add_scalar(tag, float(value), global_step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
