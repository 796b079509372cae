"""Generate BFCL result files for one (model, protocol, seed): bfcl-eval's loop, our prompt and backend.

Writes bfcl's layout, `<out>/<registry name>/<group>/BFCL_v4_<category>_result.json` (readable by
`bfcl evaluate`), plus `card.json` (the protocol card) and `expected_ids.json` (what was asked, so that
scoring can tell a missing result from a category never run). The folder appears only when complete.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import sys
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from bfcl_eval.constants.category_mapping import VERSION_PREFIX
from bfcl_eval.constants.eval_config import POSSIBLE_ANSWER_PATH, PROMPT_PATH
from bfcl_eval.utils import is_multi_turn, load_dataset_entry

from toolcall_repro.eval.bfcl.aggregate import FORMULAS, SCALE
from toolcall_repro.eval.bfcl.decode import DECODER_ID, KNOWN_DIVERGENCES
from toolcall_repro.eval.bfcl.execute import dispatching_executor, forget_instances
from toolcall_repro.eval.bfcl.handler import ProtocolQwenHandler, build_handler, register, registry_name_for
from toolcall_repro.eval.bfcl.score import EXCLUDED_CATEGORIES, INFERENCE_ERROR_PREFIX, check_categories
from toolcall_repro.io import atomic_write_json
from toolcall_repro.progress import Progress
from toolcall_repro.protocol import Protocol, protocol_card, render
from toolcall_repro.provenance import model_sha256, sha256_file

CARD_FILE = "card.json"
EXPECTED_IDS_FILE = "expected_ids.json"
BFCL_VERSION = "2026.3.23"


class GenerationFailed(RuntimeError):
    """Every entry failed at inference: the setup is broken, not the model."""


def select_entries(categories: list[str], limit: int | dict | None) -> dict[str, list[dict]]:
    """The first `limit` entries of each category (all when None/0), loaded as `bfcl generate` loads them.

    `limit` may be a mapping {category: n, "default": n}: multi-turn entries cost far more than
    single-turn ones (prompts of ~30k tokens), so small runs cap them separately.
    """
    check_categories(categories)
    limits = limit if isinstance(limit, dict) else {"default": limit}
    if any(n is not None and n < 0 for n in limits.values()):
        raise ValueError(f"limit must be >= 0, got {limit}")
    out = {}
    for category in categories:
        n = limits.get(category, limits.get("default"))
        entries = load_dataset_entry(category, include_prereq=False)  # with bfcl's language hints
        out[category] = entries[:n] if n else entries
    return out


def data_fingerprint(categories: list[str]) -> dict:
    """sha256 of every bfcl-eval data file the categories read (prompts, answers, multi-turn tool docs)."""
    files = []
    for category in categories:
        files.append(PROMPT_PATH / f"{VERSION_PREFIX}_{category}.json")
        answer = POSSIBLE_ANSWER_PATH / f"{VERSION_PREFIX}_{category}.json"
        if answer.exists():
            files.append(answer)
    if any(is_multi_turn(c) for c in categories):
        files.extend(sorted((PROMPT_PATH / "multi_turn_func_doc").glob("*.json")))
    shas = {f.relative_to(PROMPT_PATH).as_posix(): sha256_file(f) for f in files}
    combined = hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(shas.items())).encode()).hexdigest()
    return {"sha256": combined, "files": shas}


def portable_traceback(exc: BaseException, limit: int = 10) -> str:
    """`exc`'s traceback as a result file keeps it: each frame's file relative to the import root it was
    loaded from (toolcall_repro/..., bfcl_eval/...) and its function, no line numbers; then the exception.

    The same failure gives the same bytes wherever the checkout and the venv are, and after an edit that
    only moves lines (bfcl generate writes traceback.format_exc(), absolute paths and line numbers
    included: two clones of one commit wrote different result files). The job log has the full one.
    """
    roots = sorted({os.path.abspath(p) for p in sys.path if p}, key=len, reverse=True)

    def relative(filename: str) -> str:
        path = os.path.abspath(filename)
        root = next((r for r in roots if path.startswith(r + os.sep)), None)
        return Path(os.path.relpath(path, root)).as_posix() if root else Path(path).name

    frames = [
        f"  {relative(f.filename)}, in {f.name}" for f in traceback.extract_tb(exc.__traceback__, limit)
    ]
    head = "Traceback (most recent call last; files relative to their import root, no line numbers):"
    return "\n".join([head, *frames, *traceback.format_exception_only(exc)]).rstrip("\n")


def _infer(handler: ProtocolQwenHandler, entry: dict, log: Callable) -> tuple[dict, bool]:
    try:
        result, metadata_ = handler.inference(
            copy.deepcopy(entry), include_input_log=False, exclude_state_log=True
        )
        failed = False
    except Exception as e:  # noqa: BLE001 - recorded in the result file and counted, as bfcl generate does
        result = f"{INFERENCE_ERROR_PREFIX}: {e}"
        metadata_ = {"traceback": portable_traceback(e)}
        failed = True
        log(f"inference error on {entry['id']}: {e}\n{traceback.format_exc(limit=10)}")
    finally:
        forget_instances(entry["id"])
    return {"id": entry["id"], "result": result, **metadata_}, failed


def run_entries(
    make_handler: Callable[[], ProtocolQwenHandler],
    entries: dict[str, list[dict]],
    result_dir: Path,
    workers: int = 1,
    log: Callable = print,
) -> dict[str, list[str]]:
    """Run every entry through bfcl-eval's inference loop and write its result line; returns error ids.

    `workers` > 1 runs entries concurrently (one handler each), for a server that batches requests.
    An entry whose inference raises is recorded as "Error during inference: ..." and counted.
    `log` also gets a progress line (entries done, elapsed, estimate left) at most every
    `progress.EVERY_S` seconds, and the last.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    errors: dict[str, list[str]] = {}
    shared = make_handler() if workers == 1 else None
    progress = Progress(sum(len(rows) for rows in entries.values()), "bfcl generation", log, unit="entries")

    def counted(out: tuple[dict, bool], category: str) -> tuple[dict, bool]:
        progress.update(category=category)
        return out

    with dispatching_executor():
        for category, rows in entries.items():
            if shared is not None:
                outputs = [counted(_infer(shared, entry, log), category) for entry in rows]
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    done = pool.map(lambda entry: _infer(make_handler(), entry, log), rows)
                    outputs = [counted(out, category) for out in done]  # in order, as they finish
            errors[category] = [out["id"] for out, failed in outputs if failed]
            (shared or make_handler()).write([out for out, _ in outputs], result_dir=result_dir)
    return errors


