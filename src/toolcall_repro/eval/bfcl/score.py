"""Score BFCL result files with bfcl-eval's loaders and checkers, entry by entry.

Each entry goes through the same per-entry function `bfcl evaluate` uses (`eval_runner`'s AST,
relevance and multi-turn evaluators), with our handler's decoders and the eval-free multi-turn
executor. Results for ids outside the benchmark, duplicate ids and results missing for ids that were
generated are errors or counted failures, never dropped.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path

from bfcl_eval.constants.category_mapping import (
    MULTI_TURN_CATEGORY,
    SINGLE_TURN_CATEGORY,
    VERSION_PREFIX,
)
from bfcl_eval.constants.enums import Language, ReturnFormat
from bfcl_eval.eval_checker import eval_runner
from bfcl_eval.utils import (
    extract_test_category,
    extract_test_category_from_id,
    is_java,
    is_js,
    is_multi_turn,
    is_relevance_or_irrelevance,
    load_dataset_entry,
    load_ground_truth_entry,
)

from toolcall_repro.eval.bfcl.execute import dispatching_executor, forget_instances
from toolcall_repro.eval.bfcl.handler import ProtocolQwenHandler
from toolcall_repro.io import iter_jsonl

SCORED_CATEGORIES = tuple(SINGLE_TURN_CATEGORY + MULTI_TURN_CATEGORY)
# Categories of BFCL v4 this harness does not run, and why (copied into every protocol card).
EXCLUDED_CATEGORIES = {
    "web_search_base": "needs the network (SerpAPI search and live URLs)",
    "web_search_no_snippet": "needs the network (SerpAPI search and live URLs)",
    "memory_vector": "downloads a sentence-transformer from the Hugging Face hub",
    "memory_kv": "agentic memory suite: not part of the paper's multi-turn or single-turn scores",
    "memory_rec_sum": "agentic memory suite: not part of the paper's multi-turn or single-turn scores",
    "format_sensitivity": "not a scoring category in BFCL v4",
}
INFERENCE_ERROR_PREFIX = "Error during inference"
MAX_ERROR_CHARS = 400


class ResultFileError(ValueError):
    """A result file that cannot be scored as it is (bad JSON, foreign or duplicate ids)."""


def check_categories(categories: Iterable[str]) -> list[str]:
    cats = list(categories)
    if not cats:
        raise ValueError("no BFCL categories given")
    for c in cats:
        if c in EXCLUDED_CATEGORIES:
            raise ValueError(f"BFCL category {c!r} is excluded here: {EXCLUDED_CATEGORIES[c]}")
        if c not in SCORED_CATEGORIES:
            raise ValueError(f"unknown BFCL category {c!r}; known: {', '.join(SCORED_CATEGORIES)}")
    if len(set(cats)) != len(cats):
        raise ValueError(f"duplicate categories in {cats}")
    return cats


def result_file_name(category: str) -> str:
    return f"{VERSION_PREFIX}_{category}_result.json"


def read_result_file(path: str | Path) -> tuple[str, list[dict]]:
    """(category, entries) from one `BFCL_v4_<category>_result.json` (one JSON object a line)."""
    path = Path(path)
    category = extract_test_category(path.name)
    entries = []
    for lineno, entry in iter_jsonl(path, error=ResultFileError):
        if "id" not in entry or "result" not in entry:
            raise ResultFileError(f"{path}:{lineno}: a result line needs 'id' and 'result'")
        if extract_test_category_from_id(entry["id"]) != category:
            raise ResultFileError(f"{path}:{lineno}: id {entry['id']!r} does not belong to {category}")
        entries.append(entry)
    return category, entries


def read_results(model_result_dir: str | Path) -> dict[str, list[dict]]:
    """All result files under one model's folder (bfcl layout: <group>/BFCL_v4_<cat>_result.json)."""
    root = Path(model_result_dir)
    files = sorted(root.rglob(f"{VERSION_PREFIX}_*_result.json"))
    if not files:
        raise ResultFileError(f"no {VERSION_PREFIX}_*_result.json files under {root}")
    out: dict[str, list[dict]] = {}
    for f in files:
        category, entries = read_result_file(f)
        if category in out:
            raise ResultFileError(f"two result files for {category} under {root}")
        out[category] = entries
    return out


def first_query_input_tokens(line: Mapping) -> int | None:
    """Prompt tokens of a result line's first model query; None for an inference error (no count).

    bfcl writes `input_token_count` as one number for a single-turn entry and as [turn][step] lists for a
    multi-turn entry; the first query is [0][0]. A line that should carry a count and does not is an error.
    """
    if isinstance(line["result"], str) and line["result"].startswith(INFERENCE_ERROR_PREFIX):
        return None
    raw = line.get("input_token_count")
    count = raw
    if isinstance(count, list):
        count = count[0] if count else None
        count = count[0] if isinstance(count, list) and count else None
    whole = isinstance(count, int | float) and not isinstance(count, bool) and float(count).is_integer()
    if not whole or count < 0:
        raise ResultFileError(f"{line['id']}: input_token_count {raw!r} holds no first-query token count")
    return int(count)


