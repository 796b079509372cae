"""A small results tree that follows docs/architecture.md, built from constructed numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from toolcall_repro.rl.metrics import step_metrics

sys.path.insert(0, str(Path(__file__).parent))  # the test modules' helpers beside it (_runs.py)

PROTOCOLS = {
    "default": ("bfcl_default", "native", "drop"),
    "stronger": ("stronger", "native", "drop"),
    "context": ("stronger", "context", "drop"),
    "keepthink": ("stronger", "native", "keep"),
    "doubled": ("bfcl_default_x2", "native", "drop"),
    "rules12": ("default_rules12", "native", "drop"),
}
# (model, protocol) -> (multi, single-mean, single-weighted) as fractions
SCORES = {
    ("base", "default"): (0.20, 0.80, 0.78),
    ("base", "stronger"): (0.35, 0.82, 0.80),
    ("base", "context"): (0.28, 0.81, 0.79),
    ("base", "keepthink"): (0.37, 0.83, 0.81),
    ("base", "doubled"): (0.21, 0.80, 0.78),
    ("base", "rules12"): (0.33, 0.81, 0.80),
    ("rl-multi", "default"): (0.25, 0.81, 0.79),
    ("rl-multi", "stronger"): (0.40, 0.84, 0.82),
    ("fmt-single", "default"): (0.18, 0.79, 0.77),
    ("fmt-multi", "default"): (0.15, 0.78, 0.76),
}
SEED_OFFSETS = (-0.01, 0.0, 0.01)


def write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def metric(values):
    n = len(values)
    mean = sum(values) / n
    std = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return {"mean": mean, "std": std, "per_seed": list(values)}


def card(protocol: str, seed=None) -> dict:
    sp, template, thinking = PROTOCOLS[protocol]
    return {
        "id": protocol,
        "system_prompt": {"id": sp, "instruction_tokens": 10 * len(sp)},  # as protocol_card writes it
        "template": template,
        "thinking": thinking,
        "temperature": 0.7,
        "top_p": 1.0,
        "max_tokens": 64,
        "backend": "transformers",
    }


def bfcl_summary(model: str, protocol: str, offsets=SEED_OFFSETS) -> dict:
    multi, single, weighted = SCORES[(model, protocol)]
    metrics = {
        "multi_turn": metric([multi + o for o in offsets]),
        "single_turn_mean_nl_l": metric([single + o / 2 for o in offsets]),
        "single_turn_weighted": metric([weighted + o / 2 for o in offsets]),
        "avg": metric([(multi + single + 1.5 * o) / 2 for o in offsets]),
        "mean_input_tokens": metric([200.0 + 10 * len(protocol)] * len(offsets)),
    }
    return {"card": card(protocol), "seeds": list(range(len(offsets))), "metrics": metrics}


def heldout_summary(model: str, protocol: str, offsets=SEED_OFFSETS) -> dict:
    """The held-out reserve benchmark's summary: single_turn / multi_turn / avg, with clear effects."""
    multi, single, _ = SCORES[(model, protocol)]
    metrics = {
        "multi_turn": metric([multi + 0.2 + o for o in offsets]),
        "single_turn": metric([single - 0.3 + o for o in offsets]),
        "avg": metric([(multi + single - 0.1 + 2 * o) / 2 for o in offsets]),
        "mean_input_tokens": metric([150.0] * len(offsets)),
    }
    return {"card": card(protocol), "seeds": list(range(len(offsets))), "metrics": metrics}


