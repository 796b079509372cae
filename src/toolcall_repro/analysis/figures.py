"""Figures: DataFrames / runs in, `Fig` (a matplotlib Figure and its caption) out. Nothing is written here.

Figures are built on `matplotlib.figure.Figure` directly (no pyplot state), so building one has no side
effect. Every caption names the protocol (evaluation) or training setting, and the seeds.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from toolcall_repro.analysis import runstats
from toolcall_repro.analysis.efficiency import by_setting_variant, run_curve
from toolcall_repro.analysis.loaders import RunRecord, card_field
from toolcall_repro.analysis.tabular import is_missing, percent_scale

PROTOCOL_FIELDS = ("system_prompt", "template", "thinking", "temperature", "top_p", "max_tokens", "backend")
SINGLE, MULTI = "single_turn_mean_nl_l", "multi_turn"
GROUP_COLOURS = {"all_correct": "#4c9f70", "all_wrong": "#c8553d", "mixed": "#6b8fb3"}


@dataclass
class Fig:
    name: str  # file stem under figures/
    figure: Figure
    caption: str
    sources: list[tuple[str, str | None]] = field(default_factory=list)  # (source file, manifest)


def _new(
    ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6
) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(width * ncols, height * nrows + 0.8), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _finish(name: str, fig: Figure, caption: str, sources: Sequence[tuple[str, str | None]]) -> Fig:
    # The caption travels inside the image too, so a PNG on its own still states protocol and seeds.
    width_chars = int(fig.get_figwidth() * 19)  # ~19 characters an inch at 7 pt
    fig.supxlabel(textwrap.fill(caption, width_chars), x=0.01, ha="left", fontsize=7)
    return Fig(name, fig, caption, list(dict.fromkeys(sources)))


def _empty(name: str, message: str, caption: str) -> Fig:
    fig, axes = _new()
    axes[0, 0].text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    axes[0, 0].set_axis_off()
    return _finish(name, fig, caption, [])


def describe_protocols(scores: pd.DataFrame) -> str:
    """'default: system_prompt=bfcl_default, template=native, ...; seeds 0,1,2' for each protocol shown."""
    parts = []
    for protocol, sel in scores.groupby("protocol", sort=True):
        card = sel.iloc[0]["card"] or {}
        fields = ", ".join(
            f"{f}={card_field(card, f)}" for f in PROTOCOL_FIELDS if card_field(card, f) is not None
        )
        seeds = sorted({s for seeds in sel["seeds"] for s in seeds})
        parts.append(f"{protocol} ({fields or 'no card'}; seeds {','.join(map(str, seeds))})")
    return "Protocol: " + "; ".join(parts) + "." if parts else "No scores."


def _sources(df: pd.DataFrame) -> list[tuple[str, str | None]]:
    return [(r["source"], r["manifest"]) for r in df.to_dict("records")]


# --- evaluation figures -------------------------------------------------------------------------------


def _select(scores: pd.DataFrame, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    wanted = set(pairs)
    keep = [
        (m, p) in wanted and metric in (SINGLE, MULTI)
        for m, p, metric in zip(scores["model"], scores["protocol"], scores["metric"], strict=True)
    ]
    return scores.loc[pd.Series(keep, index=scores.index, dtype=bool)]


def seed_spread(scores: pd.DataFrame, pairs: Sequence[tuple[str, str]]) -> Fig:
    """Each seed's BFCL score per model, single-turn vs multi-turn, with mean ± std."""
    sel = _select(scores, pairs)
    caption = "Seed spread: BFCL score of every evaluation seed per model. " + describe_protocols(sel)
    if sel.empty:
        return _empty("seed_spread", "no seed-variance scores in this run", caption)
    scale = percent_scale(list(sel["mean"]))
    fig, axes = _new(ncols=2)
    for ax, metric, title in ((axes[0, 0], SINGLE, "single-turn"), (axes[0, 1], MULTI, "multi-turn")):
        m = sel[sel["metric"] == metric]
        labels = []
        for i, r in enumerate(m.to_dict("records")):
            vals = np.array(r["per_seed"], dtype=float) * scale
            offsets = np.linspace(-0.15, 0.15, len(vals)) if len(vals) > 1 else np.zeros(1)
            ax.scatter(i + offsets, vals, s=18, color="#555555", zorder=3)
            ax.errorbar(
                i + 0.3,
                r["mean"] * scale,
                yerr=0 if is_missing(r["std"]) else r["std"] * scale,
                fmt="o",
                color="#c8553d",
            )
            labels.append(f"{r['model']}\n{r['protocol']}")
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlim(-0.6, len(labels) - 0.2)
        ax.set_title(f"BFCL {title}")
        ax.set_ylabel("accuracy (%)" if scale == 100 else "accuracy")
    return _finish("seed_spread", fig, caption, _sources(sel))


