"""Multi-turn execution without `eval`: parsed calls are dispatched to bfcl-eval's backend methods.

bfcl-eval executes every call by rewriting its text into `instance.method(...)` and passing it to `eval`,
both while generating (the handler's multi-turn loop) and while scoring (`multi_turn_checker`). We swap
that one function, in those two modules only, for `execute_multi_turn_func_call` below: same signature,
same instance lifetime (one per model, entry and class, kept across turns), same result strings, but a
call reaches a backend only as `getattr(instance, name)(*args, **kwargs)` with literal arguments.

Model calls arrive as `DecodedCall` (already parsed by `toolcall.parse_tool_calls`); plain strings are
ground truth from the benchmark files (some use positional arguments), read with `ast.literal_eval` per
argument. The state and response comparison stays bfcl-eval's own `multi_turn_checker`.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib
import inspect
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES
from bfcl_eval.model_handler.utils import decoded_output_to_execution_list

# bfcl-eval refuses these names before its eval; we keep the same answer so tool messages match.
FORBIDDEN_NAMES = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})


class CallSyntaxError(ValueError):
    """A ground-truth call string that is not `name(literal, ..., key=literal, ...)`."""


class DecodedCall(str):
    """One parsed model call. The string value is bfcl-eval's execution text, for logs and tool messages."""

    name: str
    arguments: dict[str, Any]

    def __new__(cls, name: str, arguments: Mapping[str, Any]) -> DecodedCall:
        (text,) = decoded_output_to_execution_list([{name: dict(arguments)}])
        obj = super().__new__(cls, text)
        obj.name = name
        obj.arguments = dict(arguments)
        return obj


@dataclass(frozen=True)
class CallSpec:
    name: str
    args: tuple
    kwargs: dict


def _dotted_name(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise CallSyntaxError(f"call target is not a (dotted) name: {ast.unparse(node)!r}")
    parts.append(node.id)
    return ".".join(reversed(parts))


def parse_call_string(text: str) -> CallSpec:
    """Read `name(1, 'a', k=[2])` into its parts; arguments must be Python literals (nothing is run)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise CallSyntaxError(f"not a call: {text!r} ({e.msg})") from None
    if not isinstance(node, ast.Call):
        raise CallSyntaxError(f"not a call: {text!r}")
    try:
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise CallSyntaxError(f"**kwargs in call: {text!r}")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except ValueError as e:
        raise CallSyntaxError(f"non-literal argument in {text!r}: {e}") from None
    return CallSpec(_dotted_name(node.func), args, kwargs)


def as_call_spec(call: str) -> CallSpec:
    if isinstance(call, DecodedCall):
        return CallSpec(call.name, (), dict(call.arguments))
    return parse_call_string(call)


# (model key, entry id, class name) -> backend instance; bfcl-eval keeps the same in module globals.
_INSTANCES: dict[tuple[str, str, str], Any] = {}


def forget_instances(test_entry_id: str) -> int:
    """Drop every backend instance of one entry so that it can be run or scored again in this process."""
    keys = [k for k in _INSTANCES if k[1] == test_entry_id]
    for k in keys:
        del _INSTANCES[k]
    return len(keys)


def _instance(model_key: str, test_entry_id: str, class_name: str, initial_config: dict, long_context: bool):
    key = (model_key, test_entry_id, class_name)
    if key not in _INSTANCES:
        module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
        instance = getattr(module, class_name)()
        if class_name not in STATELESS_CLASSES:
            instance._load_scenario(
                copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context
            )
        _INSTANCES[key] = instance
    return _INSTANCES[key]


def _result_text(value: Any) -> str:
    # Same stringification as bfcl-eval, so that the response checker compares like with like.
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def execute_multi_turn_func_call(
    func_call_list: Sequence[str],
    initial_config: dict,
    involved_classes: list,
    model_name: str,
    test_entry_id: str,
    long_context: bool = False,
    is_evaL_run: bool = False,  # noqa: N803 - bfcl-eval's keyword name, kept for a drop-in swap
) -> tuple[list[str], dict]:
    """Drop-in for bfcl-eval's function of the same name; returns (result strings, {class: instance})."""
    model_key = model_name + "_eval" if is_evaL_run else model_name
    instances = {}
    method_owner: dict[str, Any] = {}
    for class_name in involved_classes:
        instance = _instance(model_key, test_entry_id, class_name, initial_config, long_context)
        instances[class_name] = instance
        for method_name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not method_name.startswith("_"):
                method_owner[method_name] = instance  # a later class wins, as in bfcl-eval

    results = []
    for call in func_call_list:
        try:
            spec = as_call_spec(call)
            if spec.name in FORBIDDEN_NAMES:
                raise PermissionError(f"Function call {spec.name} is not allowed.")
            owner = method_owner.get(spec.name)
            if owner is None:
                raise NameError(f"name '{spec.name.split('.')[0]}' is not defined")
            results.append(_result_text(getattr(owner, spec.name)(*spec.args, **spec.kwargs)))
        except Exception as e:  # noqa: BLE001 - a failing tool call is an observation for the model
            results.append(f"Error during execution: {e}")
    return results, instances


_PATCHED_MODULES = (
    "bfcl_eval.model_handler.base_handler",
    "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker",
)


@contextlib.contextmanager
def dispatching_executor() -> Iterator[None]:
    """Route bfcl-eval's multi-turn loop and checker through `execute_multi_turn_func_call` above."""
    modules = [importlib.import_module(m) for m in _PATCHED_MODULES]
    saved = [m.execute_multi_turn_func_call for m in modules]
    for m in modules:
        m.execute_multi_turn_func_call = execute_multi_turn_func_call
    try:
        yield
    finally:
        for m, original in zip(modules, saved, strict=True):
            m.execute_multi_turn_func_call = original
