"""A bfcl-eval Qwen handler driven by our Protocol, registered in bfcl-eval's model table at run time.

bfcl-eval keeps the loop (turns, steps, tool results, holdout functions, the 20-step cap; those methods
are final). We override only what a protocol decides: the prompt text (`prompt_fn`, i.e.
`protocol.render`), where a completion comes from (`generate_fn`, our backend, with a seed per query),
and how output is parsed (our parser, in the protocol's output format).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
from bfcl_eval.model_handler.local_inference.qwen import QwenHandler
from overrides import override

from toolcall_repro.eval.bfcl import decode
from toolcall_repro.toolcall import THINK_CLOSE, THINK_OPEN

PromptFn = Callable[[list[dict], list[dict]], str]
# (prompt text, seed) -> object with .text, .prompt_tokens, .completion_tokens (backends.Generation)
GenerateFn = Callable[[str, int], Any]

REGISTRY_PREFIX = "toolcallrepro-"


def registry_name_for(model_tag: str) -> str:
    """bfcl-eval turns `_` into `/` when it reads a model folder back, so registry names avoid `_`."""
    if not model_tag:
        raise ValueError("model tag must be non-empty")
    return REGISTRY_PREFIX + re.sub(r"[^A-Za-z0-9.-]", "-", model_tag)


def query_seed(base_seed: int, entry_id: str, query_index: int) -> int:
    """A distinct, reproducible seed for every model query (entry, step) under one evaluation seed."""
    digest = hashlib.sha256(f"{base_seed}:{entry_id}:{query_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class ProtocolQwenHandler(QwenHandler):
    """QwenHandler (prompting mode) with our prompt, sampler and parser plugged in."""

    def __init__(self, model_name, temperature, registry_name, is_fc_model, **kwargs) -> None:
        super().__init__(model_name, temperature, registry_name, is_fc_model, **kwargs)
        self.output_format: str = "python"
        self.prompt_fn: PromptFn | None = None
        self.generate_fn: GenerateFn | None = None
        self.base_seed = 0
        self._entry_id = ""
        self._query_index = 0

    def bind(
        self,
        *,
        output_format: str,
        prompt_fn: PromptFn | None = None,
        generate_fn: GenerateFn | None = None,
        seed: int = 0,
    ) -> ProtocolQwenHandler:
        decode._check_format(output_format)
        self.output_format = output_format
        self.prompt_fn = prompt_fn
        self.generate_fn = generate_fn
        self.base_seed = int(seed)
        return self

    # ---- parsing: our parser in the protocol's format ----

    @override
    def decode_ast(self, result, language, has_tool_call_tag):
        return decode.decode_ast(result, self.output_format, language)

    @override
    def decode_execute(self, result, has_tool_call_tag):
        return decode.decode_execute(result, self.output_format)

    # ---- prompting: our render and backend ----

    @override
    def _pre_query_processing_prompting(self, test_entry: dict) -> dict:
        # No bfcl system prompt is inserted: the protocol's renderer writes the system prompt and tools.
        self._entry_id = test_entry["id"]
        self._query_index = 0
        return {"message": [], "function": test_entry["function"]}

    @override
    def _format_prompt(self, messages, function):
        if self.prompt_fn is None:
            raise RuntimeError("handler not bound to a protocol: call bind(prompt_fn=...) before generating")
        return self.prompt_fn(messages, function)

    @override
    def _query_prompting(self, inference_data: dict):
        if self.generate_fn is None:
            raise RuntimeError("handler not bound to a backend: call bind(generate_fn=...) before generating")
        prompt = self._format_prompt(inference_data["message"], inference_data["function"])
        seed = query_seed(self.base_seed, self._entry_id, self._query_index)
        inference_data["inference_input_log"] = {"formatted_prompt": prompt, "seed": seed}
        self._query_index += 1
        start = time.perf_counter()
        generation = self.generate_fn(prompt, seed)
        latency = time.perf_counter() - start
        # Shaped like the OpenAI completion QwenHandler reads, so its <think> split is reused as is.
        response = SimpleNamespace(
            choices=[SimpleNamespace(text=generation.text)],
            usage=SimpleNamespace(
                prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens
            ),
        )
        return response, latency

    @override
    def _add_assistant_message_prompting(self, inference_data: dict, model_response_data: dict) -> dict:
        message = history_message(
            model_response_data["model_responses"], model_response_data.get("reasoning_content") or ""
        )
        if message is not None:
            inference_data["message"].append(message)
        return inference_data


def history_message(content: str, reasoning: str) -> dict | None:
    """The assistant message the next prompt shows, or None when the model said nothing at all.

    The result file keeps the raw output; the history must be something `render` accepts even when the
    model was cut off inside `<think>` or wrote stray think tags (both happen at small max_tokens).
    """
    text = content.replace("\ue000", "").replace("\ue001", "")  # render() reserves these two characters
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN) and THINK_CLOSE not in stripped:
        reasoning = (reasoning + "\n" if reasoning else "") + stripped[len(THINK_OPEN) :]
        text = ""  # truncated while thinking: everything it wrote is reasoning
    text = text.replace(THINK_OPEN, "").replace(THINK_CLOSE, "")
    if not text.strip() and not reasoning.strip():
        return None
    return {"role": "assistant", "content": text, "reasoning_content": reasoning}


def register(registry_name: str, model_name: str) -> ModelConfig:
    """Add (or replace) our handler under `registry_name` in bfcl-eval's model table, in this process."""
    if "_" in registry_name:
        raise ValueError(f"bfcl-eval registry names must not contain '_': {registry_name!r}")
    config = ModelConfig(
        model_name=model_name,
        display_name=f"{registry_name} (toolcall-repro protocol)",
        url="local",
        org="toolcall-repro",
        license="see model card",
        model_handler=ProtocolQwenHandler,
        input_price=None,
        output_price=None,
        is_fc_model=False,
        underscore_to_dot=False,
    )
    MODEL_CONFIG_MAPPING[registry_name] = config
    return config


def build_handler(registry_name: str, temperature: float = 0.0) -> ProtocolQwenHandler:
    """Construct the registered handler the way bfcl-eval's own build_handler does."""
    config = MODEL_CONFIG_MAPPING[registry_name]
    handler = config.model_handler(
        model_name=config.model_name,
        temperature=temperature,
        registry_name=registry_name,
        is_fc_model=config.is_fc_model,
    )
    if not isinstance(handler, ProtocolQwenHandler):
        raise TypeError(f"{registry_name} is registered with {type(handler).__name__}, not ours")
    return handler
