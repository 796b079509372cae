"""The claims scorecard: each claim of claims.yaml, its evidence read from one of the run's tables, its verdict.

Pure: built tables (`Table`, whose frames are the CSVs under tables/csv) in, a `Table` out. Every number
comes from the row of the table the claim names at the run's scale (claims.yaml `tables`); per-seed
scores, which the study tables summarise as mean ± std, are looked up in the score summaries by the
row's `source` file, so the seeds pair the two sides of a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from toolcall_repro.analysis import claims as c
from toolcall_repro.analysis.tabular import Table, is_missing, markdown_table, percent_scale

PAPER_SCALE, PIPELINE_CHECK = "paper_scale", "pipeline_check"
# The single-turn score the seed-spread claim reads, per benchmark (BFCL: the first of its candidates).
SINGLE_TURN = {"seed_spread": "single_turn_mean_nl_l", "seed_spread_heldout": "single_turn"}
STAND_IN = {
    "paired_difference": "the held-out reserve benchmark stands in for BFCL (tiny model): the sign is "
    "comparable, the size is not",
    "speedup": "held-out accuracy in CPU-hours of a tiny model stands in for BFCL in A100-GPU-hours",
    "update_to_rollout": "CPU seconds of a tiny model stand in for GPU seconds at paper scale",
    "group_share": "the rollouts of a tiny model warm-started on synthetic data stand in for the paper's models",
}


def build_scorecard(
    tables: Mapping[str, Table],
    scores: pd.DataFrame,
    pipeline_check: bool,
    spec: Mapping | None = None,
    statistics: Mapping | None = None,
) -> Table:
    """One row a claim: the paper's value, ours with interval and n, the verdict and why, the table read.

    `scores`: the score summaries' rows (loaders.load_score_summaries, all benchmarks), for per-seed values.
    `statistics`: a benchmark's own statistics by name (benchmarks.py: f(test, table, scores) -> Evidence).
    """
    spec = spec or c.load_claims()
    scale = PIPELINE_CHECK if pipeline_check else PAPER_SCALE
    rows = []
    for claim in spec["claims"]:
        test = claim["test"]
        name = (test.get("tables") or {}).get(scale)
        if name is None:
            ev = c.absent(
                f"a pipeline check has no stand-in for {', '.join((test.get('tables') or {}).values())}: "
                "the tiny model's scores there test the harness only"
                if pipeline_check
                else "no table at paper scale"
            )
        elif name not in tables:
            ev = c.absent(f"the run has no table {name!r}")
        else:
            ev = evidence(test, tables[name], scores, statistics)
        comparable = not pipeline_check
        verdict = c.judge(test, ev, comparable=comparable, stand_in=STAND_IN.get(test["statistic"], ""))
        if test["statistic"] == "speedup":  # this run's figure is beside the evidence, never instead of it
            verdict = c.Verdict(
                verdict.label, f"{verdict.reason}; {c.evidence_citation(test['settings'][0])}"
            )
        rows.append(
            {
                "claim": claim["id"],
                "finding": claim["finding"],
                "paper": claim["paper"],
                "paper_source": claim["source"],
                "kind": test["kind"],
                "statistic": test["statistic"],
                "estimate": ev.estimate if ev.has_estimate else math.nan,
                "low": ev.low if ev.has_interval else math.nan,
                "high": ev.high if ev.has_interval else math.nan,
                "n": ev.n,
                "unit": ev.unit,
                "compared": ev.detail,
                "verdict": verdict.label,
                "reason": verdict.reason,
                "table": name or "",
            }
        )
    frame = pd.DataFrame(rows)
    display = pd.DataFrame(
        {
            "claim": frame["finding"],
            "paper (source)": [
                f"{p} ({s})" for p, s in zip(frame["paper"], frame["paper_source"], strict=True)
            ],
            "ours": [
                c.fmt_evidence(
                    c.Evidence(
                        None if is_missing(r["estimate"]) else r["estimate"],
                        None if is_missing(r["low"]) else r["low"],
                        None if is_missing(r["high"]) else r["high"],
                        r["n"],
                        r["unit"],
                    ),
                    2 if r["unit"] == "x" else 1,
                )
                + (f" ({r['compared']})" if r["compared"] else "")
                for r in rows
            ],
            "verdict": frame["verdict"],
            "why": frame["reason"],
            "table": frame["table"],
        }
    )
    counts = frame["verdict"].value_counts()
    notes = [
        "verdicts: " + ", ".join(f"{counts.get(v, 0)} {v}" for v in c.VERDICTS),
        f"scale: {scale.replace('_', ' ')}"
        + (
            " (the embedded default or CI size: effectiveness claims are read from the held-out reserve "
            "benchmark, where the tiny model has skill; its BFCL and ACEBench scores test the harness only; "
            "sizes are not compared with the paper's)"
            if pipeline_check
            else " (BFCL, ACEBench and general benchmarks; sizes compared with the paper's)"
        ),
        "rules (toolcall_repro.analysis.claims): reproduced = the whole 95% interval on the paper's side and, "
        "where the paper gives a size, the paper's value inside our interval or ours inside its spread; "
        "direction only = the whole interval on the paper's side, the size differs or is not comparable; "
        "not reproduced = the interval excludes the paper's effect (the other side, or holding no effect and "
        "stopping short of the paper's size); inconclusive = the interval holds both no effect and the "
        "paper's size (or one that cannot be compared); no signal = a measurement that cannot speak (one "
        "seed, or every score equal: a floor or a ceiling); not testable at this scale = the run holds no "
        "evidence for it",
        "efficiency rows: this run's speedup is a "
        + ("pipeline check" if pipeline_check else "measurement of this run")
        + "; each cites the committed efficiency evidence (`make evidence`, docs/efficiency.md) beside it",
        f"the claims, the paper's numbers and each test are fixed in claims.yaml ({spec.get('paper', '')}); "
        "the `table` column names the table every number is read from",
    ]
    return Table(
        "claims", "Claims scorecard: which of the paper's findings this run reproduces", frame, display, notes
    )


# --- evidence per statistic ---------------------------------------------------------------------------


def evidence(
    test: Mapping, table: Table, scores: pd.DataFrame, statistics: Mapping | None = None
) -> c.Evidence:
    """The claim's statistic read from its table (and, for per-seed values, the score summaries);
    `statistics`: a benchmark's own, by name."""
    stat = test["statistic"]
    if table.frame.empty:
        return c.absent(f"{table.name} is empty in this run")
    if stat in (statistics or {}):
        return statistics[stat](test, table, scores)
    if stat == "paired_difference":
        return _paired(test, table, scores)
    if stat == "spread_difference":
        return _spread(test, table)
    if stat == "group_share":
        return _group_share(test, table)
    if stat == "retention":
        return _retention(test, table)
    if stat == "update_to_rollout":
        return _update_to_rollout(test, table)
    if stat == "update_growth":
        return _update_growth(test, table)
    if stat == "speedup":
        return _speedup(test, table)
    if stat == "general_delta":
        return _general(table)
    raise ValueError(
        f"unknown statistic {stat!r}; allowed: paired_difference, spread_difference, group_share, retention, "
        f"update_to_rollout, update_growth, speedup, general_delta{''.join(f', {k}' for k in statistics or {})}"
    )


