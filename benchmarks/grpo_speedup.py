"""GRPO speed-up on the embedded default: vanilla vs efficient vs each component, side by side.

Prints figures; it is not a test. Trains every (setting, variant) with the local CPU engine one after the
other (so each run gets the same machine), or reads runs that the pipeline already wrote (--from-runs),
then prints per setting: CPU-seconds to vanilla's peak held-out accuracy (PODS) and the speedup over
vanilla ("-" = not reached), the epoch-time ratio, the measured filter rate f and update share u, the
predicted ratio 1/((1-f)(1-u)+(1-f)u m/n) (an estimate, not a bound), and the wall and CPU seconds of
each part of a step (generation, update, optimizer). One seed: intervals are the efficiency report's job.

    python benchmarks/grpo_speedup.py --results results/embedded --config config/config.yaml \
        --out /tmp/grpo_bench [--settings single_turn multi_turn] [--variants ...] [--threads 1]
    python benchmarks/grpo_speedup.py --from-runs results/embedded/train --config config/config.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from toolcall_repro.analysis.speedup import Curve, speedup_at_matched_accuracy
from toolcall_repro.machine import describe, pin_kernels
from toolcall_repro.rl import predicted_speedup
from toolcall_repro.runconfig import compose_run

VARIANTS = ("vanilla", "efficient", "filter_only", "downsample_only")
SETTINGS = ("single_turn", "multi_turn")


def run_config(config: dict, setting: str, variant: str) -> dict:
    """The merged settings + variant subtree, as the workflow passes it to the engine."""
    return compose_run(config, setting, variant)


def train_all(args, config: dict) -> Path:
    from toolcall_repro.engines.local.grpo import parse_config, train_grpo
    from toolcall_repro.engines.local.model import set_threads

    set_threads(args.threads)
    results = Path(args.results)
    out = Path(args.out)
    for setting in args.settings:
        for variant in args.variants:
            cfg = run_config(config, setting, variant)
            if args.max_steps:
                cfg["max_steps"] = args.max_steps
            print(f"== training {setting} / {variant}", file=sys.stderr, flush=True)
            train_grpo(
                train=str(results / "data" / "train" / f"{setting}.parquet"),
                heldout=str(results / "data" / "train" / f"heldout_{setting}.parquet"),
                base=str(results / "models" / "base"),
                config=parse_config(cfg),
                out=str(out / setting / variant),
                seed=args.seed,
                resume=True,
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
    return out


def read_run(run_dir: Path) -> dict:
    curve = [json.loads(line) for line in open(run_dir / "curve.jsonl")]
    metrics = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"curve": curve, "metrics": metrics, "summary": summary}


def setting_table(runs: dict[str, dict], config: dict, setting: str, time_key: str) -> list[dict]:
    """One row per variant: figures against vanilla at vanilla's peak held-out accuracy."""
    if "vanilla" not in runs:
        raise ValueError(f"{setting}: the table needs the vanilla run")
    curves = {
        v: Curve.from_points([c[time_key] for c in r["curve"]], [c["heldout_accuracy"] for c in r["curve"]])
        for v, r in runs.items()
    }
    target = curves["vanilla"].best
    base = runs["vanilla"]["summary"]
    u = base["update_share"] or 0.0
    base_epoch_time = base[time_key] / max(1, base["epochs"])
    rows = []
    for variant, r in runs.items():
        s = r["summary"]
        cfg = run_config(config, setting, variant)
        n = cfg.get("n", 8)
        m = (cfg.get("downsample") or {}).get("m", n)
        f = s["filter_rate"]
        sp = speedup_at_matched_accuracy(curves["vanilla"], curves[variant], target)
        rows.append(
            {
                "variant": variant,
                "steps": s["steps"],
                "time_s": s[time_key],
                "s_per_step": s[time_key] / max(1, s["steps"]),
                "acc_initial": s["heldout_accuracy"]["initial"],
                "acc_best": s["heldout_accuracy"]["best"],
                "target": target,
                "time_to_target": sp.candidate_time,
                "speedup": sp.ratio,
                "epoch_time_ratio": base_epoch_time / (s[time_key] / max(1, s["epochs"])),
                "filter_rate": f,
                "update_share": s["update_share"],
                "m_over_n": m / n,
                "predicted": predicted_speedup(min(f, 0.999), u, m, n),
                "parts": _parts(r["metrics"]),
                "mixed_first_step": (s.get("first_step_group_fractions") or {}).get("mixed"),
            }
        )
    return rows