def mean_input_tokens(lines: Iterable[Mapping]) -> float | None:
    """Mean first-query prompt tokens over the lines that are not inference errors; None if there are none."""
    counts = [c for c in map(first_query_input_tokens, lines) if c is not None]
    return sum(counts) / len(counts) if counts else None


def _language(category: str) -> tuple[Language, ReturnFormat]:
    if is_java(category):
        return Language.JAVA, ReturnFormat.JAVA
    if is_js(category):
        return Language.JAVASCRIPT, ReturnFormat.JAVASCRIPT
    return Language.PYTHON, ReturnFormat.PYTHON


def _error_fields(verdict: Mapping) -> tuple[str | None, str | None]:
    """bfcl-eval's three error shapes -> (error_type, first message)."""
    if verdict.get("valid"):
        return None, None
    err = verdict.get("error")
    etype = verdict.get("error_type")
    if isinstance(err, dict):
        etype = etype or err.get("error_type")
        err = err.get("error_message")
    if isinstance(err, list):
        err = err[0] if err else None
    message = None if err is None else str(err)[:MAX_ERROR_CHARS]
    return etype or "unknown", message


def load_category(category: str) -> tuple[list[dict], list[dict] | None]:
    """Prompt entries as `bfcl evaluate` loads them, and ground truth aligned by index (None: relevance)."""
    prompts = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    if is_relevance_or_irrelevance(category):
        return prompts, None
    truth = load_ground_truth_entry(category)
    if len(truth) != len(prompts):
        raise ValueError(f"{category}: {len(prompts)} prompts but {len(truth)} ground-truth entries")
    return prompts, truth


def _judge(handler, category, entry, prompt, truth, model_name) -> dict:
    entry_id, result = entry["id"], entry["result"]
    if is_relevance_or_irrelevance(category):
        return eval_runner._evaluate_single_relevance_entry(
            handler, entry_id, result, prompt, model_name, category
        )
    if is_multi_turn(category):
        try:
            return eval_runner._evaluate_single_multi_turn_entry(
                handler, entry_id, result, truth["ground_truth"], prompt, model_name, category
            )
        finally:
            forget_instances(entry_id)  # bfcl caches backends per (model, entry): keep scoring re-entrant
    language, return_format = _language(category)
    return eval_runner._evaluate_single_ast_entry(
        handler,
        entry_id,
        result,
        truth["ground_truth"],
        prompt,
        model_name,
        category,
        language=language,
        return_format=return_format,
    )


def score_category(
    handler: ProtocolQwenHandler,
    category: str,
    results: list[dict],
    expected_ids: list[str] | None = None,
) -> dict:
    """{"accuracy", "correct", "total", "inference_errors", "missing", "entries": [{"id", "valid", ...}]}.

    `expected_ids`: the ids that were generated; any without a result is scored as a failure.
    """
    check_categories([category])
    prompts, truths = load_category(category)
    index = {p["id"]: i for i, p in enumerate(prompts)}
    seen: set[str] = set()
    for entry in results:
        if entry["id"] not in index:
            raise ResultFileError(f"{category}: result id {entry['id']!r} is not in BFCL {VERSION_PREFIX}")
        if entry["id"] in seen:
            raise ResultFileError(f"{category}: duplicate result for {entry['id']!r}")
        seen.add(entry["id"])
    unexpected = sorted(seen - set(expected_ids)) if expected_ids is not None else []
    if unexpected:
        raise ResultFileError(f"{category}: results for ids that were not generated: {unexpected[:5]}")
    missing = [i for i in (expected_ids or []) if i not in seen]

    model_name = handler.registry_dir_name
    by_id = {e["id"]: e for e in results}
    order = sorted(seen | set(missing), key=index.__getitem__)
    entries = []
    with dispatching_executor():
        for entry_id in order:
            if entry_id in missing:
                entries.append(
                    {
                        "id": entry_id,
                        "valid": False,
                        "error_type": "missing_result",
                        "error": "no result line",
                    }
                )
                continue
            i = index[entry_id]
            verdict = _judge(
                handler,
                category,
                by_id[entry_id],
                copy.deepcopy(prompts[i]),  # bfcl's evaluators delete keys from the prompt entry
                None if truths is None else truths[i],
                model_name,
            )
            etype, message = _error_fields(verdict)
            entries.append(
                {"id": entry_id, "valid": bool(verdict["valid"]), "error_type": etype, "error": message}
            )

    inference_errors = sorted(
        e["id"]
        for e in results
        if isinstance(e["result"], str) and e["result"].startswith(INFERENCE_ERROR_PREFIX)
    )
    correct = sum(e["valid"] for e in entries)
    total = len(entries)
    if total == 0:
        raise ResultFileError(f"{category}: nothing to score (no results and no expected ids)")
    return {
        "accuracy": correct / total,
        "correct": correct,
        "total": total,
        "inference_errors": inference_errors,
        "missing": missing,
        "entries": entries,
    }
