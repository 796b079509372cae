"""One training entry point for the train_grpo rule: the local CPU engine or verl at paper scale.

Both engines take the same inputs (normalised train/held-out parquet, start weights, the run's config
subtree) and write the same outputs (metrics.jsonl, curve.jsonl, summary.json, final/).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def local_command(args: argparse.Namespace) -> list[str]:
    return [
        "--train", args.train, "--heldout", args.heldout, "--base", args.base, "--config", args.config,
        "--out", args.out, "--seed", str(args.seed), "--threads", str(args.threads), "--resume",
    ]  # fmt: skip


def verl_command(args: argparse.Namespace) -> list[str]:
    verl = json.loads(args.verl)
    return [
        "bash", args.verl_launcher,
        "--train", args.train, "--heldout", args.heldout, "--base", args.base, "--config", args.config,
        "--verl-config", args.verl, "--out", args.out, "--seed", str(args.seed),
        "--nodes", str(args.nodes), "--gpus-per-node", str(verl["gpus_per_node"]),
    ]  # fmt: skip


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
    p.add_argument("--verl-launcher", default="workflow/scripts/verl/launch_verl.sh")
    args = p.parse_args(argv)
    if args.engine == "local":
        from toolcall_repro.engines.local import grpo  # torch/transformers only when training here

        return grpo.main(local_command(args))
    cmd = verl_command(args)
    print("engines.train:", " ".join(cmd), flush=True)
    os.execvp(cmd[0], cmd)  # the launcher owns the job from here (Ray, srun, finalize)
    return 0  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
