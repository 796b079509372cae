"""The BFCL jobs (generate_bfcl, score_bfcl, summarise_bfcl): one process per (model, protocol, seed).

bfcl-eval reads BFCL_PROJECT_ROOT when first imported (and creates folders there), so this module sets
it to a private temporary folder before importing anything from bfcl-eval.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from toolcall_repro.io import atomic_write_json


def _private_bfcl_root() -> str:
    root = tempfile.mkdtemp(prefix="bfcl_root_")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    os.environ["BFCL_PROJECT_ROOT"] = root
    return root


def parse_protocol(value: str | dict, seed: int | None, backend: str | None):
    """`--protocol` (inline JSON or a JSON/YAML file, or the spec itself) -> (protocol id, Protocol).

    `id` names it in paths.
    """
    from toolcall_repro.configarg import load_config_arg
    from toolcall_repro.protocol import Protocol

    spec = dict(value) if isinstance(value, dict) else dict(load_config_arg(value))
    protocol_id = str(spec.pop("id", spec.get("system_prompt", "protocol")))
    for key, given in (("seed", seed), ("backend", backend)):
        if given is None:
            continue
        if key in spec and spec[key] != given:
            raise ValueError(f"--{key} {given!r} contradicts the protocol's {key} {spec[key]!r}")
        spec[key] = given
    return protocol_id, Protocol.from_dict(spec)


def config_limit(limit: int | dict | None) -> int | dict | None:
    """evaluate.bfcl.limit (the config's typed value) as `generate` takes it.

    null/0 = all; N; or {default: N, <category>: M, ...} (a null cap is 0, all), the caps in name order;
    a dict with no per-category cap is its default alone.
    """
    if not isinstance(limit, dict):
        return int(limit or 0) or None
    caps = {k: int(v or 0) for k, v in sorted(limit.items()) if k != "default"}
    default = int(limit.get("default") or 0)
    if not caps:
        return default or None
    return {"default": default, **caps}


def summarise(inputs: list[str], out: str) -> None:
    """mean/std/per-seed over the seed score files of one (model, protocol)."""
    from toolcall_repro.eval.seeds import summarise_seeds

    docs = [json.loads(Path(f).read_text()) for f in inputs]
    atomic_write_json(out, summarise_seeds(docs), ensure_ascii=True)


def write_score(doc: dict, out: str) -> None:
    atomic_write_json(out, doc, ensure_ascii=True)
    s = doc["summary"]
    print(json.dumps({k: s[k] for k in ("multi_turn", "single_turn_mean_nl_l", "avg", "inference_errors")}))
    if s["inference_errors"]:
        print(f"warning: {s['inference_errors']} entries failed at inference (see card)", file=sys.stderr)


def generate_bfcl(j) -> None:
    """The generate_bfcl job (toolcall_repro.job): one (model, protocol, seed) generated, no scoring.

    config: {bfcl: evaluate.bfcl, protocol: its spec (seed and backend included), model: {tag, ...}};
    input.vllm (vLLM protocols): locate_vllm's record of the `vllm` to serve with (the GPUs the job holds,
    at least one, and option gpu_memory_utilization, default 0.9, size the server). seeds.eval; option
    threads. output.results: the raw result files in bfcl's layout with card.json and expected_ids.json
    (what score_bfcl reads).
    """
    from toolcall_repro.eval.bfcl.locate import recorded_serve_args, recorded_vllm

    print(f"BFCL_PROJECT_ROOT={_private_bfcl_root()}", file=sys.stderr)
    import torch

    from toolcall_repro.eval.bfcl.generate import generate

    threads = int(j.option("threads"))
    torch.set_num_threads(threads)
    protocol_id, protocol = parse_protocol(j.config["protocol"], j.seed("eval"), j.config["protocol"]["backend"])
    location = j.paths("vllm")  # vllm protocols at paper scale: locate_vllm's record (the vLLM env's vllm)
    generate(
        model_dir=j.path("model"),
        model_tag=j.config["model"]["tag"],
        protocol=protocol,
        protocol_id=protocol_id,
        categories=list(j.config["bfcl"]["categories"]),
        limit=config_limit(j.config["bfcl"]["limit"]),
        out_dir=Path(j.out("results")),
        threads=threads,
        gpus=max(1, j.gpus),
        gpu_memory_utilization=float(j.option("gpu_memory_utilization", 0.9)),
        vllm_bin=recorded_vllm(location[0]) if location else None,
        serve_args=recorded_serve_args(location[0]) if location else (),
        server_timeout_s=j.config["bfcl"].get("server_timeout_s"),
    )


def score_bfcl(j) -> None:
    """The score_bfcl job (toolcall_repro.job): one seed's raw results (input.results, generate_bfcl's)
    scored by bfcl-eval's checkers into the score file; no model. config: {protocol: its spec}, which
    must be the one the results were generated under."""
    from toolcall_repro.eval.bfcl.runner import score_run

    print(f"BFCL_PROJECT_ROOT={_private_bfcl_root()}", file=sys.stderr)
    protocol = j.config["protocol"]
    _, parsed = parse_protocol(protocol, j.seed("eval"), protocol["backend"])
    write_score(score_run(j.path("results"), parsed), j.out("score"))


def summarise_bfcl(j) -> None:
    """The summarise_bfcl and summarise_bfcl_variance jobs: the seed files of input.seeds."""
    summarise(j.paths("seeds"), j.out("summary"))
