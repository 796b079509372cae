"""Ground truth written as model output: the harness's self-check (it must score 100%, quirks aside).

AST ground truth lists every acceptable value per argument (`""` = may be omitted); we write the first
acceptable value and leave out arguments whose first option is "omit". Multi-turn ground truth is a list
of call strings per turn; we write each turn's calls as one step followed by a plain-text closing step,
the way a model ends a turn. Positional arguments in the ground truth are named from the backend
method's signature. Java and JavaScript entries need values in those languages' syntax and are not
converted (`UnsupportedCategory`).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING
from bfcl_eval.utils import is_java, is_js, is_multi_turn, is_relevance_or_irrelevance

from toolcall_repro.eval.bfcl.execute import parse_call_string
from toolcall_repro.toolcall import format_tool_calls

NO_CALL_TEXT = "None of the available functions fits this request, so I will not call any."
TURN_DONE_TEXT = "I have completed the request."


class UnsupportedCategory(ValueError):
    pass


class GroundTruthQuirk(ValueError):
    """An entry whose ground truth no output can satisfy (e.g. a required argument with no option)."""


def _option_dict(options_by_key: dict) -> dict:
    # One level, as bfcl's dict_checker reads it: each key lists its acceptable literal values.
    return {
        k: opts[0] for k, opts in options_by_key.items() if isinstance(opts, list) and opts and opts[0] != ""
    }


def _written(option: Any) -> Any:
    if isinstance(option, dict) and all(isinstance(v, list) for v in option.values()):
        return _option_dict(option)
    if isinstance(option, list) and option and all(isinstance(v, dict) for v in option):
        return [_written(v) for v in option]  # list of option-dicts (bfcl's list_dict_checker)
    return option


def ast_calls(ground_truth: list[dict], functions: list[dict]) -> list[dict]:
    """`[{name: {arg: [options]}}]` -> `[{"name", "arguments"}]`, first acceptable value per argument.

    `""` among the options means "may be omitted": an optional argument whose first option is `""` is
    left out, a required one takes its first real option.
    """
    schemas = {f["name"]: f.get("parameters", {}) for f in functions}
    calls = []
    for item in ground_truth:
        ((name, params),) = item.items()
        required = set(schemas.get(name, {}).get("required", []))
        known = set(schemas.get(name, {}).get("properties", {}))
        arguments = {}
        for arg, options in params.items():
            real = [o for o in options if o != ""]
            omittable = "" in options and arg not in required
            if arg not in known or not real:
                if omittable:
                    continue  # e.g. an optional key the schema does not even declare
                why = "not in the function schema" if arg not in known else "no acceptable value"
                raise GroundTruthQuirk(f"{name}.{arg}: {why}; ground truth options {options!r:.80}")
            if options[0] == "" and omittable:
                continue
            arguments[arg] = _written(real[0])
        calls.append({"name": name, "arguments": arguments})
    return calls


def _method_signatures(involved_classes: list[str]) -> dict[str, inspect.Signature]:
    sigs: dict[str, inspect.Signature] = {}
    for class_name in involved_classes:
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
        for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
            if not name.startswith("_"):
                sigs[name] = inspect.signature(fn)  # a later class wins, as in the executor
    return sigs


def multi_turn_calls(call_strings: list[str], sigs: dict[str, inspect.Signature]) -> list[dict]:
    calls = []
    for text in call_strings:
        spec = parse_call_string(text)
        if spec.args:
            if spec.name not in sigs:
                raise ValueError(f"positional arguments for unknown method in {text!r}")
            bound = sigs[spec.name].bind(None, *spec.args, **spec.kwargs)  # None stands for self
            arguments = {k: v for k, v in bound.arguments.items() if k != "self"}
        else:
            arguments = dict(spec.kwargs)
        calls.append({"name": spec.name, "arguments": arguments})
    return calls


def relevance_call(prompt_entry: dict) -> dict:
    """A call to the first function whose name is writable as a call (relevance checks only that a call exists)."""
    for fn in prompt_entry["function"]:
        try:
            format_tool_calls([{"name": fn["name"], "arguments": {}}], "python")
        except ValueError:
            continue
        return {"name": fn["name"], "arguments": {}}
    return {"name": "call_a_tool", "arguments": {}}  # e.g. names with spaces or dashes


def ground_truth_output(
    category: str, prompt_entry: dict, truth_entry: dict | None, output_format: str
) -> str | list[list[str]]:
    """The `result` field a perfect model would produce for this entry, in `output_format`."""
    if is_java(category) or is_js(category):
        raise UnsupportedCategory(f"{category}: ground truth in Java/JavaScript syntax is not converted")
    if is_relevance_or_irrelevance(category):
        if "irrelevance" in category:
            return NO_CALL_TEXT
        return format_tool_calls([relevance_call(prompt_entry)], output_format)
    if truth_entry is None:
        raise ValueError(f"{category}: ground truth missing for {prompt_entry['id']}")
    if is_multi_turn(category):
        sigs = _method_signatures(prompt_entry["involved_classes"])
        turns = []
        for turn in truth_entry["ground_truth"]:
            steps = [format_tool_calls(multi_turn_calls(turn, sigs), output_format)] if turn else []
            turns.append([*steps, TURN_DONE_TEXT])
        return turns
    return format_tool_calls(ast_calls(truth_entry["ground_truth"], prompt_entry["function"]), output_format)
