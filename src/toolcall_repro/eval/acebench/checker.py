"""ACEBench's checks for the normal and special categories, reimplemented from its definition.

Semantics follow upstream `model_eval/checker.py` at the pinned commit, including what it does not check,
so that our numbers mean what ACEBench's leaderboard numbers mean:
- a call matches when the names agree (a ground-truth key `f_1` stands for a second call of `f`), every
  required argument is given, and every given argument appears in the ground truth (optional ground-truth
  arguments may be left out);
- a value is checked only when the ground truth's Python type is the type the schema declares
  (`number` maps to int, so a float ground truth for a `number` argument is never compared);
- strings: the standardised ground truth must be a substring of the standardised value; lists: equal
  after standardising top-level strings; objects: same keys, then each leaf value's text must contain the
  ground truth's text; integers, floats and booleans at the top level are type-checked only.
- each ground-truth call is answered by any same-named output call that passes (not a one-to-one match).
Calls arrive parsed by `toolcall.parse_tool_calls` (`[{"name", "arguments"}]`), which, unlike upstream's
reader, also takes one bare call without brackets and refuses bare identifiers as values.

Three upstream defects fail even the ground truth; we fix them unless `upstream=True` (then the ground
truth scores 0.907 on the normal group instead of 1.0):
1. upstream removes all whitespace from the raw output before parsing, so a list of strings with spaces
   inside an object never matches (we keep whitespace; `strip_whitespace` reproduces the defect);
2. an empty ground-truth list leaves the item type check nothing to pass on, so every answer fails
   (we pass it);
3. an `array` without an item schema is taken for a list of objects, so a list of strings fails
   (we compare it as a plain list unless the ground-truth items are objects).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Schema type name -> Python type ACEBench compares against; `enum` maps to a type no value ever has.
_NEVER = type("_NoValueHasThisType", (), {})
DECLARED_TYPES: dict[str, type] = {
    "string": str,
    "any": str,
    "integer": int,
    "int": int,
    "number": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "list": list,
    "tuple": list,
    "list(string)": list,
    "list(enum)": list,
    "objectArray": list,
    "object": dict,
    "dict": dict,
    "enum": _NEVER,
}
# Declared types whose items ACEBench type-checks (note: `dict` and `list` are not among them upstream).
_NESTED_DECLARED = {"array", "tuple", "list(string)", "list(enum)", "object", "objectArray"}
_SUFFIX = re.compile(r"_\d+$")
_STANDARDISE = re.compile(r"[ ,./\-_*^]")
_WHITESPACE = re.compile(r"\s+")

MISSING_PHRASE = "Missing necessary parameters"
INCORRECT_PHRASE = "There is incorrect value"
IRRELEVANT_PHRASE = "the limitations of the function"


@dataclass(frozen=True)
class Verdict:
    valid: bool
    error: str = ""

    @classmethod
    def fail(cls, kind: str, detail: str) -> Verdict:
        return cls(False, f"[{kind}] {detail}")


OK = Verdict(True)


def standardise(text: str) -> str:
    """ACEBench's string normal form: drop ` ,./-_*^`, lower-case, `'` -> `"`."""
    return _STANDARDISE.sub("", text).lower().replace("'", '"')


