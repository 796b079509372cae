import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from toolcall_repro import protocol as protocol_module
from toolcall_repro.protocol import (
    PAPER_PROMPTS,
    PROMPT_FORMATS,
    Protocol,
    load_chat_template,
    protocol_card,
    render,
    system_prompt_template,
    system_prompt_text,
)
from toolcall_repro.toolcall import parse_tool_calls

GOLDEN = Path(__file__).parent / "data" / "protocol_golden"
PROMPTS_DIR = Path(protocol_module.__file__).parent / "prompts"

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]

# Three user turns; turns 1 and 2 are finished, turn 3 is mid-way (a call made, its response back).
CONVERSATION = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The user wants Paris weather.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
    },
    {"role": "tool", "content": '{"temp_c": 21}'},
    {"role": "assistant", "content": "It is 21 C in Paris.", "reasoning_content": "Report it."},
    {"role": "user", "content": "Thanks. Is it warmer in Rome?"},
    {
        "role": "assistant",
        "content": "<think>\nCompare with Rome.\n</think>\n\n",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}],
    },
    {"role": "tool", "content": '{"temp_c": 25}'},
    {"role": "assistant", "content": "Yes, Rome is 4 C warmer.", "reasoning_content": "25 > 21."},
    {"role": "user", "content": "And Oslo?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Now Oslo.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
    },
    {"role": "tool", "content": '{"temp_c": 9}'},
]


def make_tokenizer(chat_template: str | None = None) -> PreTrainedTokenizerFast:
    model = models.WordLevel({"<unk>": 0, "<|im_start|>": 1, "<|im_end|>": 2}, unk_token="<unk>")
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>")
    tok.chat_template = load_chat_template() if chat_template is None else chat_template
    return tok


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


# --------------------------------------------------------------------------------------------------------
# golden prompts
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", ["native", "context"])
@pytest.mark.parametrize("thinking", ["keep", "drop"])
def test_golden_prompts(template, thinking, tokenizer):
    proto = Protocol(system_prompt="fmt_xml", template=template, thinking=thinking)
    expected = (GOLDEN / f"{template}_{thinking}.txt").read_text(encoding="utf-8")
    assert render(CONVERSATION, TOOLS, proto, tokenizer) == expected


@pytest.mark.parametrize("output_format_prompt", ["fmt_xml", "fmt_python", "stronger"])
def test_context_template_leaves_single_turn_requests_native(tokenizer, output_format_prompt):
    single = [{"role": "user", "content": "weather in Paris?"}]
    native = render(single, TOOLS, Protocol(system_prompt=output_format_prompt), tokenizer)
    context = render(
        single, TOOLS, Protocol(system_prompt=output_format_prompt, template="context"), tokenizer
    )
    pasted = render(
        single, TOOLS, Protocol(system_prompt=output_format_prompt, template="context_all"), tokenizer
    )
    assert context == native
    assert pasted != native and protocol_module.CONTEXT_HEADER in pasted
    # a multi-turn history is pasted by both context templates
    multi_native = render(CONVERSATION, TOOLS, Protocol(system_prompt=output_format_prompt), tokenizer)
    for template in ("context", "context_all"):
        multi = render(
            CONVERSATION, TOOLS, Protocol(system_prompt=output_format_prompt, template=template), tokenizer
        )
        assert multi != multi_native and protocol_module.CONTEXT_HEADER in multi


def test_card_counts_the_system_instruction_alone_as_the_paper_does(tokenizer):
    for prompt_id in ("stronger", "fmt_xml", "xml_rule2"):
        text = protocol_module.system_instruction_text(prompt_id)
        assert "{tools_jsonl}" not in text and "{functions}" not in text
        card = protocol_card(Protocol(system_prompt=prompt_id), tokenizer)
        assert card["system_prompt"]["instruction_tokens"] == len(
            tokenizer.encode(text, add_special_tokens=False)
        )
    # a rule adds instruction tokens to the format-only prompt
    assert protocol_module.instruction_tokens("xml_rule2", tokenizer) > protocol_module.instruction_tokens(
        "fmt_xml", tokenizer
    )


