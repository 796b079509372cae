import pytest
import torch

from toolcall_repro.backends import load_backend
from toolcall_repro.backends.base import Generation, derive_seed
from toolcall_repro.backends.transformers import TransformersBackend
from toolcall_repro.protocol import Protocol, render

PROMPT_A = "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n"
PROMPT_B = "<|im_start|>user\nAnd in Oslo?<|im_end|>\n<|im_start|>assistant\n"
PROMPT_C = "<|im_start|>user\nRome?<|im_end|>\n<|im_start|>assistant\n"
SAMPLE = {"temperature": 1.0, "top_p": 0.95, "max_tokens": 8}


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return TransformersBackend(tiny_model_dir, threads=1)


def texts(result):
    return [[g.text for g in gens] for gens in result]


def test_shape_and_token_counts(backend):
    result = backend.generate([PROMPT_A, PROMPT_B], 3, seed=0, **SAMPLE)
    assert [len(gens) for gens in result] == [3, 3]
    for prompt, gens in zip([PROMPT_A, PROMPT_B], result, strict=True):
        expected_prompt_tokens = len(backend.tokenizer(prompt, add_special_tokens=False).input_ids)
        for g in gens:
            assert isinstance(g, Generation)
            assert g.prompt_tokens == expected_prompt_tokens
            assert 1 <= g.completion_tokens <= SAMPLE["max_tokens"]
            assert g.finish_reason in ("stop", "length")
            assert (g.finish_reason == "length") == (
                g.completion_tokens == SAMPLE["max_tokens"] and "<|im_end|>" not in g.text
            )
    assert torch.get_num_threads() == 1


def test_same_seed_same_samples_other_seed_other_samples(backend):
    first = backend.generate([PROMPT_A, PROMPT_B], 4, seed=7, **SAMPLE)
    again = backend.generate([PROMPT_A, PROMPT_B], 4, seed=7, **SAMPLE)
    other = backend.generate([PROMPT_A, PROMPT_B], 4, seed=8, **SAMPLE)
    assert first == again
    assert texts(first) != texts(other)
    assert len(set(texts(first)[0])) > 1  # n samples of one prompt differ from each other


def test_a_prompts_samples_do_not_depend_on_the_other_prompts(backend):
    with_b = backend.generate([PROMPT_A, PROMPT_B], 2, seed=3, **SAMPLE)
    with_c = backend.generate([PROMPT_A, PROMPT_C], 2, seed=3, **SAMPLE)
    assert with_b[0] == with_c[0]


def test_greedy_matches_a_manual_argmax_loop(backend):
    result = backend.generate([PROMPT_A], 3, temperature=0.0, top_p=0.5, max_tokens=6, seed=0)
    assert result[0][0] == result[0][1] == result[0][2]
    ids = backend.tokenizer(PROMPT_A, add_special_tokens=False, return_tensors="pt").input_ids
    generated = []
    with torch.no_grad():
        for _ in range(6):
            next_id = int(backend.model(input_ids=ids).logits[0, -1].argmax())
            generated.append(next_id)
            if next_id in backend.stop_token_ids:
                break
            ids = torch.cat([ids, torch.tensor([[next_id]])], dim=1)
    kept = [t for t in generated if t not in backend.stop_token_ids]
    assert result[0][0].text == backend.tokenizer.decode(kept, skip_special_tokens=False)
    assert result[0][0].completion_tokens == len(generated)
    # the seed does not matter when decoding greedily
    assert (
        backend.generate([PROMPT_A], 1, temperature=0.0, top_p=1.0, max_tokens=6, seed=99)[0][0]
        == result[0][0]
    )


def test_stops_at_im_end_and_leaves_it_out(stopping_model_dir):
    backend = TransformersBackend(stopping_model_dir)
    assert backend.tokenizer.convert_ids_to_tokens(0) == "<|im_end|>"
    [[g]] = backend.generate([PROMPT_A], 1, temperature=0.0, top_p=1.0, max_tokens=5, seed=0)
    assert g == Generation(text="", prompt_tokens=g.prompt_tokens, completion_tokens=1, finish_reason="stop")


def test_rendered_protocol_prompt_runs_end_to_end(backend):
    tools = [
        {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {}}}
    ]
    prompt = render([{"role": "user", "content": "Weather in Oslo?"}], tools, Protocol(), backend.tokenizer)
    [[g]] = backend.generate([prompt], 1, seed=0, **SAMPLE)
    assert g.prompt_tokens == len(backend.tokenizer(prompt, add_special_tokens=False).input_ids)
    assert backend.tokenizer(prompt, add_special_tokens=False).input_ids[
        0
    ] == backend.tokenizer.convert_tokens_to_ids("<|im_start|>")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prompts": [], "n": 0},
        {"prompts": [""], "n": 1},
        {"prompts": "not a list", "n": 1},
        {"prompts": [PROMPT_A], "n": 1, "temperature": -1.0},
        {"prompts": [PROMPT_A], "n": 1, "top_p": 0.0},
        {"prompts": [PROMPT_A], "n": 1, "max_tokens": 0},
        {"prompts": [PROMPT_A], "n": 1, "seed": -3},
    ],
)
def test_bad_requests_raise(backend, kwargs):
    args = {"temperature": 1.0, "top_p": 1.0, "max_tokens": 4, "seed": 0} | kwargs
    prompts, n = args.pop("prompts"), args.pop("n")
    with pytest.raises(ValueError):
        backend.generate(prompts, n, **args)


def test_missing_model_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        TransformersBackend(tmp_path)
    with pytest.raises(ValueError):
        TransformersBackend(tmp_path, threads=0)


def test_load_backend(tiny_model_dir):
    assert isinstance(load_backend("transformers", tiny_model_dir, threads=1), TransformersBackend)
    with pytest.raises(ValueError, match="unknown backend"):
        load_backend("sglang", tiny_model_dir)


def test_derive_seed_is_stable_and_distinct():
    assert derive_seed(0, 0) == derive_seed(0, 0)
    seeds = {derive_seed(s, i) for s in range(10) for i in range(100)}
    assert len(seeds) == 1000
    assert all(0 <= s < 2**63 for s in seeds)


def test_a_request_past_the_models_context_is_refused_as_vllm_refuses_it(tiny_qwen2):
    """The context is config.max_position_embeddings (vLLM's default max_model_len): prompt tokens plus
    max_tokens beyond it raise, naming both; exactly at it the request runs."""
    from toolcall_repro.backends.transformers import ContextLengthError

    short = TransformersBackend(tiny_qwen2(max_positions=64), threads=1)
    prompt_tokens = len(short.tokenizer(PROMPT_A, add_special_tokens=False).input_ids)
    fits = 64 - prompt_tokens
    (gens,) = short.generate([PROMPT_A], 1, seed=0, temperature=0.0, top_p=1.0, max_tokens=fits)
    assert gens[0].prompt_tokens == prompt_tokens
    with pytest.raises(ContextLengthError, match=rf"maximum context length is 64 tokens.*{prompt_tokens} in the prompt and {fits + 1}"):
        short.generate([PROMPT_A], 1, seed=0, temperature=0.0, top_p=1.0, max_tokens=fits + 1)