def protocol_comparison(
    scores: pd.DataFrame, pairs: Sequence[tuple[str, str]], name: str, field_name: str, title: str
) -> Fig:
    """Grouped bars: BFCL single / multi per model, one bar per protocol labelled by `field_name`."""
    sel = _select(scores, pairs)
    models = list(dict.fromkeys(m for m, _ in pairs))
    protocols = list(dict.fromkeys(p for _, p in pairs))
    caption = f"{title}: BFCL mean ± std over seeds. " + describe_protocols(sel)
    if sel.empty:
        return _empty(name, f"no scores for {', '.join(protocols)} in this run", caption)
    scale = percent_scale(list(sel["mean"]))
    fig, axes = _new(ncols=2)
    width = 0.8 / max(1, len(protocols))
    for ax, metric, label in ((axes[0, 0], SINGLE, "single-turn"), (axes[0, 1], MULTI, "multi-turn")):
        for j, protocol in enumerate(protocols):
            p = sel[(sel["protocol"] == protocol) & (sel["metric"] == metric)]
            value = p.iloc[0][field_name] if len(p) else None
            means = [_value(p, model, "mean") * scale for model in models]
            stds = [_value(p, model, "std") * scale for model in models]
            ax.bar(
                np.arange(len(models)) + j * width,
                means,
                width,
                yerr=np.nan_to_num(stds),
                label=f"{protocol} ({field_name}={value})",
                capsize=3,
            )
        ax.set_xticks(np.arange(len(models)) + width * (len(protocols) - 1) / 2, list(models))
        ax.set_title(f"BFCL {label}")
        ax.set_ylabel("accuracy (%)" if scale == 100 else "accuracy")
        ax.legend(fontsize=7)
    return _finish(name, fig, caption, _sources(sel))


def _value(df: pd.DataFrame, model: str, col: str) -> float:
    m = df[df["model"] == model]
    return float(m.iloc[0][col]) if len(m) and m.iloc[0][col] is not None else math.nan


# --- training figures ---------------------------------------------------------------------------------


def describe_training(runs: Sequence[RunRecord]) -> str:
    parts = []
    for setting, variants in sorted(by_setting_variant(runs).items()):
        cfg = next(iter(next(iter(variants.values())).values())).config
        hp = ", ".join(
            f"{k}={cfg[k]}" for k in ("n", "batch_size", "temperature", "epochs", "lr") if k in cfg
        )
        seeds = sorted({s for v in variants.values() for s in v})
        parts.append(
            f"{setting} ({hp or 'config not recorded'}; variants {', '.join(sorted(variants))};"
            f" training seeds {','.join(map(str, seeds))})"
        )
    return "Training: " + "; ".join(parts) + "." if parts else "No training runs."


def _run_sources(runs: Sequence[RunRecord]) -> list[tuple[str, str | None]]:
    return [(r.trace.get("source"), r.trace.get("manifest")) for r in runs]


