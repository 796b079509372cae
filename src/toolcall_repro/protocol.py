"""Evaluation protocol: every knob that moves a score, the exact prompt it renders, and its card.

System prompts (``prompts/<id>.txt``; our own words except the BFCL default, which is read from bfcl-eval):

==================  ===========  ==========================================================================
id                  format       text
==================  ===========  ==========================================================================
bfcl_default        python       BFCL's default prompt (``formulate_system_prompt`` with
                                 ``DEFAULT_SYSTEM_PROMPT_FORMAT``), byte for byte; needs bfcl-eval
bfcl_default_x2     python       BFCL's instructions pasted twice, then the tool list once (length control)
default_rules12     python       BFCL's instructions + rules 1 and 2, then the tool list
stronger            xml_json     our intro + ``<think>``/``<tool_call>`` JSON format + rules 1-4 + tool list
fmt_python          python       factorial base: our intro + Python-list format, no rules
fmt_xml             xml_json     factorial base: our intro + XML/JSON format, no rules
python_rule<k>      python       ``fmt_python`` + rule k (k = 1..4)
xml_rule<k>         xml_json     ``fmt_xml`` + rule k (k = 1..4)
python_rules1234    python       ``fmt_python`` + rules 1-4 (``stronger`` with the Python format)
==================  ===========  ==========================================================================

Rules: (1) stop and summarise when done, (2) check arguments against the schema and never invent values,
(3) decompose multi-step tasks, (4) recover from tool errors. The factorial prompts share every paragraph
verbatim, so format and each rule can be separated. Placeholders in the files: ``{tools_jsonl}`` (our
prompts: one compact JSON object per tool and line, as Qwen's ``<tools>`` block), ``{functions}`` (inside
BFCL's text: the list as JSON with indent 4), ``{bfcl_instructions}`` and ``{bfcl_tools}`` (BFCL's text).

Rendering: the tool list always goes into the system prompt (prompting mode, as BFCL's prompting handlers
do); the chat template is called without ``tools`` so the prompt id alone decides the instructions. Earlier
assistant calls are written into the content in the protocol's output format, exactly as a model following
it would have written them. ``<think>`` blocks are spliced into the rendered text by :func:`render` itself
(mechanism ``splice``), because templates differ in what they do with ``reasoning_content`` (Qwen3 drops it
before the last user turn, Qwen2.5 ignores it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from typing import Any

from toolcall_repro.backends import BACKEND_KINDS
from toolcall_repro.toolcall import FORMATS, format_tool_calls, split_think

PROMPT_FORMATS: dict[str, str] = {
    "bfcl_default": "python",
    "bfcl_default_x2": "python",
    "default_rules12": "python",
    "stronger": "xml_json",
    "fmt_python": "python",
    "fmt_xml": "xml_json",
    "python_rules1234": "python",
    **{f"python_rule{k}": "python" for k in range(1, 5)},
    **{f"xml_rule{k}": "xml_json" for k in range(1, 5)},
}
PAPER_PROMPTS = ("bfcl_default", "bfcl_default_x2", "default_rules12", "stronger")
# `context` pastes a multi-turn history (anything before the current user request) into one user message;
# a lone user message renders natively under both, so the knob moves only multi-turn scores, as the
# paper's does. `context_all` (a separate option beyond the paper) pastes single-turn requests too.
TEMPLATES = ("native", "context", "context_all")
TEMPLATE_SCOPE = {
    "native": "role messages through the chat template",
    "context": "a history with more than the current user message (multi-turn) is pasted into one user "
    "message; a single user message (single-turn) renders exactly as native",
    "context_all": "every history is pasted into one user message, single-turn requests included",
}
THINKING = ("keep", "drop")
BACKENDS = BACKEND_KINDS
ROLES = ("system", "user", "assistant", "tool")
THINKING_MECHANISM = "splice"

_PLACEHOLDER_RE = re.compile(r"\{(bfcl_instructions|bfcl_tools)\}")
_TOOLS_RE = re.compile(r"\{(functions|tools_jsonl)\}")
_RESERVED = "\ue000"  # a private-use character marks where render() splices <think> blocks
_SENTINEL = _RESERVED + "think{}\ue001"
CONTEXT_HEADER = "Here is the conversation so far. Reply to the last user message as the assistant."
CONTEXT_ROLE_LABELS = {"user": "USER", "assistant": "ASSISTANT", "tool": "TOOL RESPONSE"}


@dataclass(frozen=True)
class Protocol:
    """Every evaluation knob. ``output_format`` defaults to (and must match) the system prompt's format."""

    system_prompt: str = "stronger"
    output_format: str | None = None
    template: str = "native"
    thinking: str = "drop"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int = 0
    backend: str = "transformers"
    # The model's own thinking switch (Qwen3's chat template: `enable_thinking`), from config
    # model.enable_thinking per model; None passes nothing (the template's default, e.g. the tiny model's).
    enable_thinking: bool | None = None

    def __post_init__(self) -> None:
        if self.system_prompt not in PROMPT_FORMATS:
            raise ValueError(f"unknown system prompt {self.system_prompt!r}; known: {sorted(PROMPT_FORMATS)}")
        implied = PROMPT_FORMATS[self.system_prompt]
        if self.output_format is None:
            object.__setattr__(self, "output_format", implied)
        elif self.output_format not in FORMATS:
            raise ValueError(f"unknown output format {self.output_format!r}; expected one of {FORMATS}")
        elif self.output_format != implied:
            raise ValueError(
                f"system prompt {self.system_prompt!r} asks for {implied!r} output, not {self.output_format!r}"
            )
        _check_choice("template", self.template, TEMPLATES)
        _check_choice("thinking", self.thinking, THINKING)
        _check_choice("backend", self.backend, BACKENDS)
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, int | float):
            raise ValueError(f"temperature must be a number, got {self.temperature!r}")
        if not 0.0 <= self.temperature <= 10.0:
            raise ValueError(f"temperature must be in [0, 10], got {self.temperature}")
        if (
            isinstance(self.top_p, bool)
            or not isinstance(self.top_p, int | float)
            or not 0.0 < self.top_p <= 1.0
        ):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        for name in ("max_tokens", "seed"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (1 if name == "max_tokens" else 0)
            ):
                raise ValueError(
                    f"{name} must be a {'positive' if name == 'max_tokens' else 'non-negative'} int"
                )
        if self.enable_thinking is not None and not isinstance(self.enable_thinking, bool):
            raise ValueError(f"enable_thinking must be true, false or null, got {self.enable_thinking!r}")
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", float(self.top_p))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Protocol:
        """Build from a config mapping; unknown keys are an error, missing keys take the defaults."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown protocol keys {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)


# The protocol the paper trains with: stronger system prompt, native multi-turn template, earlier thinking
# dropped. Both engines render training prompts with it, and the filter's rollouts with it plus their own
# sampling knobs; this is its one definition.
TRAINING_KNOBS = {"system_prompt": "stronger", "template": "native", "thinking": "drop"}


def training_protocol(**knobs: Any) -> Protocol:
    """The training protocol; `knobs` override any field (sampling knobs, or a config's prompt knobs)."""
    return Protocol(**(TRAINING_KNOBS | knobs))


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {choices}")


# --------------------------------------------------------------------------------------------------------
# system prompts
# --------------------------------------------------------------------------------------------------------


def load_chat_template() -> str:
    """The ChatML template (``prompts/chat_template.jinja``) carried by the pipeline's tiny model."""
    return (
        resources.files("toolcall_repro").joinpath("prompts/chat_template.jinja").read_text(encoding="utf-8")
    )


def _prompt_file(prompt_id: str) -> str:
    if prompt_id not in PROMPT_FORMATS:
        raise ValueError(f"unknown system prompt {prompt_id!r}; known: {sorted(PROMPT_FORMATS)}")
    text = resources.files("toolcall_repro").joinpath(f"prompts/{prompt_id}.txt").read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text  # files end with a newline by convention only


@cache
def bfcl_default_parts() -> dict[str, str]:
    """BFCL's default system prompt split into ``bfcl_instructions`` and ``bfcl_tools`` (with ``{functions}``).

    Built by bfcl-eval's own ``formulate_system_prompt``; raises RuntimeError where bfcl-eval is absent.
    """
    try:
        from bfcl_eval.constants.default_prompts import DEFAULT_SYSTEM_PROMPT_FORMAT, PROMPT_STYLE_TEMPLATES
        from bfcl_eval.model_handler.utils import formulate_system_prompt, parse_prompt_variation_params
    except ImportError as exc:
        raise RuntimeError(
            "the BFCL-based system prompts (bfcl_default, bfcl_default_x2, default_rules12) need bfcl-eval, "
            "which this environment lacks (the verl environment never has it); install toolcall-repro[eval]"
        ) from exc
    marker = "@@FUNCTIONS@@"
    # json.dumps of a string marker leaves it quoted in the text; swap it for our placeholder
    full = formulate_system_prompt(DEFAULT_SYSTEM_PROMPT_FORMAT, marker).replace(
        json.dumps(marker), "{functions}"
    )
    _, _, doc_format, _, style = parse_prompt_variation_params(DEFAULT_SYSTEM_PROMPT_FORMAT)
    tools = PROMPT_STYLE_TEMPLATES[style]["available_tools"].format(
        format=doc_format, functions="{functions}"
    )
    if not full.endswith("\n\n" + tools):
        raise RuntimeError("bfcl-eval's default prompt no longer ends with its tool list; update protocol.py")
    return {"bfcl_instructions": full[: -len(tools) - 2], "bfcl_tools": tools}


def system_prompt_template(prompt_id: str) -> str:
    """The system prompt with the BFCL placeholders filled and the tool-list placeholder left in."""
    text = _prompt_file(prompt_id)
    if _PLACEHOLDER_RE.search(text):
        parts = bfcl_default_parts()
        text = _PLACEHOLDER_RE.sub(lambda m: parts[m.group(1)], text)
    return text


def system_instruction_text(prompt_id: str) -> str:
    """The system prompt without its tool list: what the paper counts as prompt length (228/452/302/448)."""
    return _TOOLS_RE.sub("", system_prompt_template(prompt_id)).strip()


def instruction_tokens(prompt_id: str, tokenizer: Any) -> int:
    """Tokens of `system_instruction_text` under `tokenizer`, without special tokens or chat template."""
    return len(tokenizer.encode(system_instruction_text(prompt_id), add_special_tokens=False))


def system_prompt_text(prompt_id: str, tools: list[dict]) -> str:
    """The system prompt for ``tools``, the tool list written where the prompt's placeholder is."""
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise ValueError("tools must be a list of dicts")
    listings = {
        "functions": json.dumps(tools, indent=4),  # BFCL's layout
        "tools_jsonl": "\n".join(json.dumps(t, ensure_ascii=False) for t in tools),  # Qwen's <tools> layout
    }
    return _TOOLS_RE.sub(lambda m: listings[m.group(1)], system_prompt_template(prompt_id))


# --------------------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------------------


def _check_messages(messages: list[dict]) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ROLES:
            raise ValueError(f"message {i} needs a role in {ROLES}: {msg!r:.200}")
        content = msg.get("content")
        if msg["role"] == "assistant":
            if content is not None and not isinstance(content, str):
                raise ValueError(f"message {i}: assistant content must be a string or None")
            if not content and not msg.get("tool_calls") and not msg.get("reasoning_content"):
                raise ValueError(f"message {i}: empty assistant message")
        elif not isinstance(content, str):
            raise ValueError(f"message {i}: {msg['role']} content must be a string")
        if msg["role"] == "system" and i != 0:
            raise ValueError(f"message {i}: a system message must come first")
        extra = set(msg) - {"role", "content", "tool_calls", "reasoning_content", "name", "tool_call_id"}
        if extra:
            raise ValueError(f"message {i}: unknown keys {sorted(extra)}")


def _assistant_parts(msg: dict, fmt: str) -> tuple[str | None, str]:
    """(reasoning or None, visible text with the calls written in ``fmt``) of one assistant message."""
    inline_reasoning, content = split_think(msg.get("content") or "")
    reasoning = msg.get("reasoning_content")
    if inline_reasoning is not None:
        if reasoning:
            raise ValueError("assistant message has both reasoning_content and a <think> block in content")
        reasoning = inline_reasoning
    content = content.strip()
    calls = msg.get("tool_calls") or []
    if calls:
        calls_text = format_tool_calls(calls, fmt)
        content = f"{content}\n{calls_text}" if content else calls_text
    return (reasoning.strip("\n") if reasoning else None), content


def _think_block(reasoning: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n\n"


def _last_user_index(messages: list[dict]) -> int:
    return max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)


def _shown_reasoning(messages: list[dict], thinking: str, fmt: str) -> list[tuple[str | None, str]]:
    """Per message: (reasoning to show or None, visible text); ``drop`` hides reasoning before the last user turn."""
    last_user = _last_user_index(messages)
    out = []
    for i, msg in enumerate(messages):
        if msg["role"] != "assistant":
            out.append((None, msg["content"]))
            continue
        reasoning, text = _assistant_parts(msg, fmt)
        if thinking == "drop" and i < last_user:
            reasoning = None
        out.append((reasoning, text))
    return out


def _system_message(messages: list[dict], protocol: Protocol, tools: list[dict]) -> tuple[str, list[dict]]:
    system = system_prompt_text(protocol.system_prompt, tools)
    if messages[0]["role"] == "system":  # BFCL's convention: our prompt first, the entry's own after it
        return system + "\n\n" + messages[0]["content"], messages[1:]
    return system, messages


def template_kwargs(protocol: Protocol) -> dict:
    """What the chat template is called with beyond the messages: the model's thinking switch, if set."""
    return {} if protocol.enable_thinking is None else {"enable_thinking": protocol.enable_thinking}


def _apply_template(tokenizer: Any, chat: list[dict], kwargs: dict) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ValueError("the tokenizer has no chat_template; give the model one (e.g. load_chat_template())")
    text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, **kwargs)
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected str")
    return text


