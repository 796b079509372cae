"""verl's JSONL log (`trainer.logger=[console,file]`) -> our per-step metrics and held-out curve.

verl writes one line a step, `{"step": s, "data": {...}}`, plus a line at step 0 with the validation
before training. Our trainer adds the RL core's keys (group/, filter/, perf/gen_tokens, ...); verl
adds `timing_s/*`, `perf/total_num_tokens`, `training/epoch` and, at checkpoints,
`val-core/<data_source>/acc/mean@1`. Times: `time/cumulative_s` sums each step's `timing_s/step` and
`timing_s/testing` (validation); `time/cumulative_device_s` is that times the run's GPUs. verl times
the optimizer step inside `update_actor`, so `timing_s/optimizer` is null here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from toolcall_repro.io import iter_json_lines
from toolcall_repro.rl import STEP_KEYS, TRANSITION_KEYS

HELDOUT_KEY = re.compile(r"^val-core/(?P<source>.+)/acc/mean@1$")
DIRECT_KEYS = tuple(
    k
    for k in STEP_KEYS
    if k.startswith(("group/", "filter/", "perf/", "reward/", "timing_s/")) and k != "timing_s/optimizer"
)


class VerlLogError(ValueError):
    """A line of verl's log that is not what the trainer writes; names the line."""


def read_log(lines: Iterable[str]) -> list[tuple[int, dict]]:
    """(step, data) per line; blank lines skipped, anything else malformed is an error."""
    out = []
    for number, record in iter_json_lines(lines, source="verl log", error=VerlLogError):
        if not isinstance(record.get("data"), dict) or "step" not in record:
            raise VerlLogError(f"verl log:{number}: expected {{'step', 'data'}}, got keys {sorted(record)}")
        out.append((int(record["step"]), record["data"]))
    return out


def _number(value: object) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def heldout_accuracy(data: Mapping) -> float | None:
    """Mean over data sources of verl's greedy held-out accuracy (one source a run in practice)."""
    values = [_number(v) for k, v in data.items() if HELDOUT_KEY.match(k)]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def data_epoch(data: Mapping) -> int:
    """The filter's epoch (ours, exact after a resume) or verl's loop counter when there is none."""
    value = _number(data.get("filter/epoch"))
    return int(value) if value is not None else int(data["training/epoch"])


def step_line(data: Mapping, cumulative_s: float, n_gpus: int) -> dict:
    line: dict = {
        "step": int(data["training/global_step"]),
        "epoch": data_epoch(data),
    }
    for key in STEP_KEYS:
        if key in line:
            continue
        if key in DIRECT_KEYS:
            line[key] = _number(data.get(key))
        else:
            line[key] = None
    for key in TRANSITION_KEYS:
        value = _number(data.get(key))
        line[key] = None if value is None else int(value)
    for key in ("filter/skipped", "filter/active", "filter/probed", "filter/probe_still_correct"):
        if line[key] is not None:
            line[key] = int(line[key])
    for key in (
        "perf/gen_tokens",
        "perf/update_tokens",
        "perf/total_num_tokens",
        "perf/update_rows",
        "perf/gen_rows",
    ):
        if line[key] is not None:
            line[key] = int(line[key])
    line.update({k: _number(v) for k, v in data.items() if k.startswith("reward/reason/")})
    line["time/cumulative_s"] = cumulative_s
    line["time/cumulative_device_s"] = cumulative_s * n_gpus
    return line


def convert(records: list[tuple[int, dict]], n_gpus: int, final_validation: Mapping | None = None):
    """(metrics lines, curve lines) from the parsed log; `final_validation` is the trainer's
    end-of-run score when verl's loop ended before its planned last step."""
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be >= 1, got {n_gpus}")
    metrics: list[dict] = []
    curve: list[dict] = []
    cumulative, epoch = 0.0, 0
    for step, data in records:
        if "training/global_step" in data:
            if int(data["training/global_step"]) != step:
                raise VerlLogError(f"step {step} holds training/global_step {data['training/global_step']}")
            for key in ("timing_s/step", "training/epoch"):
                if key not in data:
                    raise VerlLogError(f"step {step} lacks {key}")
            cumulative += float(data["timing_s/step"]) + float(data.get("timing_s/testing", 0.0))
            epoch = data_epoch(data)
            metrics.append(step_line(data, cumulative, n_gpus))
        acc = heldout_accuracy(data)
        # a resumed attempt validates its start step again (val_before_train): the first score stays
        if acc is not None and all(c["step"] != step for c in curve):
            curve.append(_curve_line(step, epoch, acc, cumulative, n_gpus))
    if final_validation is not None:
        acc = heldout_accuracy(final_validation["metrics"])
        step = int(final_validation["step"])
        if acc is not None and all(c["step"] != step for c in curve):
            curve.append(_curve_line(step, epoch, acc, cumulative, n_gpus))
    steps = [m["step"] for m in metrics]
    if steps != sorted(set(steps)):
        raise VerlLogError(f"steps are not strictly increasing: {steps[:10]}...")
    return metrics, curve


def _curve_line(step: int, epoch: int, acc: float, cumulative_s: float, n_gpus: int) -> dict:
    return {
        "step": int(step),
        "epoch": int(epoch),
        "heldout_accuracy": acc,
        "time/cumulative_s": cumulative_s,
        "time/cumulative_device_s": cumulative_s * n_gpus,
    }


def summary(
    metrics: list[dict],
    curve: list[dict],
    *,
    wall_clock_s: float,
    nodes: int,
    gpus_per_node: int,
    run: Mapping,
    data_report: Mapping | None = None,
    filter_stats: Mapping | None = None,
) -> dict:
    """The run's summary; GPU-hours are the job's wall-clock x its GPUs (what a cluster bills)."""
    n_gpus = int(nodes) * int(gpus_per_node)
    last = curve[-1] if curve else None
    return {
        "engine": "verl",
        "setting": run.get("setting"),
        "variant": run.get("variant"),
        "steps": len(metrics),
        "epochs": (metrics[-1]["epoch"] + 1) if metrics else 0,
        "nodes": int(nodes),
        "gpus_per_node": int(gpus_per_node),
        "n_gpus": n_gpus,
        "wall_clock_s": float(wall_clock_s),
        "gpu_hours": float(wall_clock_s) * n_gpus / 3600.0,
        "step_time_s": metrics[-1]["time/cumulative_s"] if metrics else 0.0,
        "gen_tokens": sum(m["perf/gen_tokens"] or 0 for m in metrics),
        "update_tokens": sum(m["perf/update_tokens"] or 0 for m in metrics),
        "final_heldout_accuracy": last["heldout_accuracy"] if last else None,
        "initial_heldout_accuracy": curve[0]["heldout_accuracy"] if curve else None,
        "data": dict(data_report or {}),
        "filter": dict(filter_stats or {}),
    }