def group_fractions(runs: Sequence[RunRecord]) -> Fig:
    """All-correct / all-wrong / mixed fractions of the prompt groups per step, per run."""
    caption = (
        "Group types over training: fraction of prompt groups whose n rollouts are all correct,"
        " all wrong or mixed (zero-variance groups teach nothing). " + describe_training(runs)
    )
    if not runs:
        return _empty("group_fractions", "no training runs in this run", caption)
    grid = by_setting_variant(runs)
    variants = sorted({v for vs in grid.values() for v in vs})
    fig, axes = _new(ncols=len(variants), nrows=len(grid), width=3.4, height=2.6)
    for i, (setting, vs) in enumerate(sorted(grid.items())):
        for j, variant in enumerate(variants):
            ax = axes[i, j]
            ax.set_title(f"{setting} / {variant}", fontsize=8)
            if variant not in vs:
                ax.set_axis_off()
                continue
            seeds = vs[variant]
            run = seeds[min(seeds)]  # the lowest seed; every seed's numbers are in its metrics.jsonl
            g = runstats.group_fractions(run.metrics).pivot(
                index="step", columns="group_type", values="fraction"
            )
            ax.stackplot(
                g.index,
                *(g[t] for t in GROUP_COLOURS),
                labels=list(GROUP_COLOURS),
                colors=list(GROUP_COLOURS.values()),
            )
            ax.set_ylim(0, 1)
            ax.set_xlabel("step", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="lower left")
    return _finish("group_fractions", fig, caption, _run_sources(runs))


def retention(runs: Sequence[RunRecord]) -> Fig:
    """P(still all-correct next epoch | all-correct for the last k epochs), per epoch."""
    caption = (
        "Retention of all-correct prompts: k=1 from the epoch-to-epoch transition counts of every"
        " prompt observed twice in a row; k>=1 from the filter's re-probed prompts (probe precision)."
        " Dotted: the paper's reported levels (0.8 single-turn, 0.9 multi-turn). " + describe_training(runs)
    )
    curves = []
    for r in runs:
        k = (r.config.get("filter") or {}).get("k")
        parts = [runstats.retention_one_epoch(r.metrics)]
        if k is not None and "filter/probed" in r.metrics.columns:
            parts.append(runstats.probe_precision(r.metrics, int(k)))
        for p in parts:
            curves.append(p.assign(setting=r.setting, variant=r.variant, seed=r.seed))
    data = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    if data.empty:
        return _empty("retention", "no epoch with all-correct prompts observed twice", caption)
    settings = sorted(data["setting"].unique())
    fig, axes = _new(ncols=len(settings))
    for ax, setting in zip(axes[0], settings, strict=True):
        for (variant, seed, est, k), c in data[data["setting"] == setting].groupby(
            ["variant", "seed", "estimator", "k"]
        ):
            ax.plot(
                c["epoch"],
                c["p"],
                marker="o",
                linestyle="-" if est == "transitions" else "--",
                label=f"{variant} s{seed} ({est}, k={k})",
            )
        ax.axhline(0.8 if setting.startswith("single") else 0.9, color="grey", linestyle=":")
        ax.set_ylim(0, 1.05)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel("P(still all-correct)")
        ax.set_title(setting)
        ax.legend(fontsize=6)
    return _finish("retention", fig, caption, _run_sources(runs))


def step_costs(points: pd.DataFrame, by_context: pd.DataFrame, runs: Sequence[RunRecord]) -> Fig:
    """Rollout vs update seconds as n grows (per run) and as the context grows (steps binned)."""
    caption = (
        "Where step time goes: mean rollout (generation) and policy-update seconds per step against"
        " rollouts per prompt n (runs without filter or down-sampling), and seconds per generated row"
        " against prompt"
        " tokens per row (steps binned). Only the n values the run trained with appear. "
        + describe_training(runs)
    )
    if points.empty:
        return _empty("step_costs", "no training runs in this run", caption)
    fig, axes = _new(ncols=2)
    ax = axes[0, 0]
    for setting, p in points[points["plain"]].groupby("setting"):
        agg = p.groupby("n", as_index=False)[["gen_s", "update_s"]].mean().sort_values("n")
        ax.plot(agg["n"], agg["gen_s"], marker="o", label=f"{setting} rollout")
        ax.plot(agg["n"], agg["update_s"], marker="s", linestyle="--", label=f"{setting} update")
    ax.set_xlabel("rollouts per prompt n")
    ax.set_ylabel("seconds per step")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    for setting, c in by_context.groupby("setting"):
        c = c.sort_values("context_tokens")
        ax.plot(c["context_tokens"], c["gen_s_per_row"], marker="o", label=f"{setting} rollout")
        ax.plot(
            c["context_tokens"], c["update_s_per_row"], marker="s", linestyle="--", label=f"{setting} update"
        )
    ax.set_xlabel("prompt tokens per row")
    ax.set_ylabel("seconds per generated row")
    ax.legend(fontsize=7)
    return _finish("step_costs", fig, caption, _run_sources(runs))


