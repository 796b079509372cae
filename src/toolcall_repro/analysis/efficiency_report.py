"""The efficiency experiment's report: every claim with its interval (pure: RunRecord objects in).

Per setting, each variant against vanilla over paired seeds:
- time to reach vanilla's peak held-out accuracy (PODS), bootstrap interval over prompts and seed pairs,
  "not reached" when the candidate misses it; the same estimator for vanilla seed s against vanilla seed
  s+1 (the noise floor: what the estimator says about two runs of the same method);
- time to matched accuracy on monotone curves (`analysis.matched`: MATCHED_FRACTION of vanilla's pooled
  gain), with its own noise floor, vanilla's last seed against the others; an estimator carries a claim
  only when its floor is near 1x with an interval covering 1 (`matched.floor_supports_claim`), and the
  notes say, per setting, which does;
- non-inferiority of final held-out accuracy over seed pairs and prompts together, at a margin tied to
  vanilla's gain (`margin: {of_vanilla_gain: q}`: the variant keeps at least 1 - q of it) or a fixed one;
- the measured cost ratio (vanilla's training seconds / the variant's per seed pair, on the device
  clock the estimators use: CPU seconds on CPU, `runstats.clock`) next to the ratio predicted from the
  measured filter rate f, vanilla's update share u and the kept fraction;
- the regime: first-epoch group types, filter rate, probe precision with a Wilson interval, clip fraction.
Vanilla's own row: its held-out gain (final - initial) with an interval over seeds and prompts.
Per setting, the verdict of the pre-registered rule (docs/efficiency.md): the claims' direction rule
(`claims.direction_verdict`) on the matched speedup against the paper's size, when its noise floor passes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from toolcall_repro.analysis import claims, runstats
from toolcall_repro.analysis.efficiency import DEVICE_TIME, by_setting_variant
from toolcall_repro.analysis.loaders import RunRecord
from toolcall_repro.analysis.matched import (
    FLOOR_BOUND,
    FLOOR_NEAR,
    MATCHED_FRACTION,
    floor_supports_claim,
    matched_speedup,
    noise_floor_pairs,
)
from toolcall_repro.analysis.speedup import OutcomeCurve, peak_speedup
from toolcall_repro.analysis.stats import gain_non_inferiority, seed_prompt_difference, wilson_interval
from toolcall_repro.analysis.tabular import Table
from toolcall_repro.rl.metrics import epoch_report, predicted_step_ratio

OUTCOMES = "heldout_outcomes"
# Held-out metrics a run can record per prompt (curve.jsonl): greedy (each outcome 0 or 1), and sampled
# (train.settings.<s>.heldout_samples responses at the training temperature: each outcome the fraction
# correct, i.e. the policy's expected reward on that prompt). The report gives each its own table.
METRICS = {"greedy": OUTCOMES, "sampled": "heldout_sampled_outcomes"}
TABLE_NAMES = {"greedy": "efficiency", "sampled": "efficiency_sampled"}


def outcome_curve(
    run: RunRecord, time_key: str = DEVICE_TIME, metric: str = "greedy", per_step_s: float | None = None
) -> OutcomeCurve | None:
    """Per-prompt outcomes of `metric` at each checkpoint against cumulative hours, or with `per_step_s`
    against cumulative seconds / per_step_s (vanilla-step equivalents: a seed-pair unit's vanilla CPU
    seconds a step, in which its machine's speed cancels); None when the run lacks them."""
    key = METRICS[metric]
    if key not in run.curve.columns or run.curve[key].isna().any():
        return None
    c = run.curve.sort_values(time_key)
    unit = 3600.0 if per_step_s is None else float(per_step_s)
    return OutcomeCurve(tuple(c[time_key] / unit), np.array([list(o) for o in c[key]], dtype=float))


def vanilla_step_seconds(run: RunRecord) -> float:
    """A run's training seconds a step on the device clock: the unit of a seed-pair unit's time axis."""
    return _step_seconds(run) / max(1, len(run.metrics))


def metrics_recorded(runs: Sequence[RunRecord]) -> list[str]:
    """The held-out metrics with per-prompt outcomes in at least one run (greedy always listed first)."""
    return [m for m in METRICS if m == "greedy" or any(outcome_curve(r, metric=m) is not None for r in runs)]


def predicted_ratio(f: float, u: float, kept: float, n_ratio: float = 1.0) -> float:
    """`rl.predicted_step_ratio` for a table cell: nan where measured inputs are out of its range (or
    nan themselves: a run that does not record its n)."""
    try:
        return predicted_step_ratio(f, u, kept, n_ratio)
    except ValueError:
        return math.nan


def _n_ratio(variant: Sequence[RunRecord], baseline: Sequence[RunRecord]) -> float:
    """The variant's rollouts per prompt over vanilla's (nan when a run does not record its n)."""
    ns = [{r.config.get("n") for r in runs} for runs in (variant, baseline)]
    if any(len(n) != 1 or None in n for n in ns):
        return math.nan
    return float(ns[0].pop()) / float(ns[1].pop())


def _rows(curves: Mapping[int, OutcomeCurve], seeds: Sequence[int], row: int) -> np.ndarray:
    """(seeds, prompts): each seed's per-prompt outcomes at checkpoint `row` (0 first, -1 final)."""
    return np.array([curves[s].outcomes[row] for s in seeds])


def margin_rule(margin: float | Mapping) -> tuple[float | None, float | None]:
    """(of_gain, fixed) from config train.efficiency.margin: a number (a fixed margin in accuracy) or
    {of_vanilla_gain: q} (a share of vanilla's gain)."""
    if isinstance(margin, Mapping):
        return float(margin["of_vanilla_gain"]), None
    return None, float(margin)


def paper_speedups() -> dict[str, float]:
    """The paper's speedup at matched accuracy per setting, from claims.yaml (the scorecard's numbers)."""
    out = {}
    for claim in claims.load_claims()["claims"]:
        test = claim["test"]
        if test.get("statistic") == "speedup" and test.get("magnitude"):
            out[test["settings"][0]] = float(test["magnitude"]["value"])
    return out


def _fmt(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _iv(est, lo, hi, digits=2) -> str:
    return f"{_fmt(est, digits)} [{_fmt(lo, digits)}, {_fmt(hi, digits)}]"


def _first_epoch(runs: Sequence[RunRecord]) -> dict[str, float]:
    fr = [epoch_report(r.metrics.to_dict("records"))[0] for r in runs if len(r.metrics)]
    return {t: float(np.mean([f[f"{t}_frac"] for f in fr])) for t in ("all_correct", "all_wrong", "mixed")}


def _step_seconds(run: RunRecord) -> float:
    """The run's training seconds on the device clock (runstats.clock)."""
    return float(runstats.step_seconds(run.metrics).sum())


def efficiency_tables(
    runs: Sequence[RunRecord],
    *,
    margin: float | Mapping = 0.05,
    baseline: str = "vanilla",
    n_bootstrap: int = 2000,
    seed: int = 0,
    metric: str = "greedy",
    fraction: float = MATCHED_FRACTION,
    units: Mapping[str, tuple[int, int]] | None = None,
) -> list[Table]:
    """The efficiency table on held-out `metric` (greedy or sampled), then the per-epoch table.

    `units` ({setting: (pairs committed, pairs planned)}): the runs are seed-pair units (pre-registration
    3): each pair's times in its vanilla run's seconds a step, each pair's own matched target, and no
    verdict for a setting until all its planned pairs are in."""
    of_gain, fixed = margin_rule(margin)
    margin_words = (
        f"{of_gain:g} of vanilla's gain (the variant keeps at least {1 - of_gain:g} of it)"
        if of_gain is not None
        else f"{fixed:g} (fixed)"
    )
    paper = paper_speedups()
    rows, notes = (
        [],
        [
            f"held-out metric: {metric}"
            + (
                " (one greedy response a prompt, outcome 0 or 1)"
                if metric == "greedy"
                else " (heldout_samples responses a prompt at the training temperature, outcome the fraction"
                " correct; the same draws at every checkpoint and in every run)"
            ),
            "speedup = time for vanilla to reach its peak held-out accuracy / time for the variant to reach"
            " it (PODS), pooled over paired seeds, cumulative CPU time; [95% bootstrap over prompts and seed"
            " pairs; a resample where the variant misses counts 0]; 'not reached' when it never gets there",
            f"matched speedup = time for vanilla to reach {fraction:g} of vanilla's pooled final gain over the"
            " start / time for the variant to reach it, on each run's curve made monotone by isotonic"
            " regression (checkpoints weighted by held-out prompts), times interpolated, pooled over paired"
            " seeds; a run that never reaches the target is censored at its budget (its last checkpoint's"
            " time: a censored variant's true time is later, so a ratio with one is an upper bound);"
            " [95% bootstrap over prompts and seed pairs, the target recomputed; the share of resamples with"
            " a censored run is shown]",
            "noise floors: time to vanilla's peak on vanilla seed s against s+1; matched speedup on vanilla's"
            " last seed against each other seed (with one target for all pairs a rotation is 1 by"
            " construction)",
            f"claim rule (pre-registered, docs/efficiency.md): an estimator carries a claim only if its"
            f" vanilla-vs-vanilla row lies within {FLOOR_NEAR:g}x of 1 with a 95% interval covering 1 and"
            f" inside [{1 / FLOOR_BOUND:g}, {FLOOR_BOUND:g}]",
            f"final acc - vanilla: each variant run's last checkpoint against its paired vanilla run's, 95%"
            f" bootstrap over seed pairs and prompts together; vanilla gain: final - first checkpoint, the"
            f" same way; non-inferior: the low end of (variant - vanilla) + margin above 0, margin"
            f" {margin_words}, recomputed in every resample",
            "cost ratio = vanilla's training seconds / the variant's per seed pair (mean [min, max]), and u,"
            " on the estimators' device clock (CPU seconds on CPU, not wall);"
            " predicted = 1/(r((1-f)(1-u)+(1-f)u kept)) from measured f, vanilla's u, the variant's kept fraction"
            " of its n, and r = its n / vanilla's n",
        ],
    )
    if units is not None:
        notes.append(
            "seed-pair units (pre-registration 3): every time is in vanilla-step equivalents (a run's training"
            " CPU seconds / its pair's vanilla CPU seconds a step; a vanilla run's own in the noise floor), and"
            f" the matched target is each pair's own: {fraction:g} of its vanilla run's gain above each run's own"
            " first checkpoint"
        )
    for setting, variants in sorted(by_setting_variant(runs).items()):
        base = variants.get(baseline, {})
        step_s = {s: vanilla_step_seconds(r) for s, r in base.items()} if units is not None else {}
        base_curves = {s: outcome_curve(r, metric=metric, per_step_s=step_s.get(s)) for s, r in base.items()}
        if not base or any(c is None for c in base_curves.values()):
            notes.append(f"{setting}: no vanilla runs with per-prompt outcomes: no intervals")
            continue
        base_u = float(np.mean([runstats.update_share(r.metrics) for r in base.values()]))
        order = sorted(base_curves)
        vanilla_gain = seed_prompt_difference(
            _rows(base_curves, order, 0), _rows(base_curves, order, -1), n_bootstrap=n_bootstrap, seed=seed
        )
        floor_ok = {}
        for variant, seeds in sorted(variants.items(), key=lambda kv: (kv[0] != baseline, kv[0])):
            curves = {s: outcome_curve(r, metric=metric, per_step_s=step_s.get(s)) for s, r in seeds.items()}
            if any(c is None for c in curves.values()):
                notes.append(f"{setting}/{variant}: no per-prompt outcomes")
                continue
            first = _first_epoch(list(seeds.values()))
            probes = sum(
                int(r.metrics.groupby("epoch")["filter/probed"].last().sum()) for r in seeds.values()
            )
            still = sum(
                int(r.metrics.groupby("epoch")["filter/probe_still_correct"].last().sum())
                for r in seeds.values()
            )
            precision = wilson_interval(still, probes)
            clip = [
                float(pd.to_numeric(r.metrics.get("actor/pg_clipfrac"), errors="coerce").mean())
                for r in seeds.values()
                if "actor/pg_clipfrac" in r.metrics
            ]
            row = {
                "setting": setting,
                "variant": variant,
                "seeds": ",".join(map(str, sorted(seeds))),
                "heldout_prompts": next(iter(curves.values())).outcomes.shape[1],
                "initial_acc": float(np.mean([c.curve().accuracies[0] for c in curves.values()])),
                "final_acc": float(np.mean([c.curve().accuracies[-1] for c in curves.values()])),
                "best_acc": float(np.mean([c.curve().best for c in curves.values()])),
                "first_epoch_all_correct": first["all_correct"],
                "first_epoch_all_wrong": first["all_wrong"],
                "first_epoch_mixed": first["mixed"],
                "filter_rate": float(np.mean([runstats.filter_rate(r.metrics) for r in seeds.values()])),
                "kept_fraction": float(np.mean([runstats.kept_fraction(r.metrics) for r in seeds.values()])),
                "update_share": float(np.mean([runstats.update_share(r.metrics) for r in seeds.values()])),
                "precision": precision.estimate,
                "precision_low": precision.low,
                "precision_high": precision.high,
                "probes": probes,
                "clipfrac": float(np.mean(clip)) if clip else math.nan,
            }
            pairs = sorted(set(base) & set(seeds))
            if variant == baseline:
                row.update(gain=vanilla_gain.estimate, gain_low=vanilla_gain.low, gain_high=vanilla_gain.high)
                floors = {"time to vanilla's peak": None, "matched speedup": None}
                if len(seeds) >= 2:  # the noise floors: each estimator on two runs of the same method
                    ordered = sorted(seeds)
                    rot = list(zip(ordered, ordered[1:] + ordered[:1], strict=True))
                    floor = peak_speedup(base_curves, curves, pairs=rot, n_bootstrap=n_bootstrap, seed=seed)
                    row.update(_speedup_cols(floor))
                    last = noise_floor_pairs(ordered)
                    matched_floor = matched_speedup(
                        {b: base_curves[b] for b, _ in last},
                        {c: curves[c] for _, c in last},
                        pairs=last,
                        fraction=fraction,
                        n_bootstrap=n_bootstrap,
                        seed=seed,
                        own_target=units is not None,
                    )
                    row.update(_matched_cols(matched_floor))
                    floors = {"time to vanilla's peak": floor, "matched speedup": matched_floor}
                    others = ",".join(str(b) for b, _ in last)
                    row["variant"] = (
                        f"{baseline} vs {baseline} (peak: seed s vs s+1; matched: seed {ordered[-1]} vs {others})"
                    )
                floor_ok = {name: floor_supports_claim(f) for name, f in floors.items()}
                notes += [_claim_note(setting, name, f) for name, f in floors.items()]
            elif pairs:
                sp = peak_speedup(
                    {s: base_curves[s] for s in pairs},
                    {s: curves[s] for s in pairs},
                    n_bootstrap=n_bootstrap,
                    seed=seed,
                )
                row.update(_speedup_cols(sp))
                matched = matched_speedup(
                    {s: base_curves[s] for s in pairs},
                    {s: curves[s] for s in pairs},
                    fraction=fraction,
                    n_bootstrap=n_bootstrap,
                    seed=seed,
                    own_target=units is not None,
                )
                row.update(_matched_cols(matched))
                ni = gain_non_inferiority(
                    _rows(base_curves, pairs, 0),
                    _rows(base_curves, pairs, -1),
                    _rows(curves, pairs, -1),
                    of_gain=of_gain,
                    margin=fixed,
                    n_bootstrap=n_bootstrap,
                    seed=seed,
                )
                row.update(
                    final_diff=ni.difference.estimate,
                    final_diff_low=ni.difference.low,
                    final_diff_high=ni.difference.high,
                    non_inferiority_margin=ni.margin,
                    non_inferior=ni.non_inferior,
                )
                if variant == "efficient":
                    interim = (units or {}).get(setting)
                    notes.append(
                        interim_note(setting, *interim)
                        if interim and interim[0] < interim[1]
                        else _verdict_note(setting, variant, matched, floor_ok, paper.get(setting), ni)
                    )
                costs = [_step_seconds(base[s]) / _step_seconds(seeds[s]) for s in pairs]
                row.update(
                    cost_ratio=float(np.mean(costs)),
                    cost_ratio_min=min(costs),
                    cost_ratio_max=max(costs),
                    predicted=predicted_ratio(
                        row["filter_rate"],
                        base_u,
                        row["kept_fraction"],
                        _n_ratio(list(seeds.values()), list(base.values())),
                    ),
                )
            else:
                notes.append(f"{setting}/{variant}: no seed paired with {baseline}")
            rows.append(row)
    frame = pd.DataFrame(rows)
    return [
        Table(
            TABLE_NAMES[metric],
            f"Efficiency experiment ({metric} held-out accuracy): time to vanilla's peak, time to matched"
            " accuracy, non-inferiority, cost, regime",
            frame,
            _display(frame),
            notes,
        ),
        epochs_table(runs),
    ]


def _speedup_cols(sp) -> dict:
    return {
        "speedup": math.nan if sp.ratio is None else sp.ratio,
        "speedup_low": sp.ci_low,
        "speedup_high": sp.ci_high,
        "not_reached_share": sp.not_reached_share,
        "not_reached_seeds": ",".join(map(str, sp.not_reached)),
        "at_start": sp.at_start,
    }


def _matched_cols(m) -> dict:
    return {
        "matched_fraction": m.fraction,
        "matched_target": m.target,
        "matched_gain": m.gain,
        "matched_speedup": math.nan if m.ratio is None else m.ratio,
        "matched_low": m.ci_low,
        "matched_high": m.ci_high,
        "matched_censored_share": m.censored_share,
        "matched_censored_pairs": ",".join(f"{b}/{c}" for b, c in m.censored),
        "matched_no_gain": m.no_gain,
    }


def _verdict_note(setting: str, variant: str, matched, floor_ok: Mapping, paper: float | None, ni) -> str:
    """The pre-registered verdict of one setting (docs/efficiency.md): the claims' direction rule on the
    matched speedup against the paper's size, if the matched estimator's noise floor passes; and whether
    the variant is non-inferior. Worded as the scorecard words a verdict."""
    head = f"{setting}: verdict on {variant} (pre-registered rule)"
    ni_words = (
        f"non-inferior at a margin of {ni.margin:.3f}"
        if ni.non_inferior
        else f"not shown non-inferior at a margin of {ni.margin:.3f}"
    )
    if not floor_ok.get("matched speedup"):
        return f"{head}: {claims.INCONCLUSIVE}: the matched estimator's noise floor fails, so it carries no claim; {ni_words}"
    if matched.ratio is None:
        return f"{head}: {claims.NO_SIGNAL}: no gain to match; {ni_words}"
    ev = claims.Evidence(matched.ratio, matched.ci_low, matched.ci_high, len(matched.per_pair), "x")
    magnitude = {"value": paper} if paper is not None else None
    verdict = claims.direction_verdict(ev, null=1.0, magnitude=magnitude)
    censored = (
        f"; censored pairs {', '.join(f'{b}/{c}' for b, c in matched.censored)}" if matched.censored else ""
    )
    return f"{head}: {verdict.label}: matched speedup {claims.fmt_evidence(ev, 2)}, {verdict.reason}{censored}; {ni_words}"


def interim_note(setting: str, committed: int, planned: int) -> str:
    """Pre-registration 3: a setting's verdict waits for all its planned seed pairs."""
    return f"{setting}: {committed} of {planned} {setting.replace('_', '-')} pairs: interim, no verdict"


def _claim_note(setting: str, estimator: str, floor) -> str:
    """The claim rule in words, per setting and estimator, from its vanilla-vs-vanilla row."""
    if floor is None:
        return f"{setting}: {estimator} carries no claim: fewer than two vanilla seeds, no noise floor"
    if floor.ratio is None:
        shown = "not reached"
    else:
        shown = f"{_iv(floor.ratio, floor.ci_low, floor.ci_high)}"
    verdict = "may carry a claim" if floor_supports_claim(floor) else "carries no claim"
    return f"{setting}: {estimator} {verdict}: its vanilla-vs-vanilla row is {shown}"


def _matched_display(r: dict) -> str:
    if "matched_speedup" not in r or pd.isna(r.get("matched_target", math.nan)):
        return ""
    if r.get("matched_no_gain") is True:
        return "no gain to match (vanilla's monotone final <= its start)"
    interval = f"[{_fmt(r['matched_low'])}, {_fmt(r['matched_high'])}]"
    share = (
        f", {r['matched_censored_share']:.0%} of resamples with a censored run"
        if r["matched_censored_share"]
        else ""
    )
    censored = r.get("matched_censored_pairs")
    head = _fmt(r["matched_speedup"]) + (
        f" (censored: {censored})" if isinstance(censored, str) and censored else ""
    )
    return f"{head} {interval} (target {r['matched_target']:.3f}{share})"


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    shown = []
    for r in frame.to_dict("records"):
        if r.get("at_start") is True:
            speed = "at start (vanilla never beat its first checkpoint)"
        elif isinstance(r.get("not_reached_seeds"), str) and r["not_reached_seeds"]:
            speed = f"not reached (seeds {r['not_reached_seeds']})"
        elif "speedup" in r and not pd.isna(r.get("speedup")):
            speed = _iv(r["speedup"], r["speedup_low"], r["speedup_high"]) + (
                f" ({r['not_reached_share']:.0%} of resamples not reached)" if r["not_reached_share"] else ""
            )
        else:
            speed = ""
        final = (
            _iv(r["final_diff"], r["final_diff_low"], r["final_diff_high"], 3)
            + (" non-inferior" if r.get("non_inferior") else " not shown non-inferior")
            + f" (margin {r['non_inferiority_margin']:.3f})"
            if not pd.isna(r.get("final_diff", math.nan))
            else ""
        )
        shown.append(
            {
                "setting": r["setting"],
                "variant": r["variant"],
                "seeds": r["seeds"],
                "held-out": r["heldout_prompts"],
                "acc initial/final/best": f"{r['initial_acc']:.3f} / {r['final_acc']:.3f} / {r['best_acc']:.3f}",
                "vanilla gain": _iv(r["gain"], r["gain_low"], r["gain_high"], 3)
                if not pd.isna(r.get("gain", math.nan))
                else "",
                "time to vanilla's peak": speed,
                "matched speedup": _matched_display(r),
                "final acc - vanilla": final,
                "cost ratio": (
                    f"{r['cost_ratio']:.2f} [{r['cost_ratio_min']:.2f}, {r['cost_ratio_max']:.2f}]"
                    if not pd.isna(r.get("cost_ratio", math.nan))
                    else ""
                ),
                "predicted": _fmt(r.get("predicted", math.nan)),
                "1st epoch AC/AW/mixed": f"{r['first_epoch_all_correct']:.2f} / {r['first_epoch_all_wrong']:.2f}"
                f" / {r['first_epoch_mixed']:.2f}",
                "filter rate": f"{r['filter_rate']:.3f}",
                "precision (Wilson)": f"{_iv(r['precision'], r['precision_low'], r['precision_high'])} of {r['probes']}"
                if r["probes"]
                else "no probes",
                "kept": f"{r['kept_fraction']:.2f}",
                "update share": f"{r['update_share']:.2f}",
                "clip frac": _fmt(r["clipfrac"], 4),
            }
        )
    return pd.DataFrame(shown)


def epochs_table(runs: Sequence[RunRecord]) -> Table:
    """Per run and epoch: group types, coverage, skips, probes, streaks, AC->AC transitions, step seconds."""
    rows = []
    for r in runs:
        secs = runstats.step_seconds(r.metrics).groupby(r.metrics["epoch"]).sum()
        for e in epoch_report(r.metrics.to_dict("records")):
            t = e["transitions"]
            rows.append(
                {
                    "setting": r.setting,
                    "variant": r.variant,
                    "seed": r.seed,
                    "epoch": e["epoch"],
                    "groups": e["groups"],
                    "all_correct": round(e["all_correct_frac"], 3),
                    "all_wrong": round(e["all_wrong_frac"], 3),
                    "mixed": round(e["mixed_frac"], 3),
                    "coverage": None if e.get("coverage") is None else round(e["coverage"], 3),
                    "skipped": e.get("skipped"),
                    "probed": e.get("probed"),
                    "probe_still_correct": e.get("probe_still_correct"),
                    "all_wrong_streak_ge_k": e.get("all_wrong_streak_ge_k"),
                    "ac_to_ac": t["all_correct"]["all_correct"],
                    "ac_to_mixed": t["all_correct"]["mixed"],
                    "mixed_to_ac": t["mixed"]["all_correct"],
                    "step_s": round(float(secs.get(e["epoch"], math.nan)), 2),
                }
            )
    frame = pd.DataFrame(rows)
    return Table(
        "efficiency_epochs",
        "Per epoch: group types, active-set coverage, filter probes, streaks, transitions, step time",
        frame,
        frame,
        [
            "transitions are from the previous epoch (prompts observed in both); skipped prompts are unobserved"
        ],
    )


def learning_curves(runs: Sequence[RunRecord]) -> list:
    """Held-out accuracy against epoch and against cumulative CPU hours: seed mean, min-max band."""
    from toolcall_repro.analysis.figures import _empty, _finish, _new, _run_sources

    caption = (
        "Held-out accuracy per variant: greedy (solid) and, where recorded, sampled at the training"
        " temperature (dashed, same colour); seed mean, band = min-max over seeds; left against the"
        " epoch of the checkpoint, right against cumulative CPU hours (checkpoints of different seeds are"
        " averaged at the same checkpoint index, their times too)."
    )
    if not runs:
        return [_empty("efficiency_curves", "no training runs", caption)]
    grid = by_setting_variant(runs)
    fig, axes = _new(ncols=2, nrows=len(grid))
    for row, (setting, variants) in enumerate(sorted(grid.items())):
        for variant, seeds in sorted(variants.items()):
            curves = [r.curve.sort_values("step") for r in seeds.values()]
            k = min(len(c) for c in curves)
            acc = np.array([c["heldout_accuracy"].to_numpy(float)[:k] for c in curves])
            epoch = np.array(
                [(c["step"] / max(1, c["step"].max()) * c["epoch"].max()).to_numpy()[:k] for c in curves]
            )
            hours = np.array([(c[DEVICE_TIME] / 3600.0).to_numpy()[:k] for c in curves])
            sampled_key = "heldout_sampled_accuracy"
            sampled = (
                np.array([c[sampled_key].to_numpy(float)[:k] for c in curves])
                if all(sampled_key in c and c[sampled_key].notna().all() for c in curves)
                else None
            )
            for col, x in ((0, epoch.mean(axis=0)), (1, hours.mean(axis=0))):
                ax = axes[row, col]
                (line,) = ax.plot(x, acc.mean(axis=0), marker=".", label=f"{variant} ({len(curves)} seeds)")
                ax.fill_between(x, acc.min(axis=0), acc.max(axis=0), alpha=0.15, color=line.get_color())
                if sampled is not None:
                    ax.plot(x, sampled.mean(axis=0), linestyle="--", marker=".", color=line.get_color())
                ax.set_title(setting)
                ax.set_xlabel("epoch" if col == 0 else "CPU hours")
                ax.set_ylabel("held-out accuracy")
        axes[row, 0].legend(fontsize=6)
    return [_finish("efficiency_curves", fig, caption, _run_sources(runs))]


def write_report(run_dir, out_dir, cfg: Mapping, inputs=None) -> list:
    """Tables and figures of the efficiency experiment under out_dir (tables/, figures/, index.md), from
    the training runs cfg['runs'] names (toolcall_repro.units.TrainingRun.unit), among `inputs`
    (the rule's declared inputs) when given. The runs' analysis inputs are written first (out_dir/inputs,
    `analysis.evidence_inputs`) and everything is computed from them read back, so those files alone
    rebuild the report (`rebuild`)."""
    from pathlib import Path

    from toolcall_repro.analysis import evidence_inputs, report

    res = report.RunResults(run_dir, {"runs": cfg.get("runs") or []}, inputs)
    eff = dict(cfg.get("efficiency") or {})
    written = evidence_inputs.export_runs(res.runs, Path(out_dir) / "inputs", eff, run_dir)
    return [*written, *rebuild(Path(out_dir) / "inputs", out_dir)]


def rebuild(inputs_dir, out_dir) -> list:
    """The efficiency report (tables/, figures/, index.md under out_dir) from its analysis inputs alone
    (the files `write_report` writes under inputs/; committed for the evidence under docs/evidence/)."""
    from pathlib import Path

    from toolcall_repro.analysis import evidence_inputs

    runs = evidence_inputs.load_runs(inputs_dir)
    margin = evidence_inputs.read_config(inputs_dir).get("margin", 0.05)
    return build(runs, margin, Path(out_dir))


def build(runs, margin, out, units: Mapping[str, tuple[int, int]] | None = None, extra=(), head=()) -> list:
    """Every table, the figures and index.md of the efficiency report under `out`, from training runs;
    `units` as efficiency_tables', `extra` tables after the efficiency tables, `head` lines under the title
    (the seed-pair units' report: `evidence_units.rebuild_units`)."""
    from toolcall_repro.analysis import report
    from toolcall_repro.io import atomic_write_text

    tables = []
    for metric in metrics_recorded(runs):
        tables += efficiency_tables(runs, margin=margin, metric=metric, units=units)[:1]
    tables += [*extra, epochs_table(runs)]
    written = report.write_tables(tables, out / "tables")
    written += report.write_figures(learning_curves(runs), out / "figures")
    lines = ["# Efficiency experiment", "", *head, *([""] if head else [])]
    lines += [t.markdown() for t in tables[:-1]]
    lines += ["", "Per-epoch table: [tables/md/efficiency_epochs.md](tables/md/efficiency_epochs.md)"]
    lines += ["Figures: [figures/index.md](figures/index.md)", ""]
    atomic_write_text(out / "index.md", "\n".join(lines))
    return [*written, out / "index.md"]
