"""CLI: `python -m toolcall_repro.eval.acebench ...` scores one model under one protocol and seed;
`... summarise --inputs seed*.json --out summary.json` aggregates seeds;
`... synthesize --out DIR --rows N --seed S` writes synthetic twins in ACEBench's schema (embedded default);
`... download --repo URL --commit SHA --out DIR` fetches the real English data at a pinned commit."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

from toolcall_repro.configarg import load_config_arg
from toolcall_repro.eval.acebench.agent.episode import MAX_MESSAGES
from toolcall_repro.eval.acebench.aggregate import summarise_seeds
from toolcall_repro.eval.acebench.data import ACEBenchDataError, resolve_categories
from toolcall_repro.eval.acebench.simulator import make_user_simulator
from toolcall_repro.io import atomic_write_json, atomic_write_text


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.eval.acebench", description=__doc__)
    p.add_argument("--data-dir", required=True, help="ACEBench data_all/data_en folder")
    p.add_argument("--model", required=True, help="HF model folder")
    p.add_argument(
        "--protocol",
        required=True,
        help="protocol as inline JSON or a JSON/YAML file (an `id` key is kept as protocol_id)",
    )
    p.add_argument("--seed", type=int, required=True)
    p.add_argument(
        "--categories", default="all", help="all, a group (normal, special, agent) or a comma list"
    )
    p.add_argument("--limit", type=int, default=0, help="first N entries of each category; 0 = all")
    p.add_argument(
        "--simulator", choices=("scripted", "openai"), default="scripted", help="user of agent_multi_turn"
    )
    p.add_argument(
        "--simulator-endpoint", default=None, help="OpenAI-compatible base URL (--simulator openai)"
    )
    p.add_argument("--simulator-model", default=None, help="model name at that endpoint (--simulator openai)")
    p.add_argument(
        "--simulator-key-env", default="OPENAI_API_KEY", help="environment variable holding the key"
    )
    p.add_argument(
        "--simulator-replies", type=int, default=3, help="answers the scripted user gives before finishing"
    )
    p.add_argument("--backend", default=None, help="generation backend (default: the protocol's)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-agent-messages", type=int, default=MAX_MESSAGES)
    p.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=None,
        help="longer prompts are not generated (empty answer, counted); default: the model's context minus "
        "max_tokens; 0 = no limit",
    )
    p.add_argument("--generations", default=None, help="also write every raw output here (JSONL)")
    p.add_argument("--out", required=True)
    return p


def run(argv: list[str]) -> int:
    args = _run_parser().parse_args(argv)
    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        print(f"error: no ACEBench data folder at {data_dir}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(max(1, args.threads))
    from toolcall_repro.backends import load_backend
    from toolcall_repro.eval.acebench import runner

    protocol, protocol_id = runner.protocol_from_spec(load_config_arg(args.protocol), args.seed)
    if args.backend:
        protocol = dataclasses.replace(protocol, backend=args.backend)
    categories = resolve_categories(args.categories)
    limit = args.limit or None
    simulator = None
    if "agent_multi_turn" in categories:
        if args.simulator == "openai":
            sim_config = {
                "base_url": args.simulator_endpoint,
                "model": args.simulator_model,
                "api_key_env": args.simulator_key_env,
                "seed": args.seed,
            }
        else:
            sim_config = {"replies": args.simulator_replies}
        simulator = make_user_simulator(args.simulator, sim_config)
    backend = load_backend(protocol.backend, args.model, threads=args.threads)
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model)
    budget = args.max_prompt_tokens
    if budget is None:
        budget = runner.context_budget(args.model, protocol.max_tokens)
    generate = runner.backend_generate_fn(backend, tokenizer, protocol, max_prompt_tokens=budget or None)
    scores, raw, tokens = runner.run_categories(
        data_dir, categories, generate, simulator, protocol.output_format, limit=limit,
        max_agent_messages=args.max_agent_messages, seed=protocol.seed, log=print,
    )  # fmt: skip
    doc = runner.score_document(
        data_dir=data_dir, model_dir=args.model, protocol=protocol, protocol_id=protocol_id, tokenizer=tokenizer,
        categories=categories, scores=scores, tokens=tokens, simulator=simulator, limit=limit,
        max_prompt_tokens=budget or None, max_agent_messages=args.max_agent_messages,
    )  # fmt: skip
    if args.generations:
        lines = [json.dumps({"category": c, **row}, ensure_ascii=False) for c in categories for row in raw[c]]
        atomic_write_text(args.generations, "\n".join(lines) + "\n")
    atomic_write_json(args.out, doc)
    keys = ("normal", "special", "agent", "overall", "agent_process")
    print(
        json.dumps(
            {
                "upstream": {k: doc["summary"][k] for k in keys},
                "fixed": {k: doc["summary_fixed"][k] for k in keys},
            }
        )
    )
    return 0


def summarise(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m toolcall_repro.eval.acebench summarise")
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    docs = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.inputs]
    atomic_write_json(args.out, summarise_seeds(docs))
    return 0


def synthesize_cmd(argv: list[str]) -> int:
    from toolcall_repro.eval.acebench.synthetic import synthesize

    p = argparse.ArgumentParser(prog="python -m toolcall_repro.eval.acebench synthesize")
    p.add_argument("--out", required=True)
    p.add_argument("--rows", type=int, required=True, help="entries (dialogues) per category")
    p.add_argument("--seed", type=int, required=True)
    args = p.parse_args(argv)
    out = Path(args.out)
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    counts = synthesize(tmp, args.rows, args.seed)
    (tmp / "source.json").write_text(
        json.dumps({"kind": "synthetic", "seed": args.seed, "rows": args.rows, "lines": counts}, indent=2)
        + "\n"
    )
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)  # the folder appears only when complete
    print(json.dumps(counts))
    return 0


def download_cmd(argv: list[str]) -> int:
    from toolcall_repro.eval.acebench.download import download_acebench

    p = argparse.ArgumentParser(prog="python -m toolcall_repro.eval.acebench download")
    p.add_argument("--repo", required=True, help="e.g. https://github.com/<owner>/ACEBench")
    p.add_argument("--commit", required=True, help="full 40-hex commit sha")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    print(json.dumps(download_acebench(args.repo, args.commit, args.out)))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["summarise"]:
            return summarise(argv[1:])
        if argv[:1] == ["synthesize"]:
            return synthesize_cmd(argv[1:])
        if argv[:1] == ["download"]:
            return download_cmd(argv[1:])
        return run(argv[1:] if argv[:1] == ["run"] else argv)
    except (ACEBenchDataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
