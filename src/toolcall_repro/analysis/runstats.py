"""Reductions of one training run's per-step metrics (metrics.jsonl as a DataFrame): pure functions.

Keys are those of `toolcall_repro.rl.metrics.STEP_KEYS`; a missing key is an error naming it.
"""

from __future__ import annotations

import math

import pandas as pd

from toolcall_repro.rl.advantage import GROUP_TYPES

GROUP_FRACTION_KEYS = {t: f"group/{t}_frac" for t in GROUP_TYPES}
# Costs are read on the run's device clock, the clock of `time/cumulative_device_s` that the speedup
# estimators put on their time axis: the local CPU engine's CPU seconds (`timing_cpu_s/*`, this process's
# threads, which other load and a paused job do not inflate), else wall seconds (`timing_s/*`: verl on
# GPUs, whose device time is wall x GPUs, a factor that cancels in every share and ratio here).
WALL_CLOCK = "timing_s"
CPU_CLOCK = "timing_cpu_s"
UPDATE = "update_actor"
# The local engine times the optimizer step apart; verl times it inside update_actor (optimizer null).
OPTIMIZER = "optimizer"
GEN = "gen"
STEP = "step"


def _need(df: pd.DataFrame, *keys: str) -> None:
    missing = [k for k in keys if k not in df.columns]
    if missing:
        raise KeyError(f"metrics lack {missing}")


def clock(metrics: pd.DataFrame) -> str:
    """The prefix of the run's device-clock timings: `timing_cpu_s` where the run recorded CPU seconds
    (the local engine), else `timing_s`."""
    return CPU_CLOCK if f"{CPU_CLOCK}/{STEP}" in metrics.columns else WALL_CLOCK


def time_key(metrics: pd.DataFrame, phase: str) -> str:
    """The column of one phase's seconds (gen, update_actor, optimizer, step) on the device clock."""
    return f"{clock(metrics)}/{phase}"


def step_seconds(metrics: pd.DataFrame) -> pd.Series:
    """Per step: the step's seconds on the device clock."""
    key = time_key(metrics, STEP)
    _need(metrics, key)
    return metrics[key].astype(float)


def _epoch_last(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each epoch's last step: where epoch-level counters hold the epoch's totals."""
    return metrics.sort_values("step").groupby("epoch", as_index=False).last()


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den else math.nan


def update_seconds(metrics: pd.DataFrame) -> pd.Series:
    """Per step: policy-update seconds on the device clock, optimizer step included."""
    update, opt = time_key(metrics, UPDATE), time_key(metrics, OPTIMIZER)
    _need(metrics, update)
    optimizer = metrics[opt] if opt in metrics.columns else 0.0
    return metrics[update].astype(float) + pd.to_numeric(optimizer).fillna(0.0)


def filter_rate(metrics: pd.DataFrame) -> float:
    """Share of prompt visits skipped by the pre-rollout filter: skipped / (skipped + active), all epochs.

    The filter reports its epoch's counts on every step of the epoch, so each epoch counts once (its last
    step). A run without a filter reports active = 0 and skipped = 0 and gets 0.
    """
    _need(metrics, "epoch", "step", "filter/skipped", "filter/active")
    last = _epoch_last(metrics)
    skipped = float(last["filter/skipped"].sum())
    active = float(last["filter/active"].sum())
    return 0.0 if skipped == 0 else _ratio(skipped, skipped + active)


def update_share(metrics: pd.DataFrame) -> float:
    """Share of step time spent in the policy update (device clock)."""
    return _ratio(update_seconds(metrics).sum(), step_seconds(metrics).sum())


def kept_fraction(metrics: pd.DataFrame) -> float:
    """Rows updated / rows generated: m/n under down-sampling, 1 without."""
    _need(metrics, "perf/update_rows", "perf/gen_rows")
    return _ratio(metrics["perf/update_rows"].sum(), metrics["perf/gen_rows"].sum())


def run_totals(metrics: pd.DataFrame) -> dict[str, float]:
    """Whole-run totals for the speedup table (seconds on the device clock)."""
    gen = time_key(metrics, GEN)
    _need(
        metrics,
        "perf/gen_tokens",
        "perf/update_tokens",
        gen,
        time_key(metrics, UPDATE),
        time_key(metrics, STEP),
    )
    return {
        "steps": int(len(metrics)),
        "gen_tokens": int(metrics["perf/gen_tokens"].sum()),
        "update_tokens": int(metrics["perf/update_tokens"].sum()),
        "gen_s": float(metrics[gen].sum()),
        "update_s": float(update_seconds(metrics).sum()),
        "step_s": float(step_seconds(metrics).sum()),
        "filter_rate": filter_rate(metrics),
        "update_share": update_share(metrics),
        "kept_fraction": kept_fraction(metrics),
    }


def group_fractions(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per step: all-correct / all-wrong / mixed fractions of the groups generated (long format)."""
    _need(metrics, "step", *GROUP_FRACTION_KEYS.values())
    long = metrics[["step", *GROUP_FRACTION_KEYS.values()]].melt(
        id_vars="step", var_name="key", value_name="fraction"
    )
    long["group_type"] = long["key"].map({v: k for k, v in GROUP_FRACTION_KEYS.items()})
    return long.drop(columns="key").sort_values(["group_type", "step"]).reset_index(drop=True)