def _row(frame: pd.DataFrame, keys: Mapping) -> pd.Series | None:
    sel = frame
    for k, v in keys.items():
        if k not in sel.columns:
            return None
        sel = sel[sel[k] == v]
    return sel.iloc[0] if len(sel) else None


def _label(keys: Mapping) -> str:
    return "/".join(str(v) for v in keys.values())


def per_seed(scores: pd.DataFrame, source: str, metric: str) -> dict[int, float]:
    """{seed: score} of one summary file's metric, in percent when the scores are fractions."""
    sel = scores[(scores["source"] == source) & (scores["metric"] == metric)]
    if sel.empty:
        return {}
    r = sel.iloc[0]
    values = [float(v) for v in r["per_seed"]]
    scale = percent_scale(values)
    return {int(s): v * scale for s, v in zip(r["seeds"], values, strict=False)}


def _paired(test: Mapping, table: Table, scores: pd.DataFrame) -> c.Evidence:
    metric = test["metric"]
    sides = []
    for side in ("baseline", "candidate"):
        row = _row(table.frame, test[side])
        if row is None or is_missing(row.get(f"{metric}_mean")):
            return c.absent(f"{table.name} has no {_label(test[side])} row with a {metric} score")
        sides.append(per_seed(scores, row["source"], metric))
    ev = c.paired_difference(*sides)
    detail = f"{_label(test['candidate'])} - {_label(test['baseline'])}, {metric}"
    return c.Evidence(ev.estimate, ev.low, ev.high, ev.n, "points", detail, ev.missing)