PARTS = ("gen", "update_actor", "optimizer", "step")


def _parts(metrics: list[dict]) -> dict[str, tuple[float, float]]:
    """Per part of a step: (wall seconds, CPU seconds) summed over the run; CPU NaN for older runs."""
    out = {}
    for part in PARTS:
        wall = sum(m.get(f"timing_s/{part}", 0.0) for m in metrics)
        cpu = [m.get(f"timing_cpu_s/{part}") for m in metrics]
        out[part] = (wall, sum(cpu) if all(c is not None for c in cpu) else float("nan"))
    return out


def fmt(value, spec=".2f") -> str:
    return "-" if value is None else format(value, spec)


def print_table(setting: str, rows: list[dict], time_key: str) -> None:
    print(
        f"\n{setting} (time = {time_key}, target = vanilla's peak held-out accuracy {rows[0]['target']:.3f})"
    )
    head = "variant          steps  time_s  s/step  acc0   best   t_target  speedup  epoch_x  f     u     m/n   pred"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['variant']:<16} {r['steps']:>5}  {r['time_s']:>6.0f}  {r['s_per_step']:>6.2f}  "
            f"{r['acc_initial']:.3f}  {r['acc_best']:.3f}  {fmt(r['time_to_target'], '8.0f'):>8}  "
            f"{fmt(r['speedup']):>7}  {r['epoch_time_ratio']:>7.2f}  {r['filter_rate']:.2f}  "
            f"{fmt(r['update_share'])}  {r['m_over_n']:.2f}  {r['predicted']:.2f}"
        )
    print("wall / CPU seconds per part (summed over the run)")
    print("variant          " + "  ".join(f"{p:>19}" for p in PARTS))
    for r in rows:
        cells = [f"{w:>9.1f} / {c:>7.1f}" for w, c in (r["parts"][p] for p in PARTS)]
        print(f"{r['variant']:<16} " + "  ".join(cells))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="config/config.yaml")
    p.add_argument("--results", help="a results/<run_id> tree with data/train/*.parquet and models/base")
    p.add_argument("--from-runs", help="read <dir>/<setting>/<variant>/ runs instead of training")
    p.add_argument(
        "--out", default="results/benchmarks/grpo_speedup", help="run dirs (results/ is git-ignored)"
    )
    p.add_argument("--settings", nargs="+", default=list(SETTINGS))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--time", choices=["cpu", "wall"], default="cpu", help="CPU-seconds resist other load")
    args = p.parse_args(argv)
    config = yaml.safe_load(Path(args.config).read_text())
    # the trainings below run in this process: the config's kernels, as a workflow job would (torch loads later)
    pin_kernels(config["engines"]["cpu_capability"])
    if args.from_runs:
        root = Path(args.from_runs)
    elif args.results:
        root = train_all(args, config)
    else:
        p.error("give --results (train now) or --from-runs (read finished runs)")
    time_key = "time/cumulative_device_s" if args.time == "cpu" else "time/cumulative_s"
    for setting in args.settings:
        runs = {
            v: read_run(root / setting / v)
            for v in args.variants
            if (root / setting / v / "summary.json").exists()
        }
        if runs:
            print_table(setting, setting_table(runs, config, setting, time_key), time_key)
    print(f"\n{describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
