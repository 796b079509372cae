"""Agreement with the official `bfcl evaluate` CLI: same result files, same per-entry verdicts.

A test harness, not part of the package: tests/eval/bfcl/test_agreement.py runs it on a small corpus,
benchmarks/bfcl_agreement.py on the full sets. The deliberate differences it allows are the package's
`decode.KNOWN_DIVERGENCES` (the BFCL card lists them).

The CLI only knows bfcl-eval's registered models, so the result files are laid out under a stock
model with the same output format (`Qwen/Qwen3-8B`: BFCL's python-list prompt; `Qwen/Qwen3-8B-FC`:
`<tool_call>` JSON) and scored in a separate BFCL_PROJECT_ROOT by a separate process.

`corpus` builds result files from ground truth plus systematic mistakes (wrong value, missing argument,
wrong name, no call, truncation, ...), so both verdicts occur in every category.
"""

from __future__ import annotations

import ast
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
from toolcall_repro.eval.bfcl.decode import KNOWN_DIVERGENCES  # noqa: F401  (callers read it from here)
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


# Output shapes where our decoding differs from bfcl's reference handler for the format (QwenHandler for
# python, QwenFCHandler for xml_json), each with its reason; every other shape must agree. Each one is an
# edge-corpus variant below, and the test suite checks that the verdicts really differ on it.
# Refused without a corpus entry (bfcl itself would hang or run out of memory on them, so they cannot be
# scored by `bfcl evaluate`): `9**9**9`, `'a'*10**9` (tests/eval/bfcl/test_decode.py).
UNBOUNDED_EXPRESSIONS = (
    "arithmetic results above decode.MAX_RESULT_BITS bits or decode.MAX_RESULT_ITEMS items"
)

# {format: {category: variants}}: one entry per variant, each its own ground truth (or first function) reshaped
EDGE_VARIANTS = {
    "python": {
        "simple_python": (
            "bare_call",
            "backticks_inline",
            "code_fence",
            "text_before_call",
            "binop_value",
            "builtin_in_expression",
            "positional_args",
            "positional_and_keyword",
            "bare_name_value",
            "nested_call_value",
            "nested_call_no_keywords",
            "tuple_value",
            "think_in_result",
            "empty_dict_value",
        ),
        "irrelevance": ("positional_call", "bare_function_name", "think_in_result"),
        "live_relevance": ("positional_call", "nested_call_value"),
        "multi_turn_base": ("positional_step", "nested_call_step", "think_in_step"),
    },
    "xml_json": {
        "simple_python": (
            "no_newlines",
            "good_and_bad_block",
            "list_in_block",
            "text_around",
            "python_syntax",
            "think_in_result",
        ),
        "irrelevance": ("python_syntax_call",),
    },
}
THINK_PREFIX = "<think>\nLet me plan the call.\n</think>\n\n"


def _first_call(gt: str) -> ast.Call | None:
    try:
        tree = ast.parse(gt, mode="eval").body
    except SyntaxError:
        return None
    calls = tree.elts if isinstance(tree, ast.List) else [tree]
    return calls[0] if calls and isinstance(calls[0], ast.Call) else None


def _reshape_first_call(gt: str, reshape) -> str | None:
    """`gt` with its first call rewritten by `reshape(call) -> bool` (False: not applicable to this entry)."""
    tree = ast.parse(gt, mode="eval")
    first = _first_call(gt)
    if first is None:
        return None
    target = tree.body.elts[0] if isinstance(tree.body, ast.List) else tree.body
    if not reshape(target):
        return None
    return ast.unparse(tree)


def _to_positional(call: ast.Call, keep_last_keyword: bool = False) -> bool:
    kept = call.keywords[-1:] if keep_last_keyword else []
    moved = call.keywords[:-1] if keep_last_keyword else call.keywords
    if not moved:
        return False
    call.args, call.keywords = [k.value for k in moved], kept
    return True


def _bare_name(call: ast.Call) -> bool:
    for k in call.keywords:
        if (
            isinstance(k.value, ast.Constant)
            and isinstance(k.value.value, str)
            and k.value.value.isidentifier()
        ):
            k.value = ast.Name(id=k.value.value, ctx=ast.Load())
            return True
    return False


def _nested(call: ast.Call, keywords: bool = True) -> bool:
    if not call.keywords:
        return False
    inner = [ast.keyword(arg="value", value=call.keywords[0].value)] if keywords else []
    call.keywords[0].value = ast.Call(func=ast.Name(id="lookup", ctx=ast.Load()), args=[], keywords=inner)
    return True


def _tuple(call: ast.Call) -> bool:
    for k in call.keywords:
        if isinstance(k.value, ast.List):
            k.value = ast.Tuple(elts=k.value.elts, ctx=ast.Load())
            return True
    return False