def test_card_says_what_the_template_knob_covers(tokenizer):
    card = protocol_card(Protocol(template="context"), tokenizer)
    assert "single-turn" in card["template_scope"] and "renders exactly as native" in card["template_scope"]
    assert (
        protocol_card(Protocol(template="context_all"), tokenizer)["template_scope"] != card["template_scope"]
    )


def test_keep_and_drop_differ_only_in_earlier_turns(tokenizer):
    keep = render(CONVERSATION, TOOLS, Protocol(system_prompt="fmt_xml", thinking="keep"), tokenizer)
    drop = render(CONVERSATION, TOOLS, Protocol(system_prompt="fmt_xml", thinking="drop"), tokenizer)
    for earlier in ("The user wants Paris weather.", "Report it.", "Compare with Rome.", "25 > 21."):
        assert earlier in keep and earlier not in drop
    assert "Now Oslo." in keep and "Now Oslo." in drop  # the current turn's reasoning always stays
    assert keep.count("<think>\n") == 5 and drop.count("<think>\n") == 1


def test_native_history_is_parseable_by_the_parser(tokenizer):
    text = render(CONVERSATION, TOOLS, Protocol(system_prompt="fmt_xml", thinking="keep"), tokenizer)
    assistant_turns = re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", text, re.DOTALL)
    calls = [parse_tool_calls(turn, "xml_json") for turn in assistant_turns]
    assert calls == [
        [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        [],
        [{"name": "get_weather", "arguments": {"city": "Rome"}}],
        [],
        [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
    ]


def test_python_format_writes_history_calls_as_python(tokenizer):
    text = render(CONVERSATION, TOOLS, Protocol(system_prompt="fmt_python"), tokenizer)
    assert "[get_weather(city='Rome')]" in text
    assert "<tool_call>\n{" not in text


def test_keep_is_independent_of_the_template(tokenizer):
    # a template that ignores reasoning_content entirely, as Qwen2.5's does
    bare = make_tokenizer(
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    keep = render(CONVERSATION, TOOLS, Protocol(system_prompt="fmt_xml", thinking="keep"), bare)
    assert keep.count("<think>\n") == 5 and "\ue000" not in keep
    assert "[assistant]<think>\nThe user wants Paris weather.\n</think>\n\n<tool_call>" in keep


def test_data_system_message_follows_our_prompt(tokenizer):
    messages = [{"role": "system", "content": "You work for ACME."}, *CONVERSATION[:1]]
    text = render(messages, TOOLS, Protocol(system_prompt="fmt_xml"), tokenizer)
    ours = system_prompt_text("fmt_xml", TOOLS)
    assert f"<|im_start|>system\n{ours}\n\nYou work for ACME.<|im_end|>" in text
    assert text.endswith("<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "robot", "content": "x"}],
        [{"role": "user", "content": None}],
        [{"role": "user", "content": "x"}, {"role": "system", "content": "late"}],
        [{"role": "system", "content": "only a system message"}],
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}],
        [{"role": "user", "content": "x", "weird": 1}],
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "<think>a</think>b", "reasoning_content": "c"},
        ],
        [{"role": "user", "content": "reserved \ue000 character"}],
    ],
)
def test_bad_messages_are_rejected(messages, tokenizer):
    with pytest.raises(ValueError):
        render(messages, TOOLS, Protocol(), tokenizer)


def test_tokenizer_without_template_is_an_error():
    tok = make_tokenizer("")
    with pytest.raises(ValueError, match="chat_template"):
        render(CONVERSATION[:1], TOOLS, Protocol(), tok)
    with pytest.raises(ValueError, match="chat_template"):
        protocol_card(Protocol(), tok)


# --------------------------------------------------------------------------------------------------------
# the chat template itself
# --------------------------------------------------------------------------------------------------------


