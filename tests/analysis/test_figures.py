from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from toolcall_repro.analysis import figures, report

# The shape the report rules pass: the evaluate subtree (studies, general) and the experiment's units.
EVALUATE = {
    "studies": {"table4": {"models": ["base", "rl-multi"], "protocols": ["default", "stronger"]}},
    "general": {"models": ["base", "rl-multi"]},
}


@pytest.fixture
def config(run_units) -> str:
    return json.dumps({"evaluate": EVALUATE, **run_units})


@pytest.fixture
def built(run_dir, run_units):
    res = report.RunResults(run_dir, run_units)
    cfg = {
        "studies": {
            "seed_variance": {"models": ["base"], "protocols": ["default"]},
            "template": {"models": ["base"], "protocols": ["stronger", "context"]},
            "thinking": {"models": ["base"], "protocols": ["stronger", "keepthink"]},
        }
    }
    return res, cfg, report.build_figures(res, cfg)


def test_every_figure_is_a_figure_whose_caption_states_protocol_and_seeds(built):
    _, _, figs = built
    assert [f.name for f in figs] == list(report.FIGURE_NAMES)
    for f in figs:
        assert isinstance(f.figure, Figure) and f.sources, f.name
        assert "seeds" in f.caption, f.name
        assert "Protocol:" in f.caption or "Training:" in f.caption, f.name
    template = next(f for f in figs if f.name == "template")
    assert "context (system_prompt=stronger, template=context" in template.caption
    assert "seeds 0,1,2" in template.caption
    assert "training seeds 0" in next(f for f in figs if f.name == "accuracy_vs_time").caption


