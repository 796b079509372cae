"""The filter stage's jobs (filter_single_turn, filter_multi_turn, subset_format_study, pool_tooln1):
files and models in, files out; the decisions themselves live in `filters.py`. By hand, e.g.

    toolcall-repro stage pool_tooln1 --in samples=xlam.parquet --in samples=toolace.parquet \
        --config '{"heldout_fraction": 0.15, "reserve_fraction": 0.0}' --seed filter=0 \
        --out train=T.parquet --out heldout=H.parquet --out report=pool.json
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from toolcall_repro.data import filters
from toolcall_repro.data.schema import read_samples, write_samples
from toolcall_repro.io import atomic_write_json
from toolcall_repro.provenance import sha256_file


def _read_all(paths: list[str]) -> tuple[list, list[dict]]:
    samples, inputs = [], []
    for path in paths:
        part = read_samples(path)
        samples.extend(part)
        inputs.append({"path": path, "sha256": sha256_file(path), "samples": len(part)})
    return samples, inputs


def _write_outputs(report: dict, outputs: dict[str, tuple[str, list]], report_path: str | None) -> None:
    report["outputs"] = {}
    for name, (path, samples) in outputs.items():
        write_samples(samples, path)
        report["outputs"][name] = {"path": path, "sha256": sha256_file(path), "samples": len(samples)}
    if report_path:
        atomic_write_json(report_path, report)


def rollout_filter(
    setting: str,
    *,
    inputs: list[str],
    policy: str,
    backend: str,
    config: dict,
    seed: int,
    out_train: str,
    out_heldout: str,
    report_path: str | None,
    threads: int = 1,
) -> dict:
    """One rollout filter chain (`filters.filter_single_turn` / `filter_multi_turn`), files in and out.

    Completed rollout chunks are kept beside the report (`<report>.chunks/`, removed once the outputs
    are written): a retried job continues after its last complete chunk.
    """
    import torch

    from toolcall_repro.data.rollouts import (
        ChunkStore,
        load_policy,
        make_protocol,
        make_renderer,
        policy_fingerprint,
        run_rollouts,
    )

    torch.set_num_threads(threads)  # 1 thread per job is fastest on a shared 2-core machine
    samples, input_records = _read_all(inputs)
    engine, tokenizer = load_policy(backend, policy, threads)
    protocol = make_protocol(config, seed, backend)
    render = make_renderer(protocol, tokenizer)
    timing = {"rollout_s": 0.0}
    store = None
    if report_path:
        run_key = {"setting": setting, "policy": policy_fingerprint(policy), "backend": backend,
                   "config": config, "seed": seed}  # fmt: skip
        store = ChunkStore(chunks_folder(report_path), json.dumps(run_key, sort_keys=True, default=str))

    def score(batch):
        start = time.perf_counter()
        out = run_rollouts(
            batch,
            engine,
            render,
            int(config["rollouts"]),
            temperature=float(config["temperature"]),
            top_p=float(config["top_p"]),
            max_tokens=int(config["max_new_tokens"]),
            seed=seed,
            batch_size=int(config.get("batch_size", 16)),
            store=store,
            log=lambda m: print(m, flush=True),
            label=f"{setting} filter rollouts",
        )
        timing["rollout_s"] += time.perf_counter() - start
        if store and store.reused:
            print(f"rollouts: {len(store.reused)} complete chunk(s) of an earlier attempt reused ({store.folder})")
        return out

    def prompt_tokens(sample) -> int:
        return len(tokenizer(render(sample), add_special_tokens=False)["input_ids"])

    chain = filters.filter_single_turn if setting == "single_turn" else filters.filter_multi_turn
    train, heldout, report = chain(samples, config, seed, score, prompt_tokens)
    report.update(
        config=config,
        seed=seed,
        inputs=input_records,
        policy={"path": policy, "backend": backend},
        protocol=_card(protocol, tokenizer),
        rollout_seconds=round(timing["rollout_s"], 3),
    )
    _write_outputs(report, {"train": (out_train, train), "heldout": (out_heldout, heldout)}, report_path)
    if store:
        shutil.rmtree(store.folder, ignore_errors=True)
    return report


def chunks_folder(report_path: str | Path) -> Path:
    """Where a rollout filter keeps its completed chunks until its outputs are written."""
    report_path = Path(report_path)
    return report_path.with_name(report_path.stem + ".chunks")


def _card(protocol, tokenizer) -> dict:
    from toolcall_repro.protocol import protocol_card

    return protocol_card(protocol, tokenizer)


def format_subsets(
    *, single: str, multi: str, config: dict, seed: int, out_single: str, out_multi: str, report_path: str
) -> dict:
    a, b, report = filters.format_subsets(read_samples(single), read_samples(multi), int(config["size"]), seed)
    report.update(setting="format_study", config=config, seed=seed)
    _write_outputs(report, {"format_single": (out_single, a), "format_multi": (out_multi, b)}, report_path)
    return report


def pool(
    *, inputs: list[str], config: dict, seed: int, out_train: str, out_heldout: str, report_path: str | None
) -> dict:
    samples, input_records = _read_all(inputs)
    train, heldout, report = filters.pool_samples(samples, config, seed)
    report.update(config=config, seed=seed, inputs=input_records)
    _write_outputs(report, {"train": (out_train, train), "heldout": (out_heldout, heldout)}, report_path)
    return report


def _print_report(report: dict) -> None:
    for step in report.get("steps", []):
        print(f"{step['step']:>22}: {step['in']:>6} -> {step['out']:>6}  {step['dropped']}")
    print({k: v["samples"] for k, v in report["outputs"].items()})


# --- the jobs of filter.smk (toolcall_repro.job): config is the chain's subtree, seeds {"filter": S} ---


def _rollout_job(j, setting: str) -> None:
    _print_report(
        rollout_filter(
            setting,
            inputs=j.paths("samples"),
            policy=j.path("policy"),
            backend=j.option("backend"),
            config=j.config,
            seed=j.seed("filter"),
            out_train=j.out("train"),
            out_heldout=j.out("heldout"),
            report_path=j.out("report"),
            threads=int(j.option("threads")),
        )
    )


def filter_single_turn(j) -> None:
    """The single-turn filter (xLAM + ToolACE: keep what the policy gets right sometimes): input.samples,
    input.policy (a model folder), config filter.single_turn with the held-out split, seeds.filter,
    options backend and threads; output train, heldout, report."""
    _rollout_job(j, "single_turn")


def filter_multi_turn(j) -> None:
    """The multi-turn filter (LoopTool: turn range, single-call answers, >= k correct rollouts): as
    filter_single_turn, with config filter.multi_turn."""
    _rollout_job(j, "multi_turn")


def subset_format_study(j) -> None:
    """Matched single- vs multi-turn subsets (the format study): input single, multi; config {size};
    seeds.filter; output single, multi, report."""
    _print_report(
        format_subsets(
            single=j.path("single"),
            multi=j.path("multi"),
            config=j.config,
            seed=j.seed("filter"),
            out_single=j.out("single"),
            out_multi=j.out("multi"),
            report_path=j.out("report"),
        )
    )


def pool_tooln1(j) -> None:
    """An unfiltered pool with a held-out split: input.samples; config {heldout_fraction | heldout_size,
    reserve_fraction}; seeds.filter; output train, heldout, report."""
    _print_report(
        pool(
            inputs=j.paths("samples"),
            config=j.config,
            seed=j.seed("filter"),
            out_train=j.out("train"),
            out_heldout=j.out("heldout"),
            report_path=j.out("report"),
        )
    )