def _int_keyword(call: ast.Call) -> ast.keyword | None:
    for k in call.keywords:
        v = k.value
        if isinstance(v, ast.Constant) and isinstance(v.value, int) and not isinstance(v.value, bool):
            return k
    return None


def _binop(call: ast.Call, builtin: bool) -> bool:
    k = _int_keyword(call)
    if k is None or k.value.value < 1:
        return False
    n = k.value.value
    if builtin:  # len('x') * n == n, but only if the expression is run
        left = ast.Call(func=ast.Name(id="len", ctx=ast.Load()), args=[ast.Constant("x")], keywords=[])
        k.value = ast.BinOp(left=left, op=ast.Mult(), right=ast.Constant(n))
    else:
        k.value = ast.BinOp(left=ast.Constant(n - 1), op=ast.Add(), right=ast.Constant(1))
    return True


def _empty_dict(call: ast.Call) -> bool:
    if not call.keywords:
        return False
    call.keywords[0].value = ast.Dict(keys=[], values=[])
    return True


_CALL_RESHAPES = {
    "positional_args": _to_positional,
    "positional_and_keyword": lambda c: len(c.keywords) > 1 and _to_positional(c, keep_last_keyword=True),
    "bare_name_value": _bare_name,
    "nested_call_value": _nested,
    "nested_call_no_keywords": lambda c: _nested(c, keywords=False),
    "tuple_value": _tuple,
    "binop_value": lambda c: _binop(c, builtin=False),
    "builtin_in_expression": lambda c: _binop(c, builtin=True),
    "empty_dict_value": _empty_dict,
}


def _edge_text(gt: str, fmt: str, variant: str) -> str | None:
    if variant in _CALL_RESHAPES:
        return _reshape_first_call(gt, _CALL_RESHAPES[variant])
    if variant == "think_in_result":
        return THINK_PREFIX + gt
    if variant == "bare_call":
        return gt[1:-1] if gt.count("(") == 1 else None  # one call only: no brackets needed
    if variant == "backticks_inline":
        return f"`{gt}`"
    if variant == "code_fence":
        return f"```python\n{gt}\n```"
    if variant == "text_before_call":
        return f"Sure: {gt}"
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


def _relevance_edge_text(prompt: dict, fmt: str, variant: str) -> str | None:
    call = groundtruth.relevance_call(prompt)
    name = call["name"]
    if variant == "positional_call":  # the issue's `[f(70, 1.75)]`: bfcl drops the arguments, still a call
        return f"[{name}(70, 1.75)]"
    if variant == "bare_function_name":
        return f"[{name}]"
    if variant == "nested_call_value":
        return f"[{name}(value=lookup(query='x'))]"
    if variant == "think_in_result":
        return THINK_PREFIX + format_tool_calls([call], fmt)
    if variant == "python_syntax_call":
        return format_tool_calls([call], "python")
    raise ValueError(f"unknown relevance edge variant {variant!r}")


def _multi_turn_edge(turns: list[list[str]], variant: str) -> list[list[str]] | None:
    turns = copy.deepcopy(turns)
    for steps in turns:
        for s, step in enumerate(steps[:-1]):  # the last step of a turn is its closing text
            if variant == "think_in_step":
                steps[s] = THINK_PREFIX + step
                return turns
            reshape = _to_positional if variant == "positional_step" else _nested
            text = _reshape_first_call(step, reshape)
            if text is not None:
                steps[s] = text
                return turns
    return None


def edge_corpus(fmt: str, start: int = 100) -> dict[str, list[dict]]:
    """{category: rows}, one row per edge variant (entries from `start` on, after the main corpus's)."""
    out: dict[str, list[dict]] = {}
    for category, variants in EDGE_VARIANTS[fmt].items():
        prompts, truths = load_category(category)
        rows, i = [], min(start, len(prompts) - len(variants))  # live_relevance has only 16 entries
        for variant in variants:
            while True:
                if i >= len(prompts):
                    raise ValueError(f"{category}: no entry from {start} on takes edge variant {variant!r}")
                truth = None if truths is None else truths[i]
                if is_relevance_or_irrelevance(category):
                    text = _relevance_edge_text(prompts[i], fmt, variant)
                else:
                    try:
                        gt = groundtruth.ground_truth_output(category, prompts[i], truth, fmt)
                    except groundtruth.GroundTruthQuirk:
                        gt = None
                    if gt is None:
                        text = None
                    elif is_multi_turn(category):
                        text = _multi_turn_edge(gt, variant)
                    else:
                        text = _edge_text(gt, fmt, variant)
                i += 1
                if text is not None:
                    break
            rows.append({"id": prompts[i - 1]["id"], "result": text, "variant": variant, "format": fmt})
        out[category] = rows
    return out


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