def _spread(test: Mapping, table: Table) -> c.Evidence:
    frame = table.frame
    arm = test["arm"]
    values = []
    for metric in test["metrics"]:
        name = SINGLE_TURN.get(table.name, metric) if metric == "single_turn" else metric
        row = _row(frame, {**arm, "metric": name})
        if row is None:
            return c.absent(f"{table.name} has no {_label(arm)} row for {name}")
        values.append([float(v) for v in str(row["per_seed"]).split(";") if v != ""])
    if len(values[0]) != len(values[1]):
        return c.absent(f"{table.name}: {test['metrics']} were scored on different seeds")
    ev = c.spread_difference(values[0], values[1])
    detail = (
        f"peak-to-peak over seeds, {test['metrics'][1]} {np.ptp(values[1]):.1f} - "
        f"{test['metrics'][0]} {np.ptp(values[0]):.1f}, {_label(arm)}"
        if ev.has_estimate
        else ""
    )
    return c.Evidence(ev.estimate, ev.low, ev.high, ev.n, "points", detail, ev.missing)


def _vanilla(frame: pd.DataFrame, setting: str) -> pd.DataFrame:
    return frame[(frame["setting"] == setting) & (frame["variant"] == "vanilla")]


def _pooled(test: Mapping, table: Table, count) -> c.Evidence:
    """One share per setting, pooled over the vanilla seeds; several settings: the first with no evidence
    or, when all have it, the one farthest from the claim (the weakest)."""
    out = []
    for setting in test["settings"]:
        runs = _vanilla(table.frame, setting)
        if runs.empty:
            return c.absent(f"{table.name} has no {setting}/vanilla run")
        hits, trials = count(runs)
        ev = c.share(hits, trials)
        seeds = ",".join(map(str, sorted(runs["seed"])))
        out.append(
            c.Evidence(
                ev.estimate, ev.low, ev.high, ev.n, ev.unit, f"{setting}/vanilla seeds {seeds}", ev.missing
            )
        )
    if len(out) == 1 or any(not e.has_estimate for e in out):
        return next((e for e in out if not e.has_estimate), out[0])
    lowest = min(out, key=lambda e: e.low)  # type: ignore[arg-type, return-value]
    return c.Evidence(
        lowest.estimate,
        lowest.low,
        lowest.high,
        lowest.n,
        lowest.unit,
        "weakest of " + "; ".join(f"{e.detail}: {e.estimate:.1f}%" for e in out),
    )


def _group_share(test: Mapping, table: Table) -> c.Evidence:
    what = test["share"]

    def count(runs: pd.DataFrame) -> tuple[int, int]:
        correct, wrong = int(runs["first_epoch_all_correct"].sum()), int(runs["first_epoch_all_wrong"].sum())
        if what == "zero_variance":
            return correct + wrong, int(runs["first_epoch_groups"].sum())
        if what == "all_correct_of_zero_variance":
            return correct, correct + wrong
        raise ValueError(f"unknown share {what!r}; allowed: zero_variance, all_correct_of_zero_variance")

    return _pooled(test, table, count)


def _retention(test: Mapping, table: Table) -> c.Evidence:
    return _pooled(
        test,
        table,
        lambda runs: (int(runs["retention_retained"].sum()), int(runs["retention_eligible"].sum())),
    )


def _update_to_rollout(test: Mapping, table: Table) -> c.Evidence:
    setting = test["settings"][0]
    runs = _vanilla(table.frame, setting)
    if runs.empty:
        return c.absent(f"{table.name} has no {setting}/vanilla run")
    r = runs.sort_values("seed").iloc[0]  # the lowest seed; every seed's ratio is in the table
    n_note = f", n={r['n']}" if not is_missing(r.get("n")) else ""
    return c.Evidence(
        float(r["update_to_rollout_time"]),
        float(r["update_to_rollout_time_low"]),
        float(r["update_to_rollout_time_high"]),
        int(r["steps"]),
        "x",
        f"{setting}/vanilla seed {r['seed']}{n_note}, over steps",
    )