def test_chat_template_tools_reasoning_and_tool_responses(tokenizer):
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "u1"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "r1",
            "tool_calls": [
                {"name": "f", "arguments": {"a": 1}},
                {"type": "function", "function": {"name": "g", "arguments": '{"b": "x"}'}},
            ],
        },
        {"role": "tool", "content": "t1"},
        {"role": "tool", "content": "t2"},
        {"role": "user", "content": "u2"},
    ]
    drop = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    keep = tokenizer.apply_chat_template(
        messages, tools=TOOLS, tokenize=False, add_generation_prompt=True, keep_thinking=True
    )
    assert drop.startswith("<|im_start|>system\nS\n\n# Tools\n")
    assert json.dumps(TOOLS[0]) in drop
    assert "r1" not in drop and "<think>\nr1\n</think>\n\n<tool_call>" in keep
    assistant = re.search(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", drop, re.DOTALL).group(1)
    assert parse_tool_calls(assistant, "xml_json") == [
        {"name": "f", "arguments": {"a": 1}},
        {"name": "g", "arguments": {"b": "x"}},
    ]
    assert (
        "<|im_start|>user\n<tool_response>\nt1\n</tool_response>\n<tool_response>\nt2\n</tool_response><|im_end|>"
        in drop
    )
    assert drop.endswith("<|im_start|>user\nu2<|im_end|>\n<|im_start|>assistant\n")
    no_gen = tokenizer.apply_chat_template(messages[:2], tokenize=False)
    assert no_gen == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nu1<|im_end|>\n"


def test_chat_template_keeps_current_turn_reasoning(tokenizer):
    messages = [
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "now",
            "tool_calls": [{"name": "f", "arguments": {}}],
        },
        {"role": "tool", "content": "t"},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<think>\nnow\n</think>\n\n<tool_call>" in text


# --------------------------------------------------------------------------------------------------------
# system prompts
# --------------------------------------------------------------------------------------------------------


def test_every_prompt_id_has_a_file_and_every_file_an_id():
    files = {p.stem for p in PROMPTS_DIR.glob("*.txt")}
    assert files == set(PROMPT_FORMATS)
    assert set(PAPER_PROMPTS) <= files


def test_bfcl_default_is_bfcls_own_text():
    utils = pytest.importorskip("bfcl_eval.model_handler.utils")
    from bfcl_eval.constants.default_prompts import DEFAULT_SYSTEM_PROMPT_FORMAT

    assert system_prompt_text("bfcl_default", TOOLS) == utils.formulate_system_prompt(
        DEFAULT_SYSTEM_PROMPT_FORMAT, TOOLS
    )


def test_bfcl_variants_are_built_on_the_default():
    pytest.importorskip("bfcl_eval")
    parts = protocol_module.bfcl_default_parts()
    default = system_prompt_template("bfcl_default")
    x2 = system_prompt_template("bfcl_default_x2")
    assert x2 == parts["bfcl_instructions"] + "\n\n" + default
    rules12 = system_prompt_template("default_rules12")
    assert rules12.startswith(parts["bfcl_instructions"] + "\n\n") and rules12.endswith(parts["bfcl_tools"])
    assert _rule_lines(rules12) == _rule_lines(system_prompt_template("stronger"))[:2]


def test_missing_bfcl_eval_is_a_clear_error(monkeypatch):
    protocol_module.bfcl_default_parts.cache_clear()
    monkeypatch.setitem(sys.modules, "bfcl_eval.constants.default_prompts", None)
    try:
        with pytest.raises(RuntimeError, match="need bfcl-eval"):
            system_prompt_text("bfcl_default", TOOLS)
        stronger = system_prompt_text("stronger", TOOLS)  # our prompts never need bfcl-eval
        assert json.dumps(TOOLS[0]) in stronger and "{tools_jsonl}" not in stronger
    finally:
        protocol_module.bfcl_default_parts.cache_clear()


def _paragraphs(text: str) -> list[str]:
    return text.split("\n\n")


def _rule_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


def test_factorial_prompts_share_paragraphs_verbatim():
    stronger = system_prompt_template("stronger")
    rules = _rule_lines(stronger)
    assert len(rules) == 4
    base = {fmt: _paragraphs(system_prompt_template(f"fmt_{fmt}")) for fmt in ("python", "xml")}
    assert len(base["python"]) == len(base["xml"]) == 4
    # the two bases differ only in the format paragraph
    assert [i for i in range(4) if base["python"][i] != base["xml"][i]] == [1]
    for fmt in ("python", "xml"):
        for k in range(1, 5):
            expected = base[fmt][:3] + ["Follow these rules:\n" + rules[k - 1]] + base[fmt][3:]
            assert _paragraphs(system_prompt_template(f"{fmt}_rule{k}")) == expected
    everything = base["python"][:3] + ["Follow these rules:\n" + "\n".join(rules)] + base["python"][3:]
    assert _paragraphs(system_prompt_template("python_rules1234")) == everything
    assert _paragraphs(stronger) == base["xml"][:3] + [everything[3]] + base["xml"][3:]


def test_prompt_output_formats():
    assert PROMPT_FORMATS["stronger"] == "xml_json" and PROMPT_FORMATS["bfcl_default"] == "python"
    for prompt_id, fmt in PROMPT_FORMATS.items():
        if prompt_id.startswith("bfcl") or prompt_id.startswith("default"):
            continue
        text = system_prompt_template(prompt_id)
        assert ("<tool_call>" in text) == (fmt == "xml_json")
        assert text.count("{tools_jsonl}") == 1 and "{functions}" not in text


def test_tools_are_substituted_once_and_literally():
    tools = [
        {
            "name": "f",
            "description": "mentions {tools_jsonl}, {functions} and {bfcl_tools}",
            "parameters": {},
        },
        {"name": "g", "description": "é", "parameters": {"type": "object"}},
    ]
    text = system_prompt_text("fmt_xml", tools)
    assert text.endswith(
        "one JSON object per line:\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    )
    assert text.count("{tools_jsonl}") == 1 and text.count("{functions}") == 1


# --------------------------------------------------------------------------------------------------------
# Protocol and its card
# --------------------------------------------------------------------------------------------------------


def test_output_format_is_implied_and_checked():
    assert Protocol(system_prompt="bfcl_default").output_format == "python"
    assert Protocol(system_prompt="stronger").output_format == "xml_json"
    with pytest.raises(ValueError, match="asks for 'xml_json'"):
        Protocol(system_prompt="stronger", output_format="python")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"system_prompt": "nope"},
        {"output_format": "yaml", "system_prompt": "stronger"},
        {"template": "chat"},
        {"thinking": "maybe"},
        {"temperature": -0.1},
        {"temperature": "hot"},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"max_tokens": 0},
        {"max_tokens": 1.5},
        {"seed": -1},
        {"seed": True},
        {"backend": "sglang"},
    ],
)
def test_protocol_rejects_bad_knobs(kwargs):
    with pytest.raises(ValueError):
        Protocol(**kwargs)


