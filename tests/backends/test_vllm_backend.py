"""VLLMBackend against `fake_vllm` (tests/conftest.py): a stand-in for the vllm module whose `LLM` takes
exactly vLLM 0.24.0's constructor keywords (vLLM is absent on CPU machines)."""

import sys

import pytest

from toolcall_repro.backends import load_backend
from toolcall_repro.backends.base import Generation, derive_seed


@pytest.fixture
def model(tiny_model_dir):
    return str(tiny_model_dir)


PROMPTS = ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>user\nbye<|im_end|>\n"]


def test_sampling_params_per_prompt(fake_vllm, model):
    backend = load_backend("vllm", model, tensor_parallel_size=2, gpu_memory_utilization=0.8)
    llm = fake_vllm.LLM.instances[0]
    engine = llm.engine_args
    assert (engine.model, engine.tensor_parallel_size, engine.gpu_memory_utilization) == (model, 2, 0.8)
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
    _, params = fake_vllm.LLM.instances[0].calls[0]
    assert (params[0].n, params[0].temperature, params[0].top_p) == (1, 0.0, 1.0)
    assert len(result[0]) == 4 and len(set(result[0])) == 1


def test_bad_request_raises_before_vllm_is_called(fake_vllm, model):
    backend = load_backend("vllm", model)
    with pytest.raises(ValueError):
        backend.generate(PROMPTS, 0, temperature=1.0, top_p=1.0, max_tokens=8, seed=0)
    assert fake_vllm.LLM.instances[0].calls == []


def test_missing_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(RuntimeError, match="needs vLLM"):
        load_backend("vllm", "/models/x")


def test_the_stand_in_refuses_what_vllm_refuses(fake_vllm, model):
    with pytest.raises(TypeError, match="unexpected keyword argument 'threads'"):
        fake_vllm.LLM(model, threads=1)


def test_threads_is_taken_by_the_backend_not_passed_to_vllm(fake_vllm, model):
    """Every scorer calls load_backend(kind, model, threads=...): threads are torch's CPU threads, which
    vLLM's EngineArgs has no field for (TypeError in every paper-scale job before)."""
    backend = load_backend("vllm", model, threads=4)
    assert backend.generate(PROMPTS[:1], 1, temperature=0.0, top_p=1.0, max_tokens=4, seed=0)
    assert not hasattr(fake_vllm.LLM.instances[0].engine_args, "threads")


def test_a_keyword_vllm_lacks_is_refused_by_name_before_the_engine_starts(fake_vllm, model):
    hint = r"gpu_mem_utilization=0\.8 \(did you mean gpu_memory_utilization\?\).*vLLM 0\.24\.0"
    with pytest.raises(ValueError, match=hint):
        load_backend("vllm", model, gpu_mem_utilization=0.8)
    assert fake_vllm.LLM.instances == []