def test_accuracy_figure_marks_the_matched_point(built):
    _, _, figs = built
    ax = next(f for f in figs if f.name == "accuracy_vs_time").figure.axes[0]
    stars = [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert len(stars) == 1 and list(stars[0].get_xdata()) == pytest.approx([1.5])
    assert list(stars[0].get_ydata()) == pytest.approx([0.6])


def test_figure_without_data_is_a_placeholder_not_a_crash(tmp_path):
    (tmp_path / "empty").mkdir()
    figs = report.build_figures(report.RunResults(tmp_path / "empty", {}), {})
    assert all(isinstance(f.figure, Figure) for f in figs)


@pytest.mark.slow  # the tables and figures CLI in a fresh process (matplotlib, every figure), ~6 s
def test_a_hand_run_writes_tables_figures_and_indexes(run_dir, tmp_path, config):
    """make_tables and make_figures by hand (`toolcall-repro stage`, a process of its own), the pipeline
    config over the whole run tree."""
    for stage, what in (("make_tables", "tables"), ("make_figures", "figures")):
        out = tmp_path / what
        proc = subprocess.run(
            [sys.executable, "-m", "toolcall_repro.cli", "stage", stage, "--option", f"run_dir={run_dir}",
             "--out", f"index={out / 'index.md'}", "--config", config],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (out / "index.md").is_file()
    for name in report.TABLE_NAMES:
        assert (tmp_path / "tables" / "csv" / f"{name}.csv").stat().st_size > 0
        assert (tmp_path / "tables" / "md" / f"{name}.md").read_text().startswith("# ")
        assert "<table" in (tmp_path / "tables" / "html" / f"{name}.html").read_text()
    for name in report.FIGURE_NAMES:
        assert (tmp_path / "figures" / "png" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert (tmp_path / "figures" / "pdf" / f"{name}.pdf").read_bytes()[:4] == b"%PDF"
    assert (
        "manifests/train_grpo/single_turn-efficient.json" in (tmp_path / "figures" / "index.md").read_text()
    )


def test_a_hand_run_rejects_a_missing_run_dir(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "toolcall_repro.cli", "stage", "make_tables", "--option", f"run_dir={tmp_path / 'nope'}",
         "--out", f"index={tmp_path / 't' / 'index.md'}", "--config", "{}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode != 0 and "no run directory" in proc.stderr


@pytest.mark.slow  # renders every figure from declared inputs, ~8 s
def test_figures_from_declared_inputs_use_the_written_speedup_table(run_dir, tmp_path, config):
    """As the rules run it: tables and figures read only their declared inputs; the figures take the
    speedup table make_tables wrote (input.tables_csv), and draw the same accuracy-vs-time figure as when
    they build it."""
    from toolcall_repro.cli import main

    declared = [a for p in run_dir.rglob("*") if p.is_file() for a in ("--in", f"results={p}")]
    hand = ["--option", f"run_dir={run_dir}", "--config", config]
    assert main(["stage", "make_tables", "--out", f"index={tmp_path / 't' / 'index.md'}", *declared, *hand]) == 0
    tables_csv = tmp_path / "t" / "csv"
    assert main(["stage", "make_figures", "--out", f"index={tmp_path / 'f' / 'index.md'}", *declared,
                 "--in", f"tables_csv={tables_csv}", *hand]) == 0  # fmt: skip
    assert main(["stage", "make_figures", "--out", f"index={tmp_path / 'g' / 'index.md'}", *hand]) == 0
    png = "png/accuracy_vs_time.png"
    assert (tmp_path / "f" / png).read_bytes() == (tmp_path / "g" / png).read_bytes()
    # a declared set without the training runs: no figure cites a training run
    assert "manifests/train_grpo/" in (tmp_path / "f" / "index.md").read_text()
    only_evals = [a for p in run_dir.rglob("*") if p.is_file() and "/train/" not in str(p)
                  for a in ("--in", f"results={p}")]  # fmt: skip
    assert main(["stage", "make_figures", "--out", f"index={tmp_path / 'h' / 'index.md'}", *only_evals,
                 "--in", f"tables_csv={tables_csv}", *hand]) == 0  # fmt: skip
    assert "train/" not in (tmp_path / "h" / "index.md").read_text()


def test_stack_labels_moves_an_overlapping_label_just_below():
    # B (top 22) is placed first; A overlaps it and moves down to B's bottom (12) - gap 2: shift 20 - 12 + 2;
    # C overlaps nothing (x 100-120) and stays
    boxes = [(0, 10, 20, 20), (5, 12, 25, 22), (100, 10, 120, 20)]
    assert figures.stack_labels(boxes) == [10.0, 0.0, 0.0]
    # a third label on the same spot goes below both
    assert figures.stack_labels([(0, 10, 20, 20)] * 3) == [0.0, 12.0, 24.0]


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("pipeline_check", [False, True])
def test_speedup_labels_of_variants_at_the_same_point_never_collide(run_dir, pipeline_check, run_units):
    # Two variants reaching the target 0.6 at 1.50 h and 1.52 h: their labels start on the same spot.
    res = report.RunResults(run_dir, run_units)
    eff = next(r for r in res.runs if r.variant == "efficient")
    res.runs.append(dataclasses.replace(eff, variant="filter_only"))
    speedups = pd.DataFrame(
        [
            {"setting": "single_turn", "variant": v, "target_accuracy": 0.6, "time_to_target_h": t,
             "baseline_time_h": 3.0, "speedup": 3.0 / t}
            for v, t in (("efficient", 1.5), ("filter_only", 1.52))
        ]
    )  # fmt: skip
    figs = report.build_figures(res, {"pipeline_check": pipeline_check}, speedups)
    fig = next(f for f in figs if f.name == "accuracy_vs_time").figure
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    labels = [t for t in fig.axes[0].texts if t.get_text().endswith("x")]
    assert sorted(t.get_text() for t in labels) == ["1.97x", "2.00x"]
    a, b = (t.get_window_extent(canvas.get_renderer()) for t in labels)
    assert not _overlap(a, b)
    assert (fig.get_suptitle() == report.PIPELINE_CHECK_TITLE) is pipeline_check


def test_every_figure_of_a_pipeline_check_says_so_in_its_title(run_dir, run_units):
    figs = report.build_figures(report.RunResults(run_dir, run_units), {"pipeline_check": True})
    assert {f.figure.get_suptitle() for f in figs} == {report.PIPELINE_CHECK_TITLE}
    assert (
        "pipeline check" in report.PIPELINE_CHECK_TITLE.lower()
        and "not the paper's result" in report.PIPELINE_CHECK_TITLE
    )