def test_protocol_dict_round_trip():
    proto = Protocol(system_prompt="xml_rule3", thinking="keep", temperature=0.7, seed=4)
    assert Protocol.from_dict(proto.to_dict()) == proto
    assert Protocol.from_dict({"system_prompt": "fmt_python"}).output_format == "python"
    with pytest.raises(ValueError, match="unknown protocol keys"):
        Protocol.from_dict({"temprature": 1.0})


ALTERNATIVES = {
    "system_prompt": "xml_rule1",  # same output format as the default prompt
    "template": "context",
    "thinking": "keep",
    "temperature": 0.7,
    "top_p": 0.9,
    "max_tokens": 2048,
    "seed": 1,
    "backend": "vllm",
    "enable_thinking": True,
}


def test_card_differs_exactly_when_a_knob_differs(tokenizer):
    base = Protocol()
    card = protocol_card(base, tokenizer)
    assert protocol_card(Protocol(), make_tokenizer()) == card  # same knobs, fresh objects: same card
    json.dumps(card)  # serialisable
    assert set(ALTERNATIVES) | {"output_format"} == {f.name for f in dataclasses.fields(Protocol)}
    for knob, value in ALTERNATIVES.items():
        changed = protocol_card(dataclasses.replace(base, **{knob: value}), tokenizer)
        assert changed != card, knob
        assert changed["protocol"][knob] == value
    other_format = protocol_card(Protocol(system_prompt="fmt_python"), tokenizer)
    assert other_format["system_prompt"]["output_format"] == "python"


