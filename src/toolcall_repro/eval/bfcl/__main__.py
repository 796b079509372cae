"""`python -m toolcall_repro.eval.bfcl {generate,score,run,summarise}`: one process per (model, protocol, seed).

bfcl-eval reads BFCL_PROJECT_ROOT when first imported (and creates folders there), so this module sets
it to a private temporary folder before importing anything from bfcl-eval.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from toolcall_repro.io import atomic_write_json


def parse_limit(text: str) -> int | dict:
    """`--limit`: "N" for every category, or "N,category=M,..." with per-category caps (0 = all)."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if len(parts) == 1 and "=" not in parts[0]:
        return int(parts[0])
    limits: dict = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if sep:
            limits[key.strip()] = int(value)
        else:
            limits["default"] = int(key)
    return limits


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


def _categories(value: str) -> list[str]:
    cats = [c.strip() for c in value.split(",") if c.strip()]
    if not cats:
        raise argparse.ArgumentTypeError("empty category list")
    return cats


def _add_generation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-dir", required=True, help="Hugging Face model folder (weights + tokenizer)")
    p.add_argument("--model-tag", required=True, help="the model's name in results/ (e.g. base, rl-multi)")
    p.add_argument(
        "--protocol", required=True, help="protocol as inline JSON or a JSON/YAML file; 'id' names it"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="evaluation seed (must match the protocol's, if set)"
    )
    p.add_argument("--categories", type=_categories, required=True, help="comma-separated BFCL categories")
    p.add_argument(
        "--limit",
        type=parse_limit,
        default=0,
        help="first N entries of each category (0 = all), or N,category=M,... with per-category caps",
    )
    p.add_argument("--backend", choices=("transformers", "vllm"), default=None)
    p.add_argument("--threads", type=int, default=1, help="torch threads (transformers backend)")
    p.add_argument(
        "--workers", type=int, default=None, help="entries in flight (vllm: default 64; transformers: 1)"
    )
    p.add_argument(
        "--server-url", default=None, help="vllm: a running OpenAI-compatible server, e.g. http://h:8000/v1"
    )
    p.add_argument(
        "--gpus", type=int, default=1, help="vllm: tensor-parallel size when this job starts the server"
    )
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument(
        "--vllm-bin",
        default=None,
        help="vllm: the vLLM env's `vllm` to serve with (default: $VLLM_BIN, beside $VERL_PYTHON, PATH)",
    )
    p.add_argument(
        "--server-timeout-s",
        type=float,
        default=None,
        help="vllm: fail when the server does not answer within this many seconds (default 1800)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.eval.bfcl", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", help="write BFCL result files (bfcl layout) + card.json")
    _add_generation_args(g)
    g.add_argument("--out", required=True, help="result folder to create (replaced atomically)")

    s = sub.add_parser("score", help="score a result folder into one seed<k>.json score file")
    s.add_argument("--results", required=True, help="folder written by `generate`")
    s.add_argument("--protocol", default=None, help="if given, must equal the protocol of the results")
    s.add_argument("--out", required=True, help="score JSON to write")

    r = sub.add_parser("run", help="generate into --work-dir, then score into --out")
    _add_generation_args(r)
    r.add_argument("--work-dir", required=True, help="folder for the raw result files")
    r.add_argument("--out", required=True, help="score JSON to write")

    m = sub.add_parser(
        "summarise", help="mean/std/per-seed over the seed score files of one (model, protocol)"
    )
    m.add_argument("--inputs", nargs="+", required=True)
    m.add_argument("--out", required=True)
    return p


def config_limit(limit: int | dict | None) -> int | dict | None:
    """evaluate.bfcl.limit (the config's typed value) as `generate` takes it, as `--limit` gives it.

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


def generate_results(
    *,
    model_dir: str,
    model_tag: str,
    protocol: str | dict,
    seed: int | None,
    backend: str | None,
    categories: list[str],
    limit: int | dict | None,
    out_dir: str | Path,
    threads: int = 1,
    workers: int | None = None,
    server_url: str | None = None,
    gpus: int = 1,
    gpu_memory_utilization: float = 0.9,
    vllm_bin: str | None = None,
    serve_args: Sequence[str] = (),
    server_timeout_s: float | None = None,
):
    """BFCL result files (bfcl layout) + card.json in out_dir; the Protocol they were generated under.

    protocol: the workflow's spec (a dict, or inline JSON / a file as `--protocol` takes it; `id` names it).
    BFCL_PROJECT_ROOT must point at a private folder before this first imports bfcl-eval.
    """
    import torch

    from toolcall_repro.eval.bfcl.generate import generate

    torch.set_num_threads(threads)
    protocol_id, parsed = parse_protocol(protocol, seed, backend)
    generate(
        model_dir=model_dir,
        model_tag=model_tag,
        protocol=parsed,
        protocol_id=protocol_id,
        categories=categories,
        limit=limit or None,
        out_dir=Path(out_dir),
        threads=threads,
        workers=workers,
        server_url=server_url,
        gpus=gpus,
        gpu_memory_utilization=gpu_memory_utilization,
        vllm_bin=vllm_bin,
        serve_args=serve_args,
        server_timeout_s=server_timeout_s,
    )
    return parsed


def write_score(doc: dict, out: str) -> None:
    atomic_write_json(out, doc, ensure_ascii=True)
    s = doc["summary"]
    print(json.dumps({k: s[k] for k in ("multi_turn", "single_turn_mean_nl_l", "avg", "inference_errors")}))
    if s["inference_errors"]:
        print(f"warning: {s['inference_errors']} entries failed at inference (see card)", file=sys.stderr)


def run(*, work_dir: str, out: str, **generation) -> None:
    """Generate into work_dir/results, then score into the score file `out` (the CLI's `run`; the workflow
    does the two as generate_bfcl and score_bfcl)."""
    from toolcall_repro.eval.bfcl.runner import score_run

    results = Path(work_dir) / "results"
    protocol = generate_results(out_dir=results, **generation)
    write_score(score_run(results, protocol), out)


def generate_bfcl(j) -> None:
    """The generate_bfcl job (toolcall_repro.job): one (model, protocol, seed) generated, no scoring.

    config: {bfcl: evaluate.bfcl, protocol: its spec (seed and backend included), model: {tag, ...}};
    input.vllm (vLLM protocols): locate_vllm's record of the `vllm` to serve with. output.results: the raw
    result files in bfcl's layout with card.json and expected_ids.json (what score_bfcl reads).
    """
    from toolcall_repro.eval.bfcl.locate import recorded_serve_args, recorded_vllm

    print(f"BFCL_PROJECT_ROOT={_private_bfcl_root()}", file=sys.stderr)
    protocol = j.config["protocol"]
    location = j.paths("vllm")  # vllm protocols at paper scale: locate_vllm's record (the vLLM env's vllm)
    generate_results(
        model_dir=j.path("model"),
        model_tag=j.config["model"]["tag"],
        protocol=protocol,
        seed=j.seed("eval"),
        backend=protocol["backend"],
        categories=list(j.config["bfcl"]["categories"]),
        limit=config_limit(j.config["bfcl"]["limit"]),
        out_dir=j.out("results"),
        threads=int(j.option("threads")),
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd == "summarise":
        summarise(args.inputs, args.out)
        return 0

    print(f"BFCL_PROJECT_ROOT={_private_bfcl_root()}", file=sys.stderr)
    if args.cmd == "score":
        from toolcall_repro.eval.bfcl.runner import score_run

        protocol = parse_protocol(args.protocol, None, None)[1] if args.protocol else None
        write_score(score_run(args.results, protocol), args.out)
        return 0
    generation = {
        "model_dir": args.model_dir,
        "model_tag": args.model_tag,
        "protocol": args.protocol,
        "seed": args.seed,
        "backend": args.backend,
        "categories": args.categories,
        "limit": args.limit,
        "threads": args.threads,
        "workers": args.workers,
        "server_url": args.server_url,
        "gpus": args.gpus,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "vllm_bin": args.vllm_bin,
        "server_timeout_s": args.server_timeout_s,
    }
    if args.cmd == "generate":
        generate_results(out_dir=args.out, **generation)
    else:
        run(work_dir=args.work_dir, out=args.out, **generation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
