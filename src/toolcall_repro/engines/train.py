"""One training entry point for the train_grpo rule: the local CPU engine or verl at paper scale.

Both engines take the same inputs (normalised train/held-out parquet, start weights, the run's config
subtree) and write the same outputs (metrics.jsonl, curve.jsonl, summary.json, final/).

The rule runs `job(j)` through the job entry (toolcall_repro.job): the local engine gets the typed run
config in-process; verl's launcher is a bash script and a process of its own (Ray, srun, finalize), so
it alone gets an argv (`verl_command`). By hand: `toolcall-repro stage train_grpo ...`.
"""

from __future__ import annotations

import os
import subprocess

from toolcall_repro.io import compact_json

LAUNCHER = "workflow/scripts/verl/launch_verl.sh"


def train_local(
    *,
    train: str,
    heldout: str,
    base: str,
    config: dict,
    out: str,
    seed: int,
    threads: int,
    trackers: tuple[str, ...] = (),
) -> int:
    """The local CPU GRPO run; it resumes from its own checkpoints (a rerun of the job continues);
    trackers: live curves beside its outputs (config engines.tracking: TensorBoard under tensorboard/)."""
    from toolcall_repro.engines.local import grpo  # torch/transformers only when training here

    summary = grpo.train_grpo(
        train=train,
        heldout=heldout,
        base=base,
        config=grpo.parse_config(config),
        out=out,
        seed=seed,
        threads=threads,
        resume=True,
        log=lambda msg: print(msg, flush=True),
        trackers=tuple(trackers),
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
    """The train_grpo job (and train_grpo_seed): input train, heldout (parquet), base (a model folder);
    config the run config (runconfig.compose_run); seeds.train; option engine (local | verl) and, local,
    threads; verl: verl (train.verl), nodes, launcher. Outputs lie beside output.summary (metrics.jsonl,
    curve.jsonl, final/); a rerun continues from the run's own checkpoints."""
    engine = j.option("engine")
    if engine == "local":
        return train_local(
            **_common(j), threads=int(j.option("threads")), trackers=tuple(j.option("trackers", ()))
        )
    if engine == "verl":
        return train_verl(**_verl_kwargs(j))
    raise ValueError(f"{j.rule}: option engine {engine!r} is not one of ['local', 'verl']")
