"""CLI: python -m toolcall_repro.eval.general --model-dir DIR --tasks local|mmlu,... --out DIR [...]."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def _shots(value: str) -> int | None:
    return None if value.lower() in ("none", "null", "default") else int(value)


def _batch_size(value: str | None, backend: str) -> int | str:
    if value is None:
        return "auto" if backend == "vllm" else 8
    return int(value) if value.isdigit() else value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.eval.general")
    p.add_argument("--model-dir", required=True, help="HF model directory (weights + tokenizer)")
    p.add_argument("--model-tag", default=None, help="the evaluation model tag (base, rl-multi, ...)")
    p.add_argument("--tasks", required=True, help="comma list: 'local' and/or lm-eval task or group names")
    p.add_argument(
        "--num-fewshot",
        type=_shots,
        default=None,
        help="shots for every task; 'none' or absent: each task's own",
    )
    p.add_argument("--seed", type=int, required=True, help="harness random/numpy/torch/few-shot seed")
    p.add_argument("--limit", type=int, default=0, help="documents per task (0 = all)")
    p.add_argument(
        "--data",
        "--local-source",
        nargs="*",
        default=[],
        help="normalised-sample parquet files for the local task",
    )
    p.add_argument("--num-choices", type=int, default=4, help="tool names offered per local document")
    p.add_argument(
        "--backend", choices=["hf", "transformers", "vllm"], default="hf", help="transformers = hf"
    )
    p.add_argument(
        "--device", default=None, help="hf backend device (default: cuda when available, else cpu)"
    )
    p.add_argument("--dtype", default="auto", help="model dtype; auto = the checkpoint's own")
    p.add_argument(
        "--batch-size", default=None, help="an integer or 'auto' (default: 8 for hf, auto for vllm)"
    )
    p.add_argument("--tensor-parallel", type=int, default=1, help="vllm: GPUs per model")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--out", required=True, help="output directory (results.json, summary.json, ...)")
    a = p.parse_args(argv)
    evaluate(
        a.model_dir,
        a.tasks,
        a.out,
        num_fewshot=a.num_fewshot,
        seed=a.seed,
        limit=a.limit,
        data_files=a.data,
        num_choices=a.num_choices,
        backend=a.backend,
        device=a.device,
        dtype=a.dtype,
        batch_size=a.batch_size,
        tensor_parallel=a.tensor_parallel,
        threads=a.threads,
        model_tag=a.model_tag,
    )
    return 0


def evaluate(
    model_dir: str,
    tasks: str,
    out: str,
    *,
    num_fewshot: int | None,
    seed: int,
    limit: int | None = 0,
    data_files: Sequence[str] = (),
    num_choices: int = 4,
    backend: str = "hf",
    device: str | None = None,
    dtype: str = "auto",
    batch_size: str | None = None,
    tensor_parallel: int = 1,
    threads: int = 1,
    model_tag: str | None = None,
) -> dict:
    """One model on lm-eval tasks (comma list, 'local' = our tool-choice task) into the folder `out`,
    with the CLI's defaults: limit 0/None = all, device cuda when available, batch size by backend."""
    import torch

    torch.set_num_threads(threads)
    from toolcall_repro.eval.general.runner import run_general_eval

    summary = run_general_eval(
        model_dir,
        [t.strip() for t in tasks.split(",") if t.strip()],
        out,
        num_fewshot=num_fewshot,
        seed=seed,
        limit=limit or None,
        backend="hf" if backend == "transformers" else backend,
        device=device or ("cuda" if torch.cuda.is_available() else "cpu"),
        dtype=dtype,
        batch_size=_batch_size(batch_size, backend),
        data_files=list(data_files),
        num_choices=num_choices,
        tensor_parallel=tensor_parallel,
        model_tag=model_tag,
    )
    for r in summary["results"]:
        err = "" if r["stderr"] is None else f" ± {r['stderr']:.4f}"
        print(f"{r['task']} {r['metric']}: {r['value']:.4f}{err} (n={r['n_samples']})")
    return summary


def check_general_capability(j) -> None:
    """The check_general_capability job (toolcall_repro.job): config {general: evaluate.general, model:
    {tag, ...}}, the harness seed as seeds.eval, the backend (engines.generation) as an option.

    As the rule's CLI call did, torch runs on the CLI's default of one thread and the summary's card
    leaves model_tag unset.
    """
    general = j.config["general"]
    evaluate(
        j.path("model"),
        general["tasks"],
        os.path.dirname(j.out("summary")),
        num_fewshot=general["num_fewshot"],
        seed=j.seed("eval"),
        limit=general["limit"],
        data_files=j.paths("samples"),
        backend=j.option("backend"),
    )


if __name__ == "__main__":
    sys.exit(main())