def _backend_version(kind: str) -> str | None:
    try:
        return metadata.version(kind)
    except metadata.PackageNotFoundError:
        return None


def generation_card(
    protocol: Protocol,
    protocol_id: str,
    tokenizer: Any,
    *,
    model_dir: Path,
    model_tag: str,
    registry_name: str,
    entries: dict[str, list[dict]],
    limit: int | None,
    inference_errors: dict[str, list[str]],
    server: dict | None = None,
) -> dict:
    categories = list(entries)
    return protocol_card(
        protocol,
        tokenizer,
        protocol_id=protocol_id,
        benchmark={
            "name": "BFCL",
            "version": f"{VERSION_PREFIX} (bfcl-eval {metadata.version('bfcl-eval')})",
            "categories": categories,
            "limit": limit or None,
            "entries": {c: len(rows) for c, rows in entries.items()},
            "data": data_fingerprint(categories),
            "excluded_categories": EXCLUDED_CATEGORIES,
        },
        model={
            "tag": model_tag,
            "dir": str(model_dir),
            "checkpoint_sha256": model_sha256(model_dir),
            "bfcl_registry_name": registry_name,
        },
        backend_version=_backend_version(protocol.backend),
        generation_server=server,
        user_simulator=None,
        user_turns="scripted by BFCL (bfcl-eval has no user simulator)",
        harness={
            "handler": "toolcall_repro.eval.bfcl.handler.ProtocolQwenHandler (bfcl QwenHandler subclass)",
            "parser": DECODER_ID[protocol.output_format],
            "known_divergences_from_bfcl": {
                variant: why
                for (fmt, variant), why in KNOWN_DIVERGENCES.items()
                if fmt == protocol.output_format
            },
            "multi_turn_executor": "toolcall_repro.eval.bfcl.execute (dispatch to backend methods, no eval)",
            "per_query_seed": "sha256(seed, entry id, query index)",
        },
        aggregation={"formulas": FORMULAS, "scale": SCALE},
        inference_errors={c: len(ids) for c, ids in inference_errors.items()},
    )