def retention_one_epoch(metrics: pd.DataFrame) -> pd.DataFrame:
    """P(still all-correct at epoch e | all-correct at e-1), from the filter's transition counts.

    Transition counts accumulate within an epoch, so each epoch's last step holds its totals. Prompts
    the filter skipped are not observed and are absent from both numerator and denominator.
    """
    keys = [f"transition/all_correct_to_{b}" for b in GROUP_TYPES]
    _need(metrics, "epoch", "step", *keys)
    last = _epoch_last(metrics)
    eligible = last[keys].sum(axis=1)
    out = pd.DataFrame(
        {
            "epoch": last["epoch"].astype(int),
            "k": 1,
            "eligible": eligible.astype(int),
            "retained": last["transition/all_correct_to_all_correct"].astype(int),
            "estimator": "transitions",
        }
    )
    out = out[out["eligible"] > 0].copy()
    out["p"] = out["retained"] / out["eligible"]
    return out.reset_index(drop=True)


def probe_precision(metrics: pd.DataFrame, k: int) -> pd.DataFrame:
    """P(still all-correct | streak >= k) per epoch, from the prompts the filter re-probed."""
    _need(metrics, "epoch", "step", "filter/probed", "filter/probe_still_correct")
    last = _epoch_last(metrics)
    out = pd.DataFrame(
        {
            "epoch": last["epoch"].astype(int),
            "k": int(k),
            "eligible": last["filter/probed"].astype(int),
            "retained": last["filter/probe_still_correct"].astype(int),
            "estimator": "probes",
        }
    )
    out = out[out["eligible"] > 0].copy()
    out["p"] = out["retained"] / out["eligible"]
    return out.reset_index(drop=True)


def step_costs(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per step: rollout and update seconds (device clock), rows, and mean prompt tokens per generated row.

    Prompt tokens per row = (total tokens - generated tokens) / generated rows (verl's token definitions).
    """
    gen = time_key(metrics, GEN)
    _need(
        metrics,
        "step",
        gen,
        time_key(metrics, UPDATE),
        "perf/total_num_tokens",
        "perf/gen_tokens",
        "perf/gen_rows",
    )
    rows = metrics["perf/gen_rows"].astype(float).where(lambda s: s > 0)
    return pd.DataFrame(
        {
            "step": metrics["step"].astype(int),
            "gen_s": metrics[gen].astype(float),
            "update_s": update_seconds(metrics),
            "gen_rows": metrics["perf/gen_rows"].astype(int),
            "prompt_tokens_per_row": (metrics["perf/total_num_tokens"] - metrics["perf/gen_tokens"]) / rows,
        }
    )