def _render_native(system: str, history: list[dict], shown: list, tokenizer: Any, kwargs: dict) -> str:
    chat = [{"role": "system", "content": system}]
    blocks: dict[str, str] = {}
    for msg, (reasoning, text) in zip(history, shown, strict=True):
        if msg["role"] != "assistant":
            chat.append({"role": msg["role"], "content": text})
            continue
        if reasoning is not None:
            sentinel = _SENTINEL.format(len(blocks))
            blocks[sentinel] = _think_block(reasoning)
            text = sentinel + text
        chat.append({"role": "assistant", "content": text})
    rendered = _apply_template(tokenizer, chat, kwargs)
    for sentinel, block in blocks.items():
        if rendered.count(sentinel) != 1:
            raise ValueError("the chat template altered assistant content; cannot place <think> blocks")
        rendered = rendered.replace(sentinel, block)
    return rendered


def serialise_history(history: list[dict], shown: list) -> str:
    """The ``context`` template's user message: the whole history as labelled text blocks."""
    parts = [CONTEXT_HEADER]
    for msg, (reasoning, text) in zip(history, shown, strict=True):
        body = (_think_block(reasoning) if reasoning is not None else "") + text
        parts.append(f"{CONTEXT_ROLE_LABELS[msg['role']]}:\n{body}")
    return "\n\n".join(parts)