def test_card_records_prompt_template_and_mechanism(tokenizer):
    card = protocol_card(Protocol(system_prompt="stronger", thinking="keep"), tokenizer, benchmark="bfcl")
    assert card["system_prompt"]["id"] == "stronger"
    assert len(card["system_prompt"]["sha256"]) == 64
    assert card["chat_template"]["sha256"] == protocol_module.sha256_text(load_chat_template())
    assert card["thinking"] == "keep" and card["thinking_mechanism"] == "splice"
    assert card["sampling"] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024}
    assert card["benchmark"] == "bfcl"
    assert card["versions"]["transformers"]
    other_template = make_tokenizer(load_chat_template() + " ")
    assert protocol_card(Protocol(), other_template) != protocol_card(Protocol(), tokenizer)
    with pytest.raises(ValueError, match="overwrite"):
        protocol_card(Protocol(), tokenizer, seed=3)


@pytest.mark.parametrize("template", ["native", "context", "context_all"])
@pytest.mark.parametrize("thinking", ["keep", "drop"])
def test_chat_messages_through_the_template_equal_render(template, thinking):
    from toolcall_repro.protocol import Protocol, chat_messages, render

    tok = _tiny_tokenizer_for_chat_messages()
    messages = [
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "reasoning_content": "need the tool",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        },
        {"role": "tool", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "It is 21."},
        {"role": "user", "content": "and in Rome?"},
    ]
    tools = [
        {
            "name": "get_weather",
            "description": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    protocol = Protocol(system_prompt="stronger", template=template, thinking=thinking)
    chat = chat_messages(messages, tools, protocol)
    assert all(set(m) == {"role", "content"} for m in chat)
    via_template = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert via_template == render(messages, tools, protocol, tok)
    assert ("need the tool" in via_template) == (thinking == "keep")


def _tiny_tokenizer_for_chat_messages():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from toolcall_repro.protocol import load_chat_template

    raw = Tokenizer(models.WordLevel({"[UNK]": 0, "<|im_end|>": 1}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", eos_token="<|im_end|>")
    tok.chat_template = load_chat_template()
    return tok


def test_training_protocol_is_one_definition_for_both_engines_and_the_filter():
    from toolcall_repro.data.rollouts import make_protocol
    from toolcall_repro.protocol import training_protocol

    train = training_protocol()
    assert (train.system_prompt, train.template, train.thinking) == ("stronger", "native", "drop")
    sampling = {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 64}
    rollouts = make_protocol(sampling, seed=3, backend_kind="transformers")
    assert rollouts == dataclasses.replace(train, temperature=0.7, top_p=0.9, max_tokens=64, seed=3)
    # a config's prompt knobs override training's; other protocol keys are not the filter's to set
    other = make_protocol({**sampling, "protocol": {"thinking": "keep"}}, seed=3, backend_kind="transformers")
    assert other.thinking == "keep" and other.system_prompt == "stronger"


# Qwen3's chat template ends its generation prompt so (Qwen/Qwen3-4B tokenizer_config.json): thinking off
# pre-fills an empty think block, so the model answers at once; unset or true, it may think first.
QWEN3_GENERATION_PROMPT = (
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)


def test_the_models_thinking_switch_reaches_the_chat_template_and_the_card():
    """Protocol.enable_thinking (config model.enable_thinking, per model) is passed to the template in
    every render, native and context alike, and written on the card; None passes nothing."""
    template = load_chat_template().replace(
        "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}", QWEN3_GENERATION_PROMPT
    )
    assert template != load_chat_template()
    tok = make_tokenizer(template)
    for shape in ("native", "context"):
        off = render(CONVERSATION, TOOLS, Protocol(template=shape, enable_thinking=False), tok)
        on = render(CONVERSATION, TOOLS, Protocol(template=shape, enable_thinking=True), tok)
        unset = render(CONVERSATION, TOOLS, Protocol(template=shape), tok)
        assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert on == unset and on.endswith("<|im_start|>assistant\n") and off == on + "<think>\n\n</think>\n\n"
    assert protocol_card(Protocol(enable_thinking=False), tok)["enable_thinking"] is False
    assert protocol_card(Protocol(), tok)["enable_thinking"] is None
    with pytest.raises(ValueError, match="enable_thinking must be true, false or null"):
        Protocol(enable_thinking="yes")