def train_metrics(
    steps_per_epoch: int, epochs: int, skip: int, gen_s: float, update_s: float, m: int, n: int
):
    rows, t = [], 0.0
    for e in range(epochs):
        for k in range(steps_per_epoch):
            step = e * steps_per_epoch + k
            groups = [[1.0] * n, [0.0] * n, [1.0, 0.0] * (n // 2), [1.0] * n]
            transitions = {"all_correct": {"all_correct": 3, "all_wrong": 0, "mixed": 1}} if e else {}
            t += gen_s + update_s
            rows.append(
                step_metrics(
                    step=step,
                    epoch=e,
                    groups=groups,
                    filter_stats={
                        "active": 8 - skip,
                        "skipped": skip,
                        "coverage": (8 - skip) / 8,
                        "probed": 2 if skip and e else 0,
                        "probe_still_correct": 1 if skip and e else 0,
                        "transitions": transitions,
                    },
                    skipped_reward_mean=1.0 if skip else None,
                    gen_tokens=100 * 4 * n,
                    update_tokens=150 * 4 * m,
                    total_num_tokens=(100 + 50 * (1 + e)) * 4 * n,
                    gen_rows=4 * n,
                    update_rows=4 * m,
                    timings={
                        "gen": gen_s,
                        "update_actor": update_s,
                        "optimizer": 0.0,
                        "step": gen_s + update_s,
                    },
                    cumulative_s=t,
                    cumulative_device_s=t,
                )
            )
    return rows


def curve(times_h, accs):
    return [
        {
            "step": i,
            "epoch": i,
            "heldout_accuracy": a,
            "time/cumulative_s": t * 3600,
            "time/cumulative_device_s": t * 3600,
        }
        for i, (t, a) in enumerate(zip(times_h, accs, strict=True))
    ]


RUNS = {
    # variant -> (curve hours, curve accuracies, filter skips per epoch, gen s, update s, m)
    "vanilla": ([0, 1, 2, 3], [0.1, 0.3, 0.5, 0.6], 0, 1.0, 3.0, 8),
    "efficient": ([0, 0.5, 1.0, 1.5], [0.1, 0.3, 0.5, 0.6], 2, 0.8, 1.0, 4),
}


def make_run(root: Path, run_id: str = "toy") -> Path:
    run = root / "results" / run_id
    outputs = {}
    for model, protocol in SCORES:
        p = write(run / "eval" / "bfcl" / model / protocol / "summary.json", bfcl_summary(model, protocol))
        outputs[f"summarise_bfcl/{model}-{protocol}"] = p
        for name in ("summary", "variance"):
            p = write(
                run / "eval" / "heldout" / model / protocol / f"{name}.json", heldout_summary(model, protocol)
            )
            outputs[f"score_heldout/{model}-{protocol}"] = p
    p = write(
        run / "eval" / "bfcl" / "base" / "default" / "variance.json",
        bfcl_summary("base", "default", (-0.02, 0.0, 0.01, 0.015)),
    )
    outputs["summarise_bfcl_variance/base-default"] = p
    ace = {
        "card": card("stronger"),
        "seeds": [0, 1],
        "metrics": {
            k: metric([v, v + 0.02])
            for k, v in {
                "overall": 0.6,
                "normal": 0.7,
                "special": 0.5,
                "agent": 0.3,
                "normal_atom_bool": 0.9,
                "fixed/overall": 0.65,
                "fixed/normal": 0.75,
            }.items()
        },
    }
    outputs["summarise_acebench/base-stronger"] = write(
        run / "eval" / "acebench" / "base" / "stronger" / "summary.json", ace
    )
    for model, acc in (("base", 0.40), ("rl-multi", 0.45)):
        summary = {
            "card": {"num_fewshot": 0, "seeds": {"random": 0}},
            "results": [
                {
                    "task": "toolcall_tool_choice",
                    "metric": "acc",
                    "value": acc,
                    "stderr": 0.05,
                    "n_samples": 40,
                }
            ],
            "task_hashes": {"toolcall_tool_choice": "abc"},
        }
        outputs[f"check_general_capability/{model}"] = write(run / "eval" / "general" / model / "summary.json", summary)
    report = {
        "sources": {"xlam": {"rows": 243, "samples": 240, "rows_rejected": 3, "rejects": {"bad_json": 3}}},
        "malformed_rows": {"total": 3, "by_reason": {"bad_json": 3}},
        "chains": {
            "single_turn": {
                "steps": [
                    {
                        "step": "two_rollouts_disagree",
                        "in": 360,
                        "out": 120,
                        "dropped": {"both_right": 200, "both_wrong": 40},
                    }
                ]
            },
            "multi_turn": {
                "steps": [{"step": "turns_2_to_6", "in": 360, "out": 200, "dropped": {"turns": 160}}],
                "turn_counting": {"definition": "user_turns"},
            },
        },
    }
    outputs["report_filter/all"] = write(run / "data" / "filter_report.json", report)
    for variant, (hours, accs, skip, gen_s, update_s, m) in RUNS.items():
        folder = run / "train" / "single_turn" / variant
        config = {
            "setting": "single_turn",
            "variant": variant,
            "n": 8,
            "batch_size": 4,
            "temperature": 0.7,
            "filter": {"k": 1} if skip else None,
            "downsample": {"m": m} if m < 8 else None,
        }
        write_jsonl(folder / "metrics.jsonl", train_metrics(2, 2, skip, gen_s, update_s, m, 8))
        write_jsonl(folder / "curve.jsonl", curve(hours, accs))
        outputs[f"train_grpo/single_turn-{variant}"] = write(folder / "summary.json", {"seed": 0})
        write(
            run / "manifests" / "train_grpo" / f"single_turn-{variant}.json",
            {
                "rule": "train_grpo",
                "config": config,
                "seeds": {"train": 0},
                "outputs": {
                    f"results/{run_id}/train/single_turn/{variant}/{f}": "0" * 64
                    for f in ("metrics.jsonl", "curve.jsonl", "summary.json")
                },
            },
        )
    for key, path in outputs.items():
        if key.startswith("train_grpo"):
            continue
        rule, _, name = key.partition("/")
        rel = path.relative_to(root).as_posix()
        write(run / "manifests" / rule / f"{name}.json", {"rule": rule, "outputs": {rel: "0" * 64}})
    return run


def units(run: Path) -> dict:
    """The units make_run wrote, as the experiment object names them (Experiment.analysis_units): each
    file with the manifest its unit names."""
    from toolcall_repro.layout import manifest_path
    from toolcall_repro.units import Score, TrainingRun

    def score(benchmark, model, protocol, kind="summary"):
        return Score(str(run), benchmark, model, protocol, f"{kind}.json").unit()

    scores = [score("bfcl", m, p) for m, p in SCORES]
    scores += [score("heldout", m, p, k) for m, p in SCORES for k in ("summary", "variance")]
    scores += [score("bfcl", "base", "default", "variance"), score("acebench", "base", "stronger")]
    scores += [score("general", m, None) for m in ("base", "rl-multi")]
    runs = [TrainingRun(str(run), "single_turn", v).unit() for v in RUNS]
    report = {"path": str(run / "data" / "filter_report.json"), "manifest": manifest_path(str(run), "report_filter")}
    return {"scores": scores, "runs": runs, "filter_report": report}


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return make_run(tmp_path)


@pytest.fixture
def run_units(run_dir) -> dict:
    return units(run_dir)


@pytest.fixture
def toy():
    """This module: the builders and constants, for tests that construct their own inputs."""
    return sys.modules[__name__]
