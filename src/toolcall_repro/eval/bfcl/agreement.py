"""Agreement with the official `bfcl evaluate` CLI: same result files, same per-entry verdicts.

The CLI only knows bfcl-eval's registered models, so the result files are laid out under a stock
model with the same output format (`Qwen/Qwen3-8B`: BFCL's python-list prompt; `Qwen/Qwen3-8B-FC`:
`<tool_call>` JSON) and scored in a separate BFCL_PROJECT_ROOT by a separate process.

`corpus` builds result files from ground truth plus systematic mistakes (wrong value, missing argument,
wrong name, no call, truncation, ...), so both verdicts occur in every category.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from bfcl_eval.constants.category_mapping import VERSION_PREFIX
from bfcl_eval.utils import get_directory_structure_by_category, is_multi_turn, is_relevance_or_irrelevance

from toolcall_repro.eval.bfcl import groundtruth
from toolcall_repro.eval.bfcl.handler import build_handler, register
from toolcall_repro.eval.bfcl.score import load_category, result_file_name, score_category
from toolcall_repro.toolcall import format_tool_calls, parse_tool_calls

OFFICIAL_MODELS = {"python": "Qwen/Qwen3-8B", "xml_json": "Qwen/Qwen3-8B-FC"}
SINGLE_TURN_VARIANTS = (
    "ground_truth",
    "wrong_value",
    "missing_argument",
    "wrong_name",
    "no_call",
    "truncated",
    "extra_call",
    "extra_argument",
)
RELEVANCE_VARIANTS = ("ground_truth", "call_first_function", "empty_list", "truncated")
MULTI_TURN_VARIANTS = (
    "ground_truth",
    "drop_last_turn_calls",
    "wrong_value",
    "one_call_per_step",
    "unknown_function",
    "inference_error",
    "missing_turn",
)


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + " WRONG"
    if isinstance(value, list):
        return [*value, "WRONG"]
    return "WRONG"


def _mutate_calls(calls: list[dict], variant: str) -> list[dict]:
    calls = copy.deepcopy(calls)
    first = calls[0]
    if variant == "wrong_value" and first["arguments"]:
        key = next(iter(first["arguments"]))
        first["arguments"][key] = _changed(first["arguments"][key])
    elif variant == "missing_argument" and first["arguments"]:
        first["arguments"].pop(next(iter(first["arguments"])))
    elif variant == "wrong_name":
        first["name"] += "_x"
    elif variant == "extra_call":
        calls.append(copy.deepcopy(first))
    elif variant == "extra_argument":
        first["arguments"]["unexpected_argument"] = 1
    return calls


def variant_output(category: str, prompt: dict, truth: dict | None, fmt: str, variant: str):
    """The `result` field for one entry under one named mistake (or the ground truth itself)."""
    if variant == "inference_error":
        return "Error during inference: simulated backend failure"
    gt = groundtruth.ground_truth_output(category, prompt, truth, fmt)
    if variant == "ground_truth":
        return gt
    if is_multi_turn(category):
        turns = copy.deepcopy(gt)
        call_steps = [(t, s) for t, steps in enumerate(turns) for s in range(len(steps) - 1)]
        if variant == "missing_turn":
            return turns[:-1]
        if variant == "drop_last_turn_calls" and call_steps:
            t, _ = call_steps[-1]
            turns[t] = [groundtruth.TURN_DONE_TEXT]
        elif variant in ("wrong_value", "unknown_function") and call_steps:
            t, s = call_steps[0]
            calls = parse_tool_calls(turns[t][s], fmt)
            if variant == "wrong_value":
                calls = _mutate_calls(calls, "wrong_value")
            else:
                calls.insert(0, {"name": "no_such_tool", "arguments": {}})
            turns[t][s] = format_tool_calls(calls, fmt)
        elif variant == "one_call_per_step":
            turns = [
                [format_tool_calls([c], fmt) for st in steps[:-1] for c in parse_tool_calls(st, fmt)]
                + steps[-1:]
                for steps in turns
            ]
        return turns
    if is_relevance_or_irrelevance(category):
        if variant == "call_first_function":
            return format_tool_calls([groundtruth.relevance_call(prompt)], fmt)
        if variant == "empty_list":
            return "[]" if fmt == "python" else ""
        if variant == "truncated":
            text = format_tool_calls([groundtruth.relevance_call(prompt)], fmt)
            return text[: len(text) // 2]
        raise ValueError(f"unknown relevance variant {variant!r}")
    if variant == "no_call":
        return groundtruth.NO_CALL_TEXT
    if variant == "truncated":
        return gt[: len(gt) // 2]
    return format_tool_calls(_mutate_calls(parse_tool_calls(gt, fmt), variant), fmt)


def variants_for(category: str) -> tuple[str, ...]:
    if is_multi_turn(category):
        return MULTI_TURN_VARIANTS
    if is_relevance_or_irrelevance(category):
        return RELEVANCE_VARIANTS
    return SINGLE_TURN_VARIANTS


def corpus(categories: list[str], limit: int | None, fmt: str) -> tuple[dict[str, list[dict]], list[dict]]:
    """Result entries per category (entry i gets variant i mod the variant count) and the quirks skipped.

    Entries whose ground truth no output can satisfy (`GroundTruthQuirk`) are left out and listed.
    """
    results: dict[str, list[dict]] = {}
    quirks = []
    for category in categories:
        prompts, truths = load_category(category)
        n = len(prompts) if not limit else min(limit, len(prompts))
        kinds = variants_for(category)
        rows = []
        for i in range(n):
            variant = kinds[i % len(kinds)]
            truth = None if truths is None else truths[i]
            try:
                result = variant_output(category, prompts[i], truth, fmt, variant)
            except groundtruth.GroundTruthQuirk as e:
                quirks.append({"id": prompts[i]["id"], "reason": str(e)})
                continue
            rows.append({"id": prompts[i]["id"], "result": result, "variant": variant})
        results[category] = rows
    return results, quirks


# Output shapes where our decoding deliberately differs from bfcl's reference handler for the format
# (QwenHandler for python, QwenFCHandler for xml_json); everything else must agree.
KNOWN_DIVERGENCES = {
    ("python", "binop_value"): "bfcl evaluates `9+1` to 10; we never evaluate model text (invalid)",
    ("xml_json", "no_newlines"): "bfcl's Qwen FC regex needs newlines inside <tool_call>; we parse the block",
    ("xml_json", "good_and_bad_block"): "bfcl silently drops an unparsable block; we reject the output",
    ("xml_json", "list_in_block"): "bfcl reads a JSON list inside one block as no call; we read the calls",
}
EDGE_VARIANTS = {
    "python": ("bare_call", "backticks_inline", "code_fence", "text_before_call", "binop_value"),
    "xml_json": ("no_newlines", "good_and_bad_block", "list_in_block", "text_around", "python_syntax"),
}


def _edge_text(gt: str, fmt: str, variant: str) -> str | None:
    if variant == "bare_call":
        return gt[1:-1] if gt.count("(") == 1 else None  # one call only: no brackets needed
    if variant == "backticks_inline":
        return f"`{gt}`"
    if variant == "code_fence":
        return f"```python\n{gt}\n```"
    if variant == "text_before_call":
        return f"Sure: {gt}"
    if variant == "binop_value":
        m = re.search(r"=(\d+)([,)])", gt)
        return (
            None if m is None else gt[: m.start()] + f"={int(m.group(1)) - 1}+1{m.group(2)}" + gt[m.end() :]
        )
    if variant == "no_newlines":
        return gt.replace("<tool_call>\n", "<tool_call>").replace("\n</tool_call>", "</tool_call>")
    if variant == "good_and_bad_block":
        return gt + "\n<tool_call>\n{bad json\n</tool_call>"
    if variant == "list_in_block":
        return re.sub(
            r"<tool_call>\n(.*?)\n</tool_call>", r"<tool_call>\n[\1]\n</tool_call>", gt, flags=re.DOTALL
        )
    if variant == "text_around":
        return f"Let me call it.\n{gt}\nDone."
    if variant == "python_syntax":
        return format_tool_calls(parse_tool_calls(gt, "xml_json"), "python")
    raise ValueError(f"unknown edge variant {variant!r}")


def edge_corpus(fmt: str, start: int = 100, category: str = "simple_python") -> list[dict]:
    """One entry per edge variant (entries from `start` on), each its own ground truth reshaped."""
    prompts, truths = load_category(category)
    rows, i = [], start
    for variant in EDGE_VARIANTS[fmt]:
        while True:
            gt = groundtruth.ground_truth_output(category, prompts[i], truths[i], fmt)
            text = _edge_text(gt, fmt, variant)
            i += 1
            if text is not None:
                break
        rows.append({"id": prompts[i - 1]["id"], "result": text, "variant": variant, "format": fmt})
    return rows


def write_result_tree(root: str | Path, model_dir_name: str, results: Mapping[str, list[dict]]) -> Path:
    """bfcl's result layout: root/<model>/<group>/BFCL_v4_<category>_result.json."""
    base = Path(root) / model_dir_name
    for category, rows in results.items():
        d = base / get_directory_structure_by_category(category)
        d.mkdir(parents=True, exist_ok=True)
        with open(d / result_file_name(category), "w") as f:
            for row in rows:
                f.write(json.dumps({"id": row["id"], "result": row["result"]}) + "\n")
    return base