def generate(
    *,
    model_dir: str | Path,
    model_tag: str,
    protocol: Protocol,
    protocol_id: str,
    categories: list[str],
    limit: int | None,
    out_dir: str | Path,
    threads: int = 1,
    workers: int | None = None,
    server_url: str | None = None,
    gpus: int = 1,
    gpu_memory_utilization: float = 0.9,
    vllm_bin: str | None = None,
    serve_args: Sequence[str] = (),
    server_timeout_s: float | None = None,
    backend: Any | None = None,
    log: Callable = print,
) -> Path:
    """Generate results for one (model, protocol, seed) into `out_dir` (replaced atomically).

    transformers: in-process on CPU, one entry at a time (`backend` may be given, e.g. in tests).
    vllm: an OpenAI-compatible server, `server_url` or started by bfcl-eval's spin-up from the vLLM
    environment's `vllm` (`vllm_bin`, see serve.vllm_executable); `workers` entries at a time (default 64).
    """
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    entries = select_entries(categories, limit)
    registry_name = registry_name_for(model_tag)
    register(registry_name, model_name=str(model_dir))
    owner = build_handler(registry_name, temperature=protocol.temperature)
    if protocol.backend == "vllm" and backend is None:
        from toolcall_repro.eval.bfcl.serve import attach_server, server_generate_fn

        attach_server(
            owner,
            str(model_dir),
            server_url=server_url,
            gpus=gpus,
            gpu_memory_utilization=gpu_memory_utilization,
            vllm_bin=vllm_bin,
            serve_args=serve_args,
            timeout_s=server_timeout_s,
        )
        tokenizer = owner.tokenizer
        generate_fn = server_generate_fn(owner.client, owner.model_path_or_id, protocol)
        workers = workers or 64
        # a server started here listens on a free port drawn at start: not on the card (the seeds' cards
        # of one model and protocol must agree, eval/seeds.py), only that it was started and how
        server = {"url": server_url, "started_here": server_url is None, "workers": workers}
        if server_url is None:
            server["serve_args"] = list(serve_args)
    else:
        if backend is None:
            from toolcall_repro.backends import load_backend

            backend = load_backend(protocol.backend, str(model_dir), threads=threads)
        tokenizer = backend.tokenizer
        workers = workers or 1

        def generate_fn(prompt: str, seed: int):
            return backend.generate(
                [prompt],
                1,
                temperature=protocol.temperature,
                top_p=protocol.top_p,
                max_tokens=protocol.max_tokens,
                seed=seed,
            )[0][0]

        server = None

    def make_handler() -> ProtocolQwenHandler:
        return build_handler(registry_name, temperature=protocol.temperature).bind(
            output_format=protocol.output_format,
            prompt_fn=lambda messages, tools: render(messages, tools, protocol, tokenizer),
            generate_fn=generate_fn,
            seed=protocol.seed,
        )

    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        errors = run_entries(make_handler, entries, tmp, workers=workers, log=log)
    finally:
        owner.shutdown_local_server()  # stops `vllm serve` if we started it; otherwise nothing
    n_total = sum(len(rows) for rows in entries.values())
    n_errors = sum(len(ids) for ids in errors.values())
    if n_total and n_errors == n_total:
        first = next(ids[0] for ids in errors.values() if ids)
        raise GenerationFailed(f"all {n_total} entries failed at inference (first: {first}); see the log")
    card = generation_card(
        protocol,
        protocol_id,
        tokenizer,
        model_dir=model_dir,
        model_tag=model_tag,
        registry_name=registry_name,
        entries=entries,
        limit=limit,
        inference_errors=errors,
        server=server,
    )
    atomic_write_json(tmp / CARD_FILE, card, ensure_ascii=True)
    expected_ids = {c: [e["id"] for e in rows] for c, rows in entries.items()}
    atomic_write_json(tmp / EXPECTED_IDS_FILE, expected_ids, ensure_ascii=True)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return out_dir