def update_growth(points: Sequence[tuple[float, float, float]]) -> float:
    """(update growth) / (rollout growth) from the smallest to the largest n: points are (n, gen_s, update_s)
    per step-normalised run; > 1 when update time grows faster with n than rollout time."""
    lo, hi = min(points), max(points)
    return (hi[2] / lo[2]) / (hi[1] / lo[1])


def _update_growth(test: Mapping, table: Table) -> c.Evidence:
    frame = table.frame
    out = []
    for setting in test["settings"]:
        plain = frame[(frame["setting"] == setting) & frame["plain"].astype(bool)]
        by_n = plain.groupby("n")[["gen_s", "update_s", "steps"]].sum()
        if len(by_n) < 2:
            continue
        points = [(float(n), r["gen_s"] / r["steps"], r["update_s"] / r["steps"]) for n, r in by_n.iterrows()]
        ns = ", ".join(f"{int(p[0])}" for p in sorted(points))
        out.append((setting, update_growth(points), ns))
    if not out:
        return c.absent(
            "every plain GRPO run trains one n; the n sweep (vanilla_n4, vanilla_n16) runs in the "
            "`efficiency` target"
        )
    setting, value, ns = min(out, key=lambda o: o[1])
    return c.Evidence(value, None, None, 1, "x", f"{setting}, plain runs at n = {ns}, seconds per step")


def _speedup(test: Mapping, table: Table) -> c.Evidence:
    setting, variant = test["settings"][0], test["variant"]
    row = _row(table.frame, {"setting": setting, "variant": variant})
    if row is None:
        return c.absent(f"{table.name} has no {setting}/{variant} run")
    if row.get("at_start") is True:
        return c.absent("training never improved on the starting held-out accuracy: no matched-accuracy time")
    missed = row.get("not_reached_seeds")
    if isinstance(missed, str) and missed:
        n = len(str(row["seeds"]).split(","))
        return c.Evidence(
            0.0, None, None, n, "x", f"{setting}/{variant} never reached vanilla's peak (seeds {missed})"
        )
    if is_missing(row.get("speedup")):
        return c.absent(f"{setting}/{variant} has no speedup (no vanilla run to compare with)")
    seeds = str(row["seeds"]).split(",")
    return c.Evidence(
        float(row["speedup"]),
        None if is_missing(row.get("speedup_ci_low")) else float(row["speedup_ci_low"]),
        None if is_missing(row.get("speedup_ci_high")) else float(row["speedup_ci_high"]),
        len(seeds),
        "x",
        f"{setting}/{variant} against vanilla, training seeds {row['seeds']}",
    )


def _general(table: Table) -> c.Evidence:
    """The task farthest from unchanged (its interval's end farthest from 0) stands for the claim."""
    out = []
    for r in table.frame.to_dict("records"):
        d, lo, hi = c.normal_difference(r["base"], r["rl"], r["stderr_base"], r["stderr_rl"])
        if math.isfinite(lo + hi):
            out.append((max(abs(lo), abs(hi)), d, lo, hi, r))
    if not out:
        return c.absent(f"{table.name} has no task with standard errors")
    _, d, lo, hi, r = max(out, key=lambda o: o[0])
    others = f"; {len(out) - 1} other task(s) in the table" if len(out) > 1 else ""
    return c.Evidence(d, lo, hi, int(r["n_samples"]), "points", f"{r['task']} {r['rl_model']} - base{others}")


def markdown(t: Table, heading: str = "#") -> str:
    """The scorecard as Markdown (tables/claims.md; the first section of tables/index.md), each table
    name a link to that table's page (md/<name>.md, beside it)."""
    display = t.display.assign(table=[f"[{n}](md/{n}.md)" if n else "" for n in t.display["table"]])
    lines = [f"{heading} {t.title}", "", markdown_table(display), ""]
    return "\n".join(lines + [f"- {n}" for n in t.notes]) + "\n"
