"""Run lm-evaluation-harness on one model and keep its results JSON as is, plus our summary.json.

Output directory:
  results.json      the harness's aggregated results, byte for byte as it wrote them (seeds, model args,
                    task configs, versions, n-shot, task hashes)
  samples/          the harness's per-document samples (JSONL)
  task/             the local task (YAML + JSONL data) when the local task runs
  summary.json      {"card", "results": [{task, metric, value, stderr, n_samples}], "task_hashes", ...}
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from toolcall_repro.data.schema import read_samples
from toolcall_repro.eval.general.tasks import LOCAL_TASK, expand_tasks, local_task_config, tool_choice_docs
from toolcall_repro.io import atomic_write_json, atomic_write_text, write_jsonl
from toolcall_repro.provenance import model_sha256, package_versions, sha256_file

BACKENDS = ("hf", "vllm")
SKIP_KEYS = {"alias", "name", "sample_len", " ", ""}


def model_args(
    backend: str,
    model_dir: str,
    *,
    dtype: str,
    device: str,
    seed: int,
    tensor_parallel: int = 1,
    engine_args: Mapping[str, Any] | None = None,
) -> str:
    """lm-eval model_args; the tokenizer is read from the model directory itself. vllm: `engine_args` go
    last (lm-eval passes keywords it does not know to vllm.LLM): the platform's, `backends.vllm.cpu_engine_args`."""
    if backend == "hf":
        return f"pretrained={model_dir},tokenizer={model_dir},dtype={dtype},device={device}"
    if backend == "vllm":
        return (
            f"pretrained={model_dir},tokenizer={model_dir},dtype={dtype},seed={seed},"
            f"tensor_parallel_size={tensor_parallel},gpu_memory_utilization=0.85"
            + "".join(f",{k}={v}" for k, v in (engine_args or {}).items())
        )
    raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")


def harness_metrics(results: dict, tasks: Sequence[str]) -> list[dict]:
    """The requested tasks' (or groups') metrics from the harness output: value, stderr, documents."""
    out = []
    for task in tasks:
        entry = results.get("results", {}).get(task)
        if entry is None:
            raise KeyError(f"lm-eval returned no results for task {task!r}")
        subtasks = results.get("group_subtasks", {}).get(task) or [task]
        n = sum(int((results.get("n-samples", {}).get(t) or {}).get("effective", 0)) for t in subtasks)
        for key, value in sorted(entry.items()):
            metric, _, filt = key.partition(",")
            if metric in SKIP_KEYS or metric.endswith("_stderr") or not isinstance(value, int | float):
                continue
            stderr = entry.get(f"{metric}_stderr,{filt}")
            out.append(
                {
                    "task": task,
                    "metric": metric if filt in ("none", "") else f"{metric},{filt}",
                    "value": float(value),
                    "stderr": float(stderr) if isinstance(stderr, int | float) else None,
                    "n_samples": n or None,
                }
            )
    return out


def build_local_task(data_files: Sequence[str], out_dir: Path, *, seed: int, num_choices: int) -> dict:
    """Write the local task (YAML + JSONL) into out_dir/task; return its description for the card."""
    if not data_files:
        raise ValueError("the local task needs data files (input.samples: normalised or training parquet files)")
    samples = [s for f in data_files for s in read_samples(f)]
    docs = tool_choice_docs(samples, num_choices=num_choices, seed=seed)
    if not docs.test:
        raise ValueError(f"no usable documents in {list(data_files)}; excluded: {dict(docs.excluded)}")
    task_dir = out_dir / "task"
    test, fewshot = task_dir / "test.jsonl", task_dir / "fewshot.jsonl"
    write_jsonl(docs.test, test)
    write_jsonl(docs.fewshot, fewshot)
    config = local_task_config(str(test.resolve()), str(fewshot.resolve()))
    atomic_write_text(task_dir / f"{LOCAL_TASK}.yaml", yaml.safe_dump(config, sort_keys=False))
    return {
        "task_dir": str(task_dir),
        "data_files": {str(f): sha256_file(f) for f in data_files},
        "test_docs": len(docs.test),
        "fewshot_docs": len(docs.fewshot),
        "excluded": dict(docs.excluded),
        "test_sha256": sha256_file(test),
        "num_choices": num_choices,
    }


