"""VLLMBackend against a recording stand-in for the vllm module (vLLM is absent on CPU machines)."""

import sys
import types
from dataclasses import dataclass, field

import pytest
from transformers import AutoTokenizer

from toolcall_repro.backends import load_backend
from toolcall_repro.backends.base import Generation, derive_seed


@dataclass
class FakeSamplingParams:
    n: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    stop_token_ids: list = field(default_factory=list)
    skip_special_tokens: bool = True


class FakeLLM:
    instances: list = []

    def __init__(self, model, tensor_parallel_size=1, **kwargs):
        self.model, self.tp, self.kwargs = model, tensor_parallel_size, kwargs
        self.tokenizer = AutoTokenizer.from_pretrained(model)  # the tiny model's, like vLLM's own
        self.calls = []
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return self.tokenizer

    def generate(self, inputs, params, use_tqdm=True):
        self.calls.append((inputs, params))
        outputs = []
        for request, p in zip(inputs, params, strict=True):
            completions = [
                types.SimpleNamespace(
                    text=f"s{p.seed % 97}-{k}",
                    token_ids=[5] * (k + 1),
                    finish_reason="stop" if k else "length",
                )
                for k in range(p.n)
            ]
            outputs.append(
                types.SimpleNamespace(prompt_token_ids=request["prompt_token_ids"], outputs=completions)
            )
        return outputs


@pytest.fixture
def model(tiny_model_dir):
    return str(tiny_model_dir)


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = FakeLLM, FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.instances.clear()
    return module


PROMPTS = ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>user\nbye<|im_end|>\n"]


def test_sampling_params_per_prompt(fake_vllm, model):
    backend = load_backend("vllm", model, tensor_parallel_size=2, gpu_memory_utilization=0.8)
    llm = FakeLLM.instances[0]
    assert (llm.model, llm.tp, llm.kwargs) == (model, 2, {"gpu_memory_utilization": 0.8})
    result = backend.generate(PROMPTS, 3, temperature=0.7, top_p=0.9, max_tokens=16, seed=5)
    inputs, params = llm.calls[0]
    tok = llm.tokenizer
    assert inputs == [{"prompt_token_ids": tok.encode(p, add_special_tokens=False)} for p in PROMPTS]
    assert [p.seed for p in params] == [derive_seed(5, 0), derive_seed(5, 1)]
    assert all((p.n, p.temperature, p.top_p, p.max_tokens) == (3, 0.7, 0.9, 16) for p in params)
    assert all(p.skip_special_tokens is False for p in params)
    assert params[0].stop_token_ids == tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert [len(g) for g in result] == [3, 3]
    assert result[0][1] == Generation(
        text=f"s{derive_seed(5, 0) % 97}-1",
        prompt_tokens=len(inputs[0]["prompt_token_ids"]),
        completion_tokens=2,
        finish_reason="stop",
    )
    assert result[0][0].finish_reason == "length"


def test_greedy_asks_for_one_sample_and_repeats_it(fake_vllm, model):
    backend = load_backend("vllm", model)
    result = backend.generate(PROMPTS[:1], 4, temperature=0.0, top_p=0.5, max_tokens=8, seed=0)
    _, params = FakeLLM.instances[0].calls[0]
    assert (params[0].n, params[0].temperature, params[0].top_p) == (1, 0.0, 1.0)
    assert len(result[0]) == 4 and len(set(result[0])) == 1


def test_bad_request_raises_before_vllm_is_called(fake_vllm, model):
    backend = load_backend("vllm", model)
    with pytest.raises(ValueError):
        backend.generate(PROMPTS, 0, temperature=1.0, top_p=1.0, max_tokens=8, seed=0)
    assert FakeLLM.instances[0].calls == []


def test_missing_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(RuntimeError, match="needs vLLM"):
        load_backend("vllm", "/models/x")
