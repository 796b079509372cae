"""Our Qwen handler inside bfcl-eval's own inference loop: prompt, seeds, history, parsing, registration."""

import copy
from types import SimpleNamespace

import pytest
from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING
from bfcl_eval.utils import load_dataset_entry
from transformers import AutoTokenizer

from toolcall_repro.eval.bfcl import groundtruth
from toolcall_repro.eval.bfcl.execute import dispatching_executor, forget_instances
from toolcall_repro.eval.bfcl.handler import (
    ProtocolQwenHandler,
    build_handler,
    history_message,
    query_seed,
    register,
    registry_name_for,
)
from toolcall_repro.eval.bfcl.score import first_query_input_tokens, load_category, score_category
from toolcall_repro.protocol import Protocol, render


def test_registry_names_never_contain_underscores():
    assert registry_name_for("rl_multi") == "toolcallrepro-rl-multi"
    with pytest.raises(ValueError):
        register("toolcallrepro_bad", "x")
    register("toolcallrepro-reg", "some/model")
    assert MODEL_CONFIG_MAPPING["toolcallrepro-reg"].model_handler is ProtocolQwenHandler
    assert isinstance(build_handler("toolcallrepro-reg"), ProtocolQwenHandler)


def test_query_seeds_are_reproducible_and_distinct():
    seeds = {query_seed(0, e, k) for e in ("a", "b") for k in range(50)}
    assert len(seeds) == 100
    assert query_seed(3, "a", 1) == query_seed(3, "a", 1) != query_seed(4, "a", 1)


def test_history_message_survives_truncated_and_stray_think():
    assert history_message("", "") is None
    assert history_message("<think>cut off mid tho", "") == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "cut off mid tho",
    }
    assert history_message("a <think> b", "r")["content"] == "a  b"
    assert history_message("x\ue000y", "")["content"] == "xy"


class ScriptedModel:
    """Plays back fixed outputs in order and records every prompt and seed it was given."""

    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.calls = []

    def __call__(self, prompt, seed):
        self.calls.append((prompt, seed))
        text = self.outputs.pop(0)
        return SimpleNamespace(text=text, prompt_tokens=len(prompt), completion_tokens=len(text))


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.parametrize(
    ("category", "system_prompt", "template"),
    [
        ("multi_turn_base", "bfcl_default", "native"),
        ("multi_turn_miss_func", "stronger", "context"),
        ("multi_turn_miss_param", "stronger", "native"),
    ],
)
def test_perfect_scripted_model_runs_bfcl_loop_and_scores_full_marks(
    tokenizer, category, system_prompt, template
):
    protocol = Protocol(system_prompt=system_prompt, template=template, seed=5)
    prompts, truths = load_category(category)
    entry = load_dataset_entry(category, include_prereq=False)[0]
    turns = groundtruth.ground_truth_output(category, prompts[0], truths[0], protocol.output_format)
    model = ScriptedModel([step for turn in turns for step in turn])
    register("toolcallrepro-scripted", "scripted")
    handler = build_handler("toolcallrepro-scripted").bind(
        output_format=protocol.output_format,
        prompt_fn=lambda m, t: render(m, t, protocol, tokenizer),
        generate_fn=model,
        seed=protocol.seed,
    )
    with dispatching_executor():
        result, meta = handler.inference(
            copy.deepcopy(entry), include_input_log=False, exclude_state_log=True
        )
    forget_instances(entry["id"])

    assert result == turns and model.outputs == []
    assert [s for _, s in model.calls] == [query_seed(5, entry["id"], k) for k in range(len(model.calls))]
    # tool results of the first call step reach the next prompt, in the protocol's own prompt text
    first_call_step = next(i for i, (p, _) in enumerate(model.calls) if i + 1 < len(model.calls))
    assert (
        "<tool_response>" in model.calls[first_call_step + 1][0]
        or "TOOL RESPONSE" in model.calls[first_call_step + 1][0]
    )
    assert "You are an expert in composing functions" in model.calls[0][0] or system_prompt == "stronger"
    scored = score_category(handler, category, [{"id": entry["id"], "result": result}])
    assert scored["correct"] == 1, scored["entries"]
    # bfcl's per-step token counts come from our Generation.prompt_tokens (here: characters)
    assert meta["input_token_count"][0][0] == len(model.calls[0][0])
    line = {"id": entry["id"], "result": result, **meta}
    assert first_query_input_tokens(line) == len(model.calls[0][0]) < len(model.calls[-1][0])


def test_single_turn_entry_gets_one_query_and_think_is_split(tokenizer):
    protocol = Protocol(system_prompt="stronger")
    entry = load_dataset_entry("simple_python", include_prereq=False)[0]
    call = '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>'
    model = ScriptedModel([f"<think>\nbase 10, height 5\n</think>\n\n{call}"])
    register("toolcallrepro-single", "scripted")
    handler = build_handler("toolcallrepro-single").bind(
        output_format="xml_json", prompt_fn=lambda m, t: render(m, t, protocol, tokenizer), generate_fn=model
    )
    result, meta = handler.inference(copy.deepcopy(entry), include_input_log=False, exclude_state_log=True)
    assert result == call and meta["reasoning_content"] == "base 10, height 5"
    assert len(model.calls) == 1 and "calculate_triangle_area" in model.calls[0][0]
    assert first_query_input_tokens({"id": entry["id"], "result": result, **meta}) == len(model.calls[0][0])
    scored = score_category(handler, "simple_python", [{"id": entry["id"], "result": result}])
    assert scored["correct"] == 1


def test_unbound_handler_refuses_to_generate():
    register("toolcallrepro-unbound", "x")
    handler = build_handler("toolcallrepro-unbound")
    entry = load_dataset_entry("simple_python", include_prereq=False)[0]
    with pytest.raises(RuntimeError, match="not bound"):
        handler.inference(copy.deepcopy(entry), include_input_log=False, exclude_state_log=True)
