"""The eval-free multi-turn executor behaves like bfcl-eval's eval-based one, and runs nothing else."""

import copy

import pytest
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils
from bfcl_eval.model_handler import base_handler
from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

from toolcall_repro.eval.bfcl import execute
from toolcall_repro.eval.bfcl.execute import (
    CallSpec,
    CallSyntaxError,
    DecodedCall,
    dispatching_executor,
    execute_multi_turn_func_call,
    forget_instances,
    parse_call_string,
)


def _public_state(instances):
    return {
        name: {k: v for k, v in vars(obj).items() if not k.startswith("_")} for name, obj in instances.items()
    }


@pytest.mark.parametrize("category", ["multi_turn_base", "multi_turn_long_context"])
def test_ground_truth_replay_matches_bfcl_eval_executor(category):
    prompts = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)[:6]
    truths = load_ground_truth_entry(category)[:6]
    long_context = "long_context" in category
    for prompt, truth in zip(prompts, truths, strict=True):
        for turn in truth["ground_truth"]:
            ours, our_inst = execute_multi_turn_func_call(
                turn, prompt["initial_config"], prompt["involved_classes"], "ours", prompt["id"], long_context
            )
            theirs, their_inst = multi_turn_utils.execute_multi_turn_func_call(
                turn,
                prompt["initial_config"],
                prompt["involved_classes"],
                "theirs",
                prompt["id"],
                long_context,
            )
            assert ours == theirs, prompt["id"]
            assert _public_state(our_inst) == _public_state(their_inst), prompt["id"]
        forget_instances(prompt["id"])


def test_instances_persist_across_turns_until_forgotten():
    prompt = load_dataset_entry("multi_turn_base", include_prereq=False)[0]
    cfg, classes = prompt["initial_config"], prompt["involved_classes"]
    _, first = execute_multi_turn_func_call([], cfg, classes, "m", prompt["id"])
    _, again = execute_multi_turn_func_call([], cfg, classes, "m", prompt["id"])
    _, scoring = execute_multi_turn_func_call([], cfg, classes, "m", prompt["id"], is_evaL_run=True)
    assert all(first[c] is again[c] for c in classes)
    assert all(first[c] is not scoring[c] for c in classes)  # scoring replays on fresh instances
    assert forget_instances(prompt["id"]) == 2 * len(classes)
    _, fresh = execute_multi_turn_func_call([], cfg, classes, "m", prompt["id"])
    assert all(fresh[c] is not first[c] for c in classes)
    forget_instances(prompt["id"])


def test_decoded_calls_dispatch_and_errors_read_like_bfcl():
    prompt = load_dataset_entry("multi_turn_base", include_prereq=False)[0]
    calls = [
        DecodedCall("ls", {}),
        DecodedCall("cd", {"folder": "no_such_folder"}),
        DecodedCall("no_such_tool", {"x": 1}),
        DecodedCall("exit", {}),
        DecodedCall("ls", {"bogus_argument": 1}),
    ]
    results, _ = execute_multi_turn_func_call(
        calls, prompt["initial_config"], prompt["involved_classes"], "m", prompt["id"]
    )
    theirs, _ = multi_turn_utils.execute_multi_turn_func_call(
        [str(c) for c in calls], prompt["initial_config"], prompt["involved_classes"], "t", prompt["id"]
    )
    forget_instances(prompt["id"])
    assert results == theirs
    assert results[2] == "Error during execution: name 'no_such_tool' is not defined"
    assert results[3] == "Error during execution: Function call exit is not allowed."


def test_model_text_is_never_evaluated(tmp_path):
    marker = tmp_path / "pwned"
    hostile = f"ls(a=open({str(marker)!r}, 'w'))"
    with pytest.raises(CallSyntaxError):
        parse_call_string(hostile)
    prompt = load_dataset_entry("multi_turn_base", include_prereq=False)[0]
    results, _ = execute_multi_turn_func_call(
        [hostile, "__import__('os')"], prompt["initial_config"], prompt["involved_classes"], "m", prompt["id"]
    )
    forget_instances(prompt["id"])
    assert all(r.startswith("Error during execution") for r in results)
    assert not marker.exists()


def test_parse_call_string_reads_literals_only():
    spec = parse_call_string("mean([1, 2.5], key={'a': (1, -2)}, flag=True)")
    assert spec.name == "mean" and spec.args == ([1, 2.5],)
    assert spec.kwargs == {"key": {"a": (1, -2)}, "flag": True}
    for bad in ["x + 1", "f(**kw)", "f(a=b)", "f(", "(lambda: 1)()"]:
        with pytest.raises(CallSyntaxError):
            parse_call_string(bad)


def test_decoded_call_text_is_bfcl_execution_syntax():
    call = DecodedCall("mv", {"source": "a.txt", "destination": "b"})
    assert call == "mv(source='a.txt', destination='b')"
    assert call.spec == CallSpec("mv", (), {"source": "a.txt", "destination": "b"})


def test_nested_calls_run_first_like_bfcl_eval_and_still_nothing_is_evaluated():
    # bfcl's decoder keeps `f(a=g(b=1))` as {f: {a: {g: {b: 1}}}}; its execution text calls g first
    prompt = load_dataset_entry("multi_turn_base", include_prereq=False)[0]
    texts = ["cd(folder=pwd())", "echo(content=pwd(), file_name=ls(a=True))", "cd(folder=open(file='x'))"]
    calls = [DecodedCall.from_text(t) for t in texts]
    results, _ = execute_multi_turn_func_call(
        calls, prompt["initial_config"], prompt["involved_classes"], "m", prompt["id"]
    )
    theirs, _ = multi_turn_utils.execute_multi_turn_func_call(
        texts[:2], prompt["initial_config"], prompt["involved_classes"], "t", prompt["id"]
    )
    forget_instances(prompt["id"])
    assert results[:2] == theirs
    assert results[2] == "Error during execution: name 'open' is not defined"


def test_dispatching_executor_patches_both_bfcl_modules_and_restores():
    originals = (base_handler.execute_multi_turn_func_call, multi_turn_checker.execute_multi_turn_func_call)
    with dispatching_executor():
        assert base_handler.execute_multi_turn_func_call is execute.execute_multi_turn_func_call
        assert multi_turn_checker.execute_multi_turn_func_call is execute.execute_multi_turn_func_call
    assert (
        base_handler.execute_multi_turn_func_call,
        multi_turn_checker.execute_multi_turn_func_call,
    ) == originals
    with pytest.raises(RuntimeError), dispatching_executor():
        raise RuntimeError("boom")
    assert base_handler.execute_multi_turn_func_call is originals[0]


def test_initial_config_is_not_mutated():
    prompt = load_dataset_entry("multi_turn_base", include_prereq=False)[1]
    before = copy.deepcopy(prompt["initial_config"])
    execute_multi_turn_func_call(
        [DecodedCall("mkdir", {"dir_name": "new_dir"})],
        prompt["initial_config"],
        prompt["involved_classes"],
        "m",
        prompt["id"],
    )
    forget_instances(prompt["id"])
    assert prompt["initial_config"] == before
