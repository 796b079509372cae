"""General capability (lm-eval): the check_general_capability job (`toolcall-repro stage
check_general_capability --describe`)."""

from __future__ import annotations

import os
from collections.abc import Sequence


def _batch_size(value: str | None, backend: str) -> int | str:
    if value is None:
        return "auto" if backend == "vllm" else 8
    return int(value) if value.isdigit() else value


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
    limit 0/None = all, device cuda when available, batch size by backend."""
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
    {tag, ...}}, the harness seed as seeds.eval, the backend (engines.generation) as an option; input.model,
    input.samples (the local task's data); output.summary (its folder gets results.json and samples/).

    Torch runs on one thread and the summary's card leaves model_tag unset (as the rule always ran it).
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