def pastes_history(template: str, history: list[dict]) -> bool:
    """Whether `template` pastes this history into one user message (see TEMPLATE_SCOPE)."""
    if template == "context_all":
        return True
    return template == "context" and len(history) > 1


def render(messages: list[dict], tools: list[dict], protocol: Protocol, tokenizer: Any) -> str:
    """The exact prompt text for ``messages`` under ``protocol``, with the generation prompt appended.

    ``native``: role messages through the tokenizer's chat template. ``context``: the system prompt, then the
    whole history serialised into one user message, when the history holds more than the current user
    message (a single-turn request renders as ``native``); ``context_all`` pastes single-turn requests too. ``thinking="drop"`` removes reasoning of assistant turns
    before the last user message; ``keep`` shows all of it.
    """
    _check_messages(messages)
    if any(_RESERVED in (m.get("content") or "") for m in messages):
        raise ValueError("messages contain the private-use character U+E000 that render() reserves")
    system, history = _system_message(messages, protocol, tools)
    if not history:
        raise ValueError("messages hold only a system message")
    shown = _shown_reasoning(history, protocol.thinking, protocol.output_format)
    kwargs = template_kwargs(protocol)
    if not pastes_history(protocol.template, history):
        return _render_native(system, history, shown, tokenizer, kwargs)
    chat = [
        {"role": "system", "content": system},
        {"role": "user", "content": serialise_history(history, shown)},
    ]
    return _apply_template(tokenizer, chat, kwargs)


