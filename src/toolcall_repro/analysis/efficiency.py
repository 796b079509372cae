"""The efficiency side: learning curves, the speedup table, step costs (pure; RunRecord objects in)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pandas as pd

from toolcall_repro.analysis import runstats
from toolcall_repro.analysis.claims import ratio_of_sums
from toolcall_repro.analysis.loaders import RunRecord
from toolcall_repro.analysis.speedup import Curve, predicted_speedup, speedup_over_seeds
from toolcall_repro.analysis.tabular import Table, fmt_pm
from toolcall_repro.rl.advantage import GROUP_TYPES
from toolcall_repro.rl.metrics import epoch_report

DEVICE_TIME = "time/cumulative_device_s"


def run_curve(run: RunRecord, time_key: str = DEVICE_TIME) -> Curve:
    """Held-out accuracy against cumulative hours (device-hours by default)."""
    missing = [k for k in (time_key, "heldout_accuracy") if k not in run.curve.columns]
    if missing:
        raise KeyError(f"{run.label}: curve.jsonl lacks {missing}")
    return Curve.from_points(list(run.curve[time_key] / 3600.0), list(run.curve["heldout_accuracy"]))


def by_setting_variant(runs: Sequence[RunRecord]) -> dict[str, dict[str, dict[int, RunRecord]]]:
    out: dict[str, dict[str, dict[int, RunRecord]]] = defaultdict(dict)
    for r in runs:
        seeds = out[r.setting].setdefault(r.variant, {})
        if r.seed in seeds:
            raise ValueError(f"two runs for {r.label}")
        seeds[r.seed] = r
    return out


def _limit(candidate_f: float, baseline_u: float, config: dict) -> float:
    """Theoretical step-time speedup from the run's design m, n and measured f, u; NaN if undefined."""
    n = config.get("n")
    m = (config.get("downsample") or {}).get("m", n)
    try:
        return predicted_speedup(candidate_f, baseline_u, int(m), int(n))
    except (TypeError, ValueError):
        return math.nan