def harness_verdicts(results: Mapping[str, list[dict]], fmt: str) -> dict[str, dict[str, bool]]:
    register("toolcallrepro-agreement", "toolcall-repro/agreement")
    handler = build_handler("toolcallrepro-agreement").bind(output_format=fmt)
    out = {}
    for category, rows in results.items():
        scored = score_category(handler, category, rows)
        out[category] = {e["id"]: e["valid"] for e in scored["entries"]}
    return out


def official_verdicts(
    results_by_format: Mapping[str, Mapping[str, list[dict]]], work_dir: str | Path, timeout: int = 1800
) -> dict[str, dict[str, dict[str, bool]]]:
    """Run `bfcl evaluate` once over every format's results; {fmt: {category: {id: valid}}}."""
    root = Path(work_dir).resolve()
    if root.exists():
        shutil.rmtree(root)
    (root / "result").mkdir(parents=True)
    models, categories = [], set()
    for fmt, results in results_by_format.items():
        model = OFFICIAL_MODELS[fmt]
        models.append(model)
        categories.update(results)
        write_result_tree(root / "result", model.replace("/", "_"), results)
    # `python -m bfcl_eval` with this interpreter: the `bfcl` script is only on PATH when the venv is
    # activated, and CI runs `.venv/bin/python -m pytest` without activating it.
    cmd = [
        sys.executable,
        "-m",
        "bfcl_eval",
        "evaluate",
        "--model",
        ",".join(models),
        "--test-category",
        ",".join(sorted(categories)),
        "--result-dir",
        str(root / "result"),
        "--score-dir",
        str(root / "score"),
        "--partial-eval",
    ]
    env = {**os.environ, "BFCL_PROJECT_ROOT": str(root)}
    proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=timeout)
    (root / "bfcl_evaluate.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"bfcl evaluate failed ({proc.returncode}); see {root / 'bfcl_evaluate.log'}")

    out: dict[str, dict[str, dict[str, bool]]] = {}
    for fmt, results in results_by_format.items():
        model_dir = root / "score" / OFFICIAL_MODELS[fmt].replace("/", "_")
        out[fmt] = {}
        for category, rows in results.items():
            path = (
                model_dir
                / get_directory_structure_by_category(category)
                / f"{VERSION_PREFIX}_{category}_score.json"
            )
            lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            header, failures = lines[0], {x["id"] for x in lines[1:]}
            verdicts = {r["id"]: r["id"] not in failures for r in rows}
            if header["total_count"] != len(rows) or header["correct_count"] != sum(verdicts.values()):
                raise RuntimeError(f"{path}: header {header} does not match its failure lines")
            out[fmt][category] = verdicts
    return out


def disagreements(
    ours: Mapping[str, Mapping[str, bool]],
    theirs: Mapping[str, Mapping[str, bool]],
    results: Mapping[str, list[dict]] | None = None,
) -> list[dict]:
    """Every entry whose verdict differs (or that only one side scored)."""
    variant = {r["id"]: r.get("variant") for rows in (results or {}).values() for r in rows}
    out = []
    for category in sorted(set(ours) | set(theirs)):
        a, b = ours.get(category, {}), theirs.get(category, {})
        for entry_id in sorted(set(a) | set(b)):
            if a.get(entry_id) != b.get(entry_id):
                out.append(
                    {
                        "category": category,
                        "id": entry_id,
                        "ours": a.get(entry_id),
                        "official": b.get(entry_id),
                        "variant": variant.get(entry_id),
                    }
                )
    return out
