"""`python -m toolcall_repro.engines.verl {prepare,train,finalize}`: the steps of one verl training job.

The launch scripts (workflow/scripts/verl/) call them in order: `prepare` on the batch host,
`train` as the Ray driver (after `ray start` on every node for several nodes), `finalize` at the end.
A resubmitted job runs the same three: `prepare` finds the run's newest complete checkpoint and the
override file it writes makes `train` resume from it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from toolcall_repro.configarg import load_config_arg


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.engines.verl")
    sub = p.add_subparsers(dest="cmd", required=True)
    prep = sub.add_parser(
        "prepare", help="verl parquets + Hydra override file, validated against verl's schema"
    )
    prep.add_argument("--train", required=True, help="normalised training parquet")
    prep.add_argument("--heldout", required=True, help="normalised held-out parquet")
    prep.add_argument("--base", required=True, help="base model directory (Hugging Face layout)")
    prep.add_argument("--config", required=True, help="run config: inline JSON or a JSON/YAML file")
    prep.add_argument(
        "--verl-config", default=None, help="train.verl subtree (JSON/YAML); may sit in --config"
    )
    prep.add_argument("--out", required=True, help="the run's output directory (train/<setting>/<variant>)")
    prep.add_argument("--seed", type=int, required=True)
    prep.add_argument("--nodes", type=int, default=None)
    prep.add_argument("--gpus-per-node", type=int, default=None)
    prep.add_argument("--job-start-s", type=float, default=None, help="the job's start (Unix seconds)")
    train = sub.add_parser("train", help="run verl (Ray driver) with the prepared override file")
    train.add_argument("--out", required=True)
    fin = sub.add_parser("finalize", help="metrics.jsonl, curve.jsonl, summary.json and final/ from the run")
    fin.add_argument("--out", required=True)
    fin.add_argument("--job-start-s", type=float, required=True, help="the job's start (Unix seconds)")
    fin.add_argument("--no-merge", action="store_true", help="skip the FSDP -> Hugging Face merge")
    wait = sub.add_parser("wait-ray", help="wait until a Ray cluster shows the nodes and GPUs asked for")
    wait.add_argument("--address", required=True)
    wait.add_argument("--nodes", type=int, required=True)
    wait.add_argument("--gpus", type=int, required=True)
    wait.add_argument("--timeout-s", type=float, default=600.0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import torch

    # The driver only shuffles data and computes advantages; workers set their own threads.
    torch.set_num_threads(1)
    from toolcall_repro.engines.verl import hydra, launch

    if args.cmd == "prepare":
        overrides = launch.prepare(
            train=args.train,
            heldout=args.heldout,
            base=args.base,
            config=load_config_arg(args.config),
            verl_config=load_config_arg(args.verl_config) if args.verl_config else None,
            out=args.out,
            seed=args.seed,
            nodes=args.nodes,
            gpus_per_node=args.gpus_per_node,
            job_start_s=args.job_start_s,
        )
        print(f"prepared {len(overrides)} overrides in {Path(args.out) / 'verl' / launch.OVERRIDES}")
        return 0
    if args.cmd in ("train", "finalize"):
        # train.verl.device: cpu needs its platform before verl is imported (here and in Ray's workers)
        run_json = json.loads((Path(args.out) / "verl" / launch.RUN_JSON).read_text())
        os.environ.update(hydra.device_environment(run_json["verl"]))
    if args.cmd == "train":
        from toolcall_repro.engines.verl.main import train

        text = (Path(args.out) / "verl" / launch.OVERRIDES).read_text()
        train(hydra.read_overrides(text))
        return 0
    if args.cmd == "wait-ray":
        launch.wait_for_ray(args.address, args.nodes, args.gpus, args.timeout_s)
        return 0
    result = launch.finalize(out=args.out, job_start_s=args.job_start_s, merge=not args.no_merge)
    print(json.dumps({k: result[k] for k in ("steps", "gpu_hours", "final_heldout_accuracy")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