def run_general_eval(
    model_dir: str,
    tasks: Sequence[str],
    out_dir: str | Path,
    *,
    num_fewshot: int | None,
    seed: int,
    limit: int | None = None,
    backend: str = "hf",
    device: str = "cpu",
    dtype: str = "auto",
    batch_size: int | str = 8,
    data_files: Sequence[str] = (),
    num_choices: int = 4,
    tensor_parallel: int = 1,
    model_tag: str | None = None,
) -> dict:
    """Evaluate one model on lm-eval tasks ('local' = our tool-choice task); write results + summary."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = expand_tasks(tasks)
    local = (
        build_local_task(data_files, out_dir, seed=seed, num_choices=num_choices)
        if LOCAL_TASK in names
        else None
    )
    if all(n == LOCAL_TASK for n in names):
        # The local task reads only files we wrote: nothing may reach the Hub.
        os.environ["HF_DATASETS_OFFLINE"] = os.environ["HF_HUB_OFFLINE"] = "1"

    from lm_eval import simple_evaluate  # heavy import, kept off module import
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    only_local = local is not None and len(names) == 1
    manager = TaskManager(include_path=local["task_dir"] if local else None, include_defaults=not only_local)
    harness_dir = out_dir / ".harness"
    shutil.rmtree(harness_dir, ignore_errors=True)
    tracker = EvaluationTracker(output_path=str(harness_dir))
    engine_args = {}
    if backend == "vllm":  # the job runs in the vLLM env
        from toolcall_repro.backends.vllm import cpu_engine_args

        engine_args = cpu_engine_args()
    args = model_args(
        backend,
        model_dir,
        dtype=dtype,
        device=device,
        seed=seed,
        tensor_parallel=tensor_parallel,
        engine_args=engine_args,
    )
    results = simple_evaluate(
        model=backend,
        model_args=args,
        tasks=names,
        num_fewshot=num_fewshot,
        batch_size=batch_size,
        limit=limit,
        task_manager=manager,
        evaluation_tracker=tracker,
        log_samples=True,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    if results is None:
        raise RuntimeError("lm-eval returned no results")
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task_name in results["configs"]:
        tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    written = sorted(harness_dir.rglob("results_*.json"))
    if len(written) != 1:
        raise RuntimeError(f"expected one harness results file under {harness_dir}, found {written}")
    shutil.move(written[0], out_dir / "results.json")  # the harness's own bytes, under a stable name
    shutil.rmtree(out_dir / "samples", ignore_errors=True)
    (out_dir / "samples").mkdir()
    for task_name in results["configs"]:
        for f in harness_dir.rglob(f"samples_{task_name}_{tracker.date_id}.jsonl"):
            shutil.move(f, out_dir / "samples" / f"{task_name}.jsonl")
    shutil.rmtree(harness_dir)
    kept = json.loads((out_dir / "results.json").read_text())
    summary = {
        "card": {
            "benchmark": "lm-evaluation-harness",
            "lm_eval_version": package_versions(["lm-eval"])["lm-eval"],
            "tasks": names,
            "task_versions": kept.get("versions", {}),
            "num_fewshot": num_fewshot,
            "n_shot": kept.get("n-shot", {}),
            "seeds": {"random": seed, "numpy": seed, "torch": seed, "fewshot": seed},
            "limit": limit,
            "backend": backend,
            "device": device,
            "dtype": dtype,
            "batch_size": batch_size,
            **(
                {"engine_args": engine_args} if backend == "vllm" else {}
            ),  # the platform's, beside model_args
            "model_tag": model_tag,
            "model_dir": str(model_dir),
            "model_sha256": model_sha256(model_dir),
            "local_task": local,
            "aggregation": "the harness's per-task metric (mean over documents) and its stderr",
        },
        "results": harness_metrics(kept, names),
        "task_hashes": kept.get("task_hashes", {}),
        "results_file": "results.json",
    }
    atomic_write_json(out_dir / "summary.json", summary)
    return summary