def accuracy_vs_time(
    runs: Sequence[RunRecord],
    speedups: pd.DataFrame,
    baseline: str = "vanilla",
    time_label: str = "device-hours",
) -> Fig:
    """Held-out accuracy against cumulative device-hours per variant, matched-accuracy points marked."""
    caption = (
        f"Held-out accuracy against cumulative {time_label} for each variant; horizontal line: the"
        f" matched-accuracy target of the comparison with '{baseline}'; markers: first time each run"
        " reaches it (interpolated). " + describe_training(runs)
    )
    if not runs:
        return _empty("accuracy_vs_time", "no training runs in this run", caption)
    grid = by_setting_variant(runs)
    fig, axes = _new(ncols=len(grid))
    labels = []
    for ax, (setting, variants) in zip(axes[0], sorted(grid.items()), strict=True):
        for variant, seeds in sorted(variants.items()):
            colour = None
            for _, run in sorted(seeds.items()):
                c = run_curve(run)
                (line,) = ax.plot(
                    c.times, c.accuracies, marker=".", color=colour, label=variant if colour is None else None
                )
                colour = line.get_color()
            row = speedups[(speedups["setting"] == setting) & (speedups["variant"] == variant)]
            if len(row) and "time_to_target_h" in row and not pd.isna(row.iloc[0].get("time_to_target_h")):
                r = row.iloc[0]
                ax.axhline(r["target_accuracy"], color=colour, linestyle=":", linewidth=0.8)
                ax.plot(
                    [r["time_to_target_h"]], [r["target_accuracy"]], marker="*", markersize=12, color=colour
                )
                ax.plot(
                    [r["baseline_time_h"]], [r["target_accuracy"]], marker="x", markersize=9, color="black"
                )
                if not pd.isna(r.get("speedup")):
                    labels.append(
                        ax.annotate(
                            f"{r['speedup']:.2f}x",
                            (r["time_to_target_h"], r["target_accuracy"]),
                            textcoords="offset points",
                            xytext=(6, -12),
                            fontsize=8,
                            color=colour,
                        )
                    )
        ax.set_title(setting)
        ax.set_xlabel(time_label)
        ax.set_ylabel("held-out accuracy")
        ax.legend(fontsize=7)
    out = _finish("accuracy_vs_time", fig, caption, _run_sources(runs))
    separate_labels(fig, labels)
    return out


def stack_labels(boxes: Sequence[tuple[float, float, float, float]], gap: float = 2.0) -> list[float]:
    """Downward shifts that leave no two label boxes (x0, y0, x1, y1; y up) overlapping.

    Labels are placed top to bottom (then left to right); one that would overlap a label already placed
    moves just below it, `gap` apart, as often as needed. A label that overlaps nothing stays put.
    """
    order = sorted(range(len(boxes)), key=lambda i: (-boxes[i][3], boxes[i][0]))
    placed: list[tuple[float, float, float, float]] = []
    shifts = [0.0] * len(boxes)
    for i in order:
        x0, y0, x1, y1 = boxes[i]
        shift, moved = 0.0, True
        while moved:
            moved = False
            for px0, py0, px1, py1 in placed:
                if x0 < px1 and px0 < x1 and y0 - shift < py1 and py0 < y1 - shift:
                    shift, moved = y1 - py0 + gap, True
        placed.append((x0, y0 - shift, x1, y1 - shift))
        shifts[i] = shift
    return shifts


def separate_labels(fig: Figure, labels: Sequence) -> None:
    """Move annotations (offset in points) down until none overlaps another, measured on the laid-out figure."""
    if len(labels) < 2:
        return
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    boxes = [tuple(a.get_window_extent(renderer).extents) for a in labels]
    for a, shift in zip(labels, stack_labels(boxes), strict=True):
        x, y = a.xyann
        a.xyann = (x, y - shift * 72.0 / fig.dpi)
