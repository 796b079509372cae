"""Multi-turn execution without `eval`: parsed calls are dispatched to bfcl-eval's backend methods.

bfcl-eval executes every call by rewriting its text into `instance.method(...)` and passing it to `eval`,
both while generating (the handler's multi-turn loop) and while scoring (`multi_turn_checker`). We swap
that one function, in those two modules only, for `execute_multi_turn_func_call` below: same signature,
same instance lifetime (one per model, entry and class, kept across turns), same result strings, but a
call reaches a backend only as `getattr(instance, name)(*args, **kwargs)` with literal arguments.

Model calls arrive as `DecodedCall`: bfcl-eval's own execution text for the decoded call (see decode.py),
read here with `ast`: literal arguments through `ast.literal_eval`, and a nested call (bfcl writes
`f(a=g(b=1))` for a decoded `{f: {a: {g: {b: 1}}}}` and its `eval` runs `g` first) dispatched to a backend
method the same way and its value passed on. Plain strings are ground truth from the benchmark files (some
use positional arguments): literals only. The state and response comparison stays bfcl-eval's own
`multi_turn_checker`.
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

from toolcall_repro.toolcall.python_list import dotted_name

# bfcl-eval refuses these names before its eval; we keep the same answer so tool messages match.
FORBIDDEN_NAMES = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})


class CallSyntaxError(ValueError):
    """A ground-truth call string that is not `name(literal, ..., key=literal, ...)`."""


class DecodedCall(str):
    """One decoded model call: its string value is bfcl-eval's execution text (what bfcl would `eval`)."""

    def __new__(cls, name: str, arguments: Mapping[str, Any]) -> DecodedCall:
        (text,) = decoded_output_to_execution_list([{name: dict(arguments)}])
        return super().__new__(cls, text)

    @classmethod
    def from_text(cls, text: str) -> DecodedCall:
        return str.__new__(cls, text)

    @property
    def spec(self) -> CallSpec:
        return parse_call_string(self, nested=True)


@dataclass(frozen=True)
class CallSpec:
    name: str
    args: tuple
    kwargs: dict


def _argument(node: ast.expr, text: str, nested: bool) -> Any:
    if nested and isinstance(node, ast.Call):
        return _call_spec(node, text, nested)
    if nested and isinstance(node, ast.Dict) and None not in node.keys:
        return {
            ast.literal_eval(k): _argument(v, text, nested)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    return ast.literal_eval(node)


def _call_spec(node: ast.Call, text: str, nested: bool) -> CallSpec:
    try:
        args = tuple(_argument(a, text, nested) for a in node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise CallSyntaxError(f"**kwargs in call: {text!r}")
            kwargs[kw.arg] = _argument(kw.value, text, nested)
    except (ValueError, TypeError, SyntaxError, RecursionError) as e:
        raise CallSyntaxError(f"non-literal argument in {text!r}: {e}") from None
    name = dotted_name(node.func)
    if name is None:
        raise CallSyntaxError(f"call target is not a (dotted) name: {ast.unparse(node.func)!r}")
    return CallSpec(name, args, kwargs)


def parse_call_string(text: str, nested: bool = False) -> CallSpec:
    """Read `name(1, 'a', k=[2])` into its parts; arguments are Python literals (nothing is run).

    `nested`: an argument may also be a call (`f(a=g(b=1))`), kept as a CallSpec for the executor.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise CallSyntaxError(f"not a call: {text[:200]!r} ({e})") from None
    if not isinstance(node, ast.Call):
        raise CallSyntaxError(f"not a call: {text[:200]!r}")
    return _call_spec(node, text, nested)


def as_call_spec(call: str) -> CallSpec:
    return call.spec if isinstance(call, DecodedCall) else parse_call_string(call)


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

    def run(spec: CallSpec) -> Any:
        if spec.name in FORBIDDEN_NAMES:
            raise PermissionError(f"Function call {spec.name} is not allowed.")
        owner = method_owner.get(spec.name)
        if owner is None:
            raise NameError(f"name '{spec.name.split('.')[0]}' is not defined")
        args = [value(a) for a in spec.args]  # nested calls run first, as Python's eval would run them
        kwargs = {k: value(v) for k, v in spec.kwargs.items()}
        return getattr(owner, spec.name)(*args, **kwargs)

    def value(v: Any) -> Any:
        if isinstance(v, CallSpec):
            return run(v)
        if isinstance(v, dict) and any(isinstance(x, CallSpec) for x in v.values()):
            return {k: value(x) for k, x in v.items()}
        return v

    results = []
    for call in func_call_list:
        try:
            results.append(_result_text(run(as_call_spec(call))))
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
