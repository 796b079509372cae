"""The ACEBench jobs: score_acebench scores one model under one protocol and seed; summarise_acebench
aggregates seeds; synthesize_acebench writes synthetic twins in ACEBench's schema (embedded default);
download_acebench fetches the real English data at a pinned commit (by hand: `toolcall-repro stage`)."""

from __future__ import annotations

import dataclasses
import functools
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


def score(
    *,
    data_dir: str | Path,
    model: str,
    protocol: str | dict,
    seed: int,
    out: str,
    categories: str | list[str] = "all",
    limit: int | None = None,
    simulator: str = "scripted",
    simulator_endpoint: str | None = None,
    simulator_model: str | None = None,
    simulator_key_env: str = "OPENAI_API_KEY",
    simulator_replies: int = 3,
    backend: str | None = None,
    threads: int = 1,
    max_agent_messages: int = MAX_MESSAGES,
    max_prompt_tokens: int | None = None,
    generations: str | None = None,
) -> int:
    """Score one model under one protocol and seed into the score file `out`.

    protocol: the workflow's spec (a dict, or inline JSON / a file as `--protocol` takes it; `id` kept).
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        print(f"error: no ACEBench data folder at {data_dir}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(max(1, threads))
    from toolcall_repro.backends import load_backend
    from toolcall_repro.eval.acebench import runner

    spec = dict(protocol) if isinstance(protocol, dict) else load_config_arg(protocol)
    protocol, protocol_id = runner.protocol_from_spec(spec, seed)
    if backend:
        protocol = dataclasses.replace(protocol, backend=backend)
    categories = resolve_categories(categories)
    limit = limit or None
    user = None
    if "agent_multi_turn" in categories:
        if simulator == "openai":
            sim_config = {
                "base_url": simulator_endpoint,
                "model": simulator_model,
                "api_key_env": simulator_key_env,
                "seed": seed,
            }
        else:
            sim_config = {"replies": simulator_replies}
        user = make_user_simulator(simulator, sim_config)
    loaded = load_backend(protocol.backend, model, threads=threads)
    tokenizer = getattr(loaded, "tokenizer", None)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    budget = max_prompt_tokens
    if budget is None:
        budget = runner.context_budget(model, protocol.max_tokens)
    generate = runner.backend_generate_fn(loaded, tokenizer, protocol, max_prompt_tokens=budget or None)
    scores, raw, tokens = runner.run_categories(
        data_dir, categories, generate, user, protocol.output_format, limit=limit,
        max_agent_messages=max_agent_messages, seed=protocol.seed, log=print,
    )  # fmt: skip
    doc = runner.score_document(
        data_dir=data_dir, model_dir=model, protocol=protocol, protocol_id=protocol_id, tokenizer=tokenizer,
        categories=categories, scores=scores, tokens=tokens, simulator=user, limit=limit,
        max_prompt_tokens=budget or None, max_agent_messages=max_agent_messages,
    )  # fmt: skip
    if generations:
        lines = [json.dumps({"category": c, **row}, ensure_ascii=False) for c in categories for row in raw[c]]
        atomic_write_text(generations, "\n".join(lines) + "\n")
    atomic_write_json(out, doc)
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


def summarise_files(inputs: list[str], out: str) -> None:
    docs = [json.loads(Path(f).read_text(encoding="utf-8")) for f in inputs]
    atomic_write_json(out, summarise_seeds(docs))


def synthesize_folder(out: str | Path, rows: int, seed: int) -> None:
    """Synthetic twins in ACEBench's layout, `rows` entries per category; the folder appears only when
    complete (with source.json recording kind, seed, rows and lines per file)."""
    from toolcall_repro.eval.acebench.synthetic import synthesize

    out = Path(out)
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    counts = synthesize(tmp, rows, seed)
    (tmp / "source.json").write_text(
        json.dumps({"kind": "synthetic", "seed": seed, "rows": rows, "lines": counts}, indent=2) + "\n"
    )
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    print(json.dumps(counts))


def download(repo: str, commit: str, out: str) -> None:
    from toolcall_repro.eval.acebench.download import download_acebench as fetch_pinned

    print(json.dumps(fetch_pinned(repo, commit, out)))


# --- the jobs of workflow/rules/evaluate.smk (toolcall_repro.job) -------------------------------------


def _reported(fn):
    """A job function whose bad data or config exits 2 with one line."""

    @functools.wraps(fn)
    def wrapper(j):
        try:
            return fn(j)
        except (ACEBenchDataError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return wrapper


@_reported
def score_acebench(j) -> int:
    """The score_acebench job: config {acebench: evaluate.acebench, protocol: its spec (backend
    included), model: {tag, ...}}; input.data is the data folder evaluate.acebench.source names, input.model
    the model; seeds.eval; option threads (by hand also max_agent_messages); output.score (and, if named,
    output.generations: every raw generation as JSON lines)."""
    ace, protocol = j.config["acebench"], j.config["protocol"]
    openai = ace["simulator"] == "openai"
    generations = j.paths("generations", "output")
    return score(
        max_agent_messages=int(j.option("max_agent_messages", MAX_MESSAGES)),
        generations=generations[0] if generations else None,
        data_dir=j.path("data"),
        model=j.path("model"),
        protocol=protocol,
        seed=j.seed("eval"),
        out=j.out("score"),
        categories=ace["categories"],
        limit=ace["limit"],
        simulator=ace["simulator"],
        simulator_endpoint=ace.get("simulator_endpoint") if openai else None,
        simulator_model=ace.get("simulator_model") if openai else None,
        backend=protocol["backend"],
        threads=int(j.option("threads")),
    )


@_reported
def summarise_acebench(j) -> None:
    """The summarise_acebench job: the seed files of input.seeds."""
    summarise_files(j.paths("seeds"), j.out("summary"))


@_reported
def synthesize_acebench(j) -> None:
    """The synthesize_acebench job: config {synthetic: {rows, seed}}, the seed as seeds.data."""
    synthesize_folder(j.out("data"), int(j.config["synthetic"]["rows"]), j.seed("data"))


@_reported
def download_acebench(j) -> None:
    """The download_acebench job: config {repo, commit} (the pinned commit)."""
    download(j.config["repo"], j.config["commit"], j.out("data"))
