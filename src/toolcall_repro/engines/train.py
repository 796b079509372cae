"""One training entry point for the train_grpo rule: the local CPU engine or verl at paper scale.

Both engines take the same inputs (normalised train/held-out parquet, start weights, the run's config
subtree) and write the same outputs (metrics.jsonl, curve.jsonl, summary.json, final/).

The rule runs `job(j)` through the job entry (toolcall_repro.job): the local engine gets the typed run
config in-process; verl's launcher is a bash script and a process of its own (Ray, srun, finalize), so
it alone gets an argv (`verl_command`). `main(argv)` is the same for humans.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from toolcall_repro.io import compact_json

LAUNCHER = "workflow/scripts/verl/launch_verl.sh"


def train_local(
    *, train: str, heldout: str, base: str, config: dict, out: str, seed: int, threads: int
) -> int:
    """The local CPU GRPO run; it resumes from its own checkpoints (a rerun of the job continues)."""
    from toolcall_repro.engines.local import grpo  # torch/transformers only when training here
    from toolcall_repro.engines.local.config import parse_config

    summary = grpo.train_grpo(
        train=train,
        heldout=heldout,
        base=base,
        config=parse_config(config),
        out=out,
        seed=seed,
        threads=threads,
        resume=True,
        log=lambda msg: print(msg, flush=True),
    )
    print(grpo.summary_line(summary), flush=True)
    return 0


def verl_command(
    *,
    train: str,
    heldout: str,
    base: str,
    config: dict,
    verl: dict,
    out: str,
    seed: int,
    nodes: int,
    launcher: str = LAUNCHER,
) -> list[str]:
    """The verl launcher's argv (workflow/scripts/verl/launch_verl.sh: a bash script, its own argv)."""
    return [
        "bash", launcher,
        "--train", train, "--heldout", heldout, "--base", base, "--config", compact_json(config),
        "--verl-config", compact_json(verl), "--out", out, "--seed", str(seed),
        "--nodes", str(nodes), "--gpus-per-node", str(verl["gpus_per_node"]),
    ]  # fmt: skip


def train_verl(**kwargs) -> int:
    """Run the verl launcher (it owns the job: Ray, srun, finalize) and return its exit status."""
    cmd = verl_command(**kwargs)
    print("engines.train:", " ".join(cmd), flush=True)
    return subprocess.call(cmd)


def job_verl_command(j) -> list[str]:
    """The launcher argv of a train_grpo job (engine verl)."""
    return verl_command(**_verl_kwargs(j))


def _common(j) -> dict:
    return {
        "train": j.path("train"),
        "heldout": j.path("heldout"),
        "base": j.path("base"),
        "config": j.config,
        "out": os.path.dirname(j.out("summary")),
        "seed": j.seed("train"),
    }


def _verl_kwargs(j) -> dict:
    return {
        **_common(j),
        "verl": j.option("verl"),
        "nodes": int(j.option("nodes")),
        "launcher": j.option("launcher", LAUNCHER),
    }


def train_grpo(j) -> int:
    """The train_grpo job: config is the run config (runconfig.compose_run), seeds {"train": S}."""
    engine = j.option("engine")
    if engine == "local":
        return train_local(**_common(j), threads=int(j.option("threads")))
    if engine == "verl":
        return train_verl(**_verl_kwargs(j))
    raise ValueError(f"{j.rule}: option engine {engine!r} is not one of ['local', 'verl']")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.engines.train")
    p.add_argument("--engine", choices=["local", "verl"], required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--heldout", required=True)
    p.add_argument("--base", required=True)
    p.add_argument("--config", required=True, help="the run's config subtree (inline JSON)")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--verl", default='{"nodes": 1, "gpus_per_node": 8}', help="train.verl as JSON")
    p.add_argument("--verl-launcher", default=LAUNCHER)
    args = p.parse_args(argv)
    common = {"train": args.train, "heldout": args.heldout, "base": args.base,
              "config": json.loads(args.config), "out": args.out, "seed": args.seed}  # fmt: skip
    if args.engine == "local":
        return train_local(**common, threads=args.threads)
    return train_verl(
        **common, verl=json.loads(args.verl), nodes=args.nodes, launcher=args.verl_launcher
    )


if __name__ == "__main__":
    sys.exit(main())