def speedup_table(
    runs: Sequence[RunRecord],
    baseline: str = "vanilla",
    target: float | None = None,
    *,
    time_key: str = DEVICE_TIME,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> Table:
    """Each variant against the baseline, per setting: time to matched accuracy, ratio and its causes.

    The target is the baseline's peak held-out accuracy (per seed pair) unless configured.
    """
    rows = []
    notes = [
        "time = cumulative device-hours (GPU-hours at paper scale, CPU-hours on the embedded default);"
        " target = the baseline's peak held-out accuracy, per seed (PODS), unless configured; times"
        " interpolated between checkpoints; speedup = baseline time / variant time",
        "predicted = 1/((1-f)(1-u)+(1-f)u m/n) with the variant's filter rate f, the baseline's update"
        " share u and the variant's design m/n: an estimate from measured shares, not a bound",
        "intervals over prompts, the noise floor and non-inferiority: the efficiency report"
        " (target `efficiency`, efficiency/index.md)",
    ]
    for setting, variants in sorted(by_setting_variant(runs).items()):
        if baseline not in variants:
            notes.append(f"{setting}: no '{baseline}' run, no speedups")
        base_runs = variants.get(baseline, {})
        base_totals = [runstats.run_totals(r.metrics) for r in base_runs.values()]
        base_u = float(np.mean([t["update_share"] for t in base_totals])) if base_totals else math.nan
        for variant, seeds in sorted(variants.items(), key=lambda kv: (kv[0] != baseline, kv[0])):
            totals = [runstats.run_totals(r.metrics) for r in seeds.values()]
            curves = {s: run_curve(r, time_key) for s, r in seeds.items()}
            row: dict = {"setting": setting, "variant": variant, "seeds": ",".join(map(str, sorted(seeds)))}
            row["best_accuracy"] = float(np.mean([c.best for c in curves.values()]))
            row["final_accuracy"] = float(np.mean([c.accuracies[-1] for c in curves.values()]))
            row["total_h"] = float(np.mean([c.times[-1] for c in curves.values()]))
            result = None
            if base_runs and variant != baseline:
                try:
                    result = speedup_over_seeds(
                        {s: run_curve(r, time_key) for s, r in base_runs.items()},
                        curves,
                        target,
                        n_bootstrap=n_bootstrap,
                        seed=seed,
                    )
                except ValueError as e:
                    notes.append(f"{setting}/{variant}: {e}")
            if result is not None:
                reached = [s for s in result.per_seed.values() if s.ratio is not None]
                row["target_accuracy"] = result.target
                row["baseline_time_h"] = _mean([s.baseline_time for s in result.per_seed.values()])
                row["time_to_target_h"] = _mean([s.candidate_time for s in result.per_seed.values()])
                row["speedup"] = result.mean if result.mean is not None else math.nan
                row["speedup_std"] = result.std if result.std is not None else math.nan
                row["speedup_ci_low"] = result.ci_low if result.ci_low is not None else math.nan
                row["speedup_ci_high"] = result.ci_high if result.ci_high is not None else math.nan
                row["not_reached_seeds"] = ",".join(map(str, result.not_reached))
                at_start = [s for s in result.per_seed.values() if s.candidate_time == 0]
                if at_start and len(at_start) == len(result.per_seed):
                    row["at_start"] = True
                    notes.append(
                        f"{setting}/{variant}: target {result.target:.3f} is the initial held-out accuracy "
                        "(training never improved on the start), so there is no speedup at matched accuracy"
                    )
                elif not reached:
                    notes.append(f"{setting}/{variant}: target {result.target:.3f} not reached by both runs")
            for key in (
                "filter_rate",
                "update_share",
                "kept_fraction",
                "gen_tokens",
                "update_tokens",
                "gen_s",
                "update_s",
                "step_s",
            ):
                row[key] = float(np.mean([t[key] for t in totals]))
            row["predicted_speedup"] = (
                _limit(row["filter_rate"], base_u, next(iter(seeds.values())).config)
                if variant != baseline
                else math.nan
            )
            first = next(iter(seeds.values()))
            row["source"], row["manifest"] = first.trace.get("source"), first.trace.get("manifest")
            rows.append(row)
    frame = pd.DataFrame(rows)
    return Table(
        "speedup",
        "Speedup at matched accuracy, and where the time goes",
        frame,
        _speedup_display(frame),
        notes,
    )


def _mean(values: Sequence[float | None]) -> float:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else math.nan


def _get(row: dict, key: str) -> float:
    v = row.get(key, math.nan)
    return math.nan if v is None else v


def _speedup_display(frame: pd.DataFrame) -> pd.DataFrame:
    shown = []
    for r in frame.to_dict("records"):
        ratio = _get(r, "speedup")
        ci = (
            f" [{r['speedup_ci_low']:.2f}, {r['speedup_ci_high']:.2f}]"
            if not math.isnan(_get(r, "speedup_ci_low"))
            else ""
        )
        missed = r.get("not_reached_seeds")
        reached = "not reached" if isinstance(missed, str) and missed else None
        if r.get("at_start") is True:
            reached = "at start"
        shown.append(
            {
                "setting": r["setting"],
                "variant": r["variant"],
                "seeds": r["seeds"],
                "target acc": fmt_pm(_get(r, "target_accuracy"), None, 3),
                "time to target (h)": reached or fmt_pm(_get(r, "time_to_target_h"), None, 4),
                "baseline time (h)": fmt_pm(_get(r, "baseline_time_h"), None, 4),
                "speedup": reached or (fmt_pm(ratio, _get(r, "speedup_std"), 2) + ci),
                "predicted": fmt_pm(_get(r, "predicted_speedup"), None, 2),
                "filter rate": fmt_pm(r["filter_rate"], None, 3),
                "update share": fmt_pm(r["update_share"], None, 3),
                "m/n kept": fmt_pm(r["kept_fraction"], None, 3),
                "tokens generated": f"{r['gen_tokens']:.0f}",
                "tokens updated": f"{r['update_tokens']:.0f}",
                "best acc": fmt_pm(r["best_accuracy"], None, 3),
            }
        )
    return pd.DataFrame(shown)


def run_identity(r: RunRecord) -> dict:
    """A training run's row key: setting, variant, seed, rollouts per prompt n, and whether it is plain GRPO
    (only plain runs show how cost scales with n; filtering and down-sampling change it)."""
    return {
        "setting": r.setting,
        "variant": r.variant,
        "seed": r.seed,
        "n": r.config.get("n"),
        "plain": not r.config.get("filter") and not r.config.get("downsample"),
    }


def cost_points(runs: Sequence[RunRecord]) -> pd.DataFrame:
    """Per run: rollouts per prompt n, mean rollout / update seconds per step, mean prompt tokens per row."""
    rows = []
    for r in runs:
        costs = runstats.step_costs(r.metrics)
        rows.append(
            {
                **run_identity(r),
                "gen_s": float(costs["gen_s"].mean()),
                "update_s": float(costs["update_s"].mean()),
                "prompt_tokens_per_row": float(costs["prompt_tokens_per_row"].mean()),
            }
        )
    return pd.DataFrame(
        rows,
        columns=["setting", "variant", "seed", "n", "plain", "gen_s", "update_s", "prompt_tokens_per_row"],
    )


def cost_by_context(runs: Sequence[RunRecord], bins: int = 6) -> pd.DataFrame:
    """Steps of every run binned by prompt tokens per row: seconds per generated row, rollout vs update."""
    frames = []
    for r in runs:
        c = runstats.step_costs(r.metrics).dropna(subset=["prompt_tokens_per_row"])
        c = c[c["gen_rows"] > 0]
        frames.append(c.assign(setting=r.setting, variant=r.variant))
    if not frames:
        return pd.DataFrame(
            columns=["setting", "context_tokens", "gen_s_per_row", "update_s_per_row", "steps"]
        )
    steps = pd.concat(frames, ignore_index=True)
    out = []
    for setting, s in steps.groupby("setting"):
        n_bins = max(1, min(bins, s["prompt_tokens_per_row"].nunique()))
        s = s.assign(bin=pd.cut(s["prompt_tokens_per_row"], n_bins, duplicates="drop"))
        for _, b in s.groupby("bin", observed=True):
            out.append(
                {
                    "setting": setting,
                    "context_tokens": float(b["prompt_tokens_per_row"].mean()),
                    "gen_s_per_row": float(b["gen_s"].sum() / b["gen_rows"].sum()),
                    "update_s_per_row": float(b["update_s"].sum() / b["gen_rows"].sum()),
                    "steps": int(len(b)),
                }
            )
    return pd.DataFrame(out)


def dynamics_table(runs: Sequence[RunRecord], *, n_bootstrap: int = 2000, seed: int = 0) -> Table:
    """Per training run: the first epoch's group types, all-correct retention, and update vs rollout time.

    The counts the claims scorecard tests (zero-variance share early in training, all-correct dominance,
    P(still all-correct next epoch | all-correct this epoch), update time against rollout time and n).
    """
    rows = []
    for r in sorted(runs, key=lambda r: (r.setting, r.variant, r.seed)):
        epochs = epoch_report(r.metrics.to_dict("records"))
        first = epochs[0] if epochs else {}
        groups = int(first.get("groups", 0))
        counts = {t: int(round(first[f"{t}_frac"] * groups)) if groups else 0 for t in GROUP_TYPES}
        kept = runstats.retention_one_epoch(r.metrics)
        costs = runstats.step_costs(r.metrics)
        ratio, lo, hi = ratio_of_sums(
            list(costs["update_s"]), list(costs["gen_s"]), n_bootstrap=n_bootstrap, seed=seed
        )
        rows.append(
            {
                **run_identity(r),
                "first_epoch": first.get("epoch"),
                "first_epoch_groups": groups,
                **{f"first_epoch_{t}": counts[t] for t in GROUP_TYPES},
                "retention_eligible": int(kept["eligible"].sum()),
                "retention_retained": int(kept["retained"].sum()),
                "steps": len(costs),
                "gen_s": float(costs["gen_s"].sum()),
                "update_s": float(costs["update_s"].sum()),
                "update_to_rollout_time": ratio,
                "update_to_rollout_time_low": lo,
                "update_to_rollout_time_high": hi,
                "source": r.trace.get("source"),
                "manifest": r.trace.get("manifest"),
            }
        )
    frame = pd.DataFrame(rows)
    display = pd.DataFrame(
        {
            "setting": frame.get("setting", []),
            "variant": frame.get("variant", []),
            "seed": frame.get("seed", []),
            "n": frame.get("n", []),
            "first-epoch groups (all correct / all wrong / mixed)": [
                f"{g}: {c} / {w} / {m}"
                for g, c, w, m in zip(
                    frame.get("first_epoch_groups", []),
                    frame.get("first_epoch_all_correct", []),
                    frame.get("first_epoch_all_wrong", []),
                    frame.get("first_epoch_mixed", []),
                    strict=True,
                )
            ],
            "still all-correct next epoch": [
                f"{k} of {e}"
                for k, e in zip(
                    frame.get("retention_retained", []), frame.get("retention_eligible", []), strict=True
                )
            ],
            "update / rollout time": [
                fmt_pm(v, None, 2) + ("" if math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]")
                for v, lo, hi in zip(
                    frame.get("update_to_rollout_time", []),
                    frame.get("update_to_rollout_time_low", []),
                    frame.get("update_to_rollout_time_high", []),
                    strict=True,
                )
            ],
        }
    )
    notes = [
        "first epoch: groups generated in the run's first epoch (each step's group-type fractions weighted by "
        "its prompts); retention: all-correct prompts observed in two epochs in a row, pooled over epochs "
        "(k = 1, from the transition counts; prompts the filter skipped are not observed)",
        "update / rollout time: policy-update seconds (optimizer included) over rollout seconds, summed over "
        "steps, with a 95% bootstrap interval over steps",
    ]
    if frame.empty:
        notes.insert(0, "no training runs in this run")
    return Table(
        "training_dynamics",
        "Training dynamics: group types, retention, update vs rollout time",
        frame,
        display,
        notes,
    )