def chat_messages(messages: list[dict], tools: list[dict], protocol: Protocol) -> list[dict]:
    """The role messages that ``render`` passes to the chat template, for engines that apply it themselves.

    verl tokenises prompts with the chat template itself, so it needs messages, not text. Shown reasoning is
    inlined as a ``<think>`` block in the assistant content; for templates that pass assistant content
    through unchanged, ``apply_chat_template(chat_messages(...), add_generation_prompt=True,
    **template_kwargs(protocol))`` equals
    ``render(...)`` (callers check this per sample: a template that strips earlier reasoning breaks it).
    """
    _check_messages(messages)
    system, history = _system_message(messages, protocol, tools)
    if not history:
        raise ValueError("messages hold only a system message")
    shown = _shown_reasoning(history, protocol.thinking, protocol.output_format)
    if pastes_history(protocol.template, history):
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": serialise_history(history, shown)},
        ]
    chat = [{"role": "system", "content": system}]
    for msg, (reasoning, text) in zip(history, shown, strict=True):
        if msg["role"] == "assistant" and reasoning is not None:
            text = _think_block(reasoning) + text
        chat.append({"role": msg["role"], "content": text})
    return chat


# --------------------------------------------------------------------------------------------------------
# protocol card
# --------------------------------------------------------------------------------------------------------


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def protocol_card(protocol: Protocol, tokenizer: Any, **extra: Any) -> dict:
    """The JSON card stored with every score: every knob plus what pins the prompt text and the software.

    Deterministic: two cards are equal exactly when the protocol, the system prompt text, the chat template
    and the software versions are. ``extra`` (benchmark, model, user simulator, ...) is merged in last and
    may not overwrite a card key.
    """
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ValueError("the tokenizer has no chat_template")
    uses_bfcl = bool(_PLACEHOLDER_RE.search(_prompt_file(protocol.system_prompt)))
    versions = {
        name: _version(name) for name in ("toolcall-repro", "transformers", "tokenizers", "torch", "jinja2")
    }
    if uses_bfcl:
        versions["bfcl-eval"] = _version("bfcl-eval")
    if protocol.backend == "vllm":
        versions["vllm"] = _version("vllm")
    card = {
        "protocol": protocol.to_dict(),
        "system_prompt": {
            "id": protocol.system_prompt,
            "sha256": sha256_text(system_prompt_template(protocol.system_prompt)),
            "output_format": protocol.output_format,
            "source": "bfcl-eval" if uses_bfcl else "toolcall_repro/prompts",
            # the paper's prompt-length measure; mean_input_tokens (scores) counts the whole first prompt
            "instruction_tokens": instruction_tokens(protocol.system_prompt, tokenizer),
        },
        "chat_template": {"sha256": sha256_text(template)},
        "template": protocol.template,
        "template_scope": TEMPLATE_SCOPE[protocol.template],
        "thinking": protocol.thinking,
        "thinking_mechanism": THINKING_MECHANISM,
        # the model's own switch, as the chat template got it (None: not passed, the template's default)
        "enable_thinking": protocol.enable_thinking,
        "tools_in": "system_prompt",
        "sampling": {
            "temperature": protocol.temperature,
            "top_p": protocol.top_p,
            "max_tokens": protocol.max_tokens,
        },
        "seed": protocol.seed,
        "backend": protocol.backend,
        "versions": versions,
    }
    clash = set(card) & set(extra)
    if clash:
        raise ValueError(f"extra keys {sorted(clash)} would overwrite protocol card fields")
    card.update(extra)
    return card