def strip_whitespace(value: object) -> object:
    """Remove whitespace inside every string (keys too), as upstream's `"".join(raw.split())` does."""
    if isinstance(value, str):
        return _WHITESPACE.sub("", value)
    if isinstance(value, Mapping):
        return {strip_whitespace(k): strip_whitespace(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strip_whitespace(v) for v in value]
    return value


def base_name(key: str) -> str:
    """A ground-truth key `f_2` names a further call of `f`."""
    return _SUFFIX.sub("", key)


def _as_bool_literal(value: object) -> object:
    return {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value


def _type_ok(
    value: object, truth: object, declared: type, nested: type | None, upstream: bool = False
) -> tuple[bool, bool]:
    """ACEBench's type check. Returns (passes, value_is_free); a free value is not compared afterwards."""
    truth_type = None if truth == "" else type(truth)
    free = truth_type is not None and truth_type is not declared
    value = _as_bool_literal(value)
    nested_failed = False
    if type(value) is declared:
        if nested is None:
            return True, free
        items = truth if isinstance(truth, list | tuple | dict | str) else ()
        if not items and not upstream:
            return True, free  # defect 2
        for truth_item in items:
            if type(truth_item) is not list:
                return True, free
            if all(_type_ok(v, truth_item, nested, None)[0] for v in value):
                return True, free
        nested_failed = True
    if truth_type is not None and (type(value) is truth_type or truth == value):
        return not nested_failed, True
    return False, free


def _dict_ok(value: object, truth: object) -> bool:
    if not isinstance(value, dict) or not isinstance(truth, dict) or len(value) != len(truth):
        return False
    for key, item in value.items():
        item = _as_bool_literal(item)
        if key not in truth:
            return False
        expected = truth[key]
        if isinstance(expected, dict):
            if not _dict_ok(item, expected):
                return False
            continue
        shown = standardise(item) if isinstance(item, str) else item
        wanted = standardise(expected) if isinstance(expected, str) else expected
        if str(wanted) not in str(shown):
            return False
    return True


def _list_ok(value: list, truth: object) -> bool:
    if not isinstance(truth, list | tuple):
        return False
    norm = [standardise(v) if isinstance(v, str) else v for v in value]
    return norm == [standardise(t) if isinstance(t, str) else t for t in truth]


def _all_objects(truth: object) -> bool:
    return isinstance(truth, list) and all(isinstance(t, dict) for t in truth)


def _nested_type(schema: Mapping) -> type | None:
    items = schema.get("items")
    if isinstance(items, Mapping) and "type" in items:
        name = items["type"]
    elif "string" in schema["type"]:
        name = "string"
    elif "enum" in schema["type"]:
        name = "enum"
    else:
        name = "dict"
    return DECLARED_TYPES.get(name)


def check_call(function: Mapping, call: Mapping, truth_args: Mapping, upstream: bool = False) -> Verdict:
    """One parsed call against one ground-truth call of the same name (upstream `simple_function_checker`)."""
    name, args = call["name"], call["arguments"]
    params = function.get("parameters")
    if not isinstance(params, Mapping):
        return Verdict.fail("schema", f"function {name} has no parameter schema")
    if not args and not params:
        return OK
    if not args or not params:
        return Verdict.fail("wrong_param", f"{name}: arguments {args!r} against schema {params!r}")
    properties = params.get("properties", {})
    if truth_args == properties:
        return OK
    if not truth_args:
        return Verdict.fail("wrong_param", f"{name}: ground truth has no arguments")
    for required in params.get("required", []):
        if required not in args:
            return Verdict.fail("lack_args", f"{name}: missing required argument {required}")
    for param, value in args.items():
        if param not in properties or param not in truth_args:
            return Verdict.fail("addition_args", f"{name}: unexpected argument {param}")
        schema = properties[param]
        declared_name = schema.get("type") if isinstance(schema, Mapping) else None
        declared = DECLARED_TYPES.get(declared_name) if isinstance(declared_name, str) else None
        if declared is None:
            return Verdict.fail("schema", f"{name}.{param}: unknown schema type {declared_name!r}")
        nested = _nested_type(schema) if declared_name in _NESTED_DECLARED else None
        if declared_name in _NESTED_DECLARED and nested is None:
            return Verdict.fail("schema", f"{name}.{param}: unknown item type in {schema.get('items')!r}")
        if declared_name == "tuple" and isinstance(value, tuple):
            value = list(value)
        if declared_name == "float" and type(value) is int:
            value = float(value)
        truth = truth_args[param]
        passes, free = _type_ok(value, truth, declared, nested, upstream)
        if not passes:
            return Verdict.fail("type_error", f"{name}.{param}: {value!r} is not {declared_name}")
        if free:
            continue
        if declared is dict:
            ok = _dict_ok(value, truth)
        elif declared is list and nested is dict and (upstream or _all_objects(truth)):  # defect 3
            ok = isinstance(truth, list) and len(value) == len(truth)
            ok = ok and all(_dict_ok(v, t) for v, t in zip(value, truth, strict=True))
        elif declared is str:
            ok = isinstance(value, str) and standardise(str(truth)) in standardise(value)
        elif declared is list:
            ok = _list_ok(value, truth)
        else:
            ok = True  # ACEBench does not compare int/float/bool values
        if not ok:
            return Verdict.fail("wrong_value", f"{name}.{param}: expected {truth!r}, got {value!r}")
    return OK


def check_calls(
    functions: Sequence[Mapping], calls: Sequence[Mapping], truth: Mapping, upstream: bool = False
) -> Verdict:
    """All parsed calls of one answer against one ground-truth dict {name[_k]: args} (`normal_checker`)."""
    if len(calls) != len(truth):
        return Verdict.fail("wrong_count", f"{len(calls)} calls, expected {len(truth)}")
    truth_calls = [(base_name(key), args) for key, args in truth.items()]
    got, want = Counter(c["name"] for c in calls), Counter(n for n, _ in truth_calls)
    if got != want:
        extra = sorted((got - want).keys())
        missing = sorted((want - got).keys())
        return Verdict.fail("function_mismatch", f"unexpected {extra}, missing {missing}")
    by_name = {f.get("name"): f for f in functions}
    for name, args in truth_calls:
        function = by_name.get(name)
        if function is None:
            return Verdict.fail("schema", f"ground-truth function {name} is not among the entry's functions")
        verdict = Verdict.fail("wrong_function", name)
        # Upstream accepts a ground-truth call if any same-named output call passes (not a bijection).
        for call in calls:
            if call["name"] == name:
                verdict = check_call(function, call, args, upstream)
                if verdict.valid:
                    break
        if not verdict.valid:
            return verdict
    return OK


def check_normal(
    functions: Sequence[Mapping], calls: Sequence[Mapping], ground_truth: object, upstream: bool = False
) -> Verdict:
    """Parsed calls against the ground truth, which may list alternatives; the first alternative's error wins."""
    alternatives = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    first_error: Verdict | None = None
    for truth in alternatives:
        if not isinstance(truth, Mapping):
            return Verdict.fail("data", f"ground truth is not an object: {truth!r}")
        if upstream:
            calls = [
                {"name": c["name"], "arguments": strip_whitespace(c["arguments"])} for c in calls
            ]  # defect 1
        verdict = check_calls(functions, calls, truth, upstream)
        if verdict.valid:
            return OK
        first_error = first_error or verdict
    return first_error or Verdict.fail("data", "empty ground truth")


def check_special(category: str, text: str, ground_truth: object) -> Verdict:
    """Special categories are judged on the answer text: the fixed phrase plus every named item."""
    if category == "special_irrelevant":
        if IRRELEVANT_PHRASE not in text:
            return Verdict.fail("error_detection", f"answer does not say {IRRELEVANT_PHRASE!r}")
        return OK
    if not isinstance(ground_truth, Mapping):
        return Verdict.fail("data", f"ground truth is not an object: {ground_truth!r}")
    if category == "special_incomplete":
        for name, values in ground_truth.items():
            if MISSING_PHRASE not in text:
                return Verdict.fail("error_detection", f"answer does not say {MISSING_PHRASE!r}")
            if name not in text:
                return Verdict.fail("error_correction", f"answer does not name the function {name}")
            for value in values:
                if value not in text:
                    return Verdict.fail("error_correction", f"answer does not name the parameter {value!r}")
        return OK
    if category == "special_error_param":
        for _param, values in ground_truth.items():
            if INCORRECT_PHRASE not in text:
                return Verdict.fail("error_detection", f"answer does not say {INCORRECT_PHRASE!r}")
            for value in values:
                if value not in text:
                    return Verdict.fail("error_correction", f"answer does not quote the value {value!r}")
        return OK
    raise ValueError(f"{category} is not a special category")
