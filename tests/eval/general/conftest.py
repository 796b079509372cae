"""A tiny random Qwen2 model with its own tokenizer, and normalised samples to build the local task from."""

from __future__ import annotations

import pytest

from toolcall_repro.data.schema import Sample, write_samples

TOOLS = ["get_weather", "book_flight", "send_email", "convert_currency", "play_music", "find_recipe"]


def tool(name: str) -> dict:
    return {"name": name, "description": f"{name} tool", "parameters": {"type": "object", "properties": {}}}


def sample(i: int, answer: str, offered: list[str], setting: str = "single_turn", calls=None) -> Sample:
    return Sample.build(
        id=f"xlam:{i}",
        source="xlam",
        setting=setting,
        tools=[tool(n) for n in offered],
        messages=[{"role": "user", "content": f"please {answer.replace('_', ' ')} number {i}"}],
        ground_truth=calls if calls is not None else [{"name": answer, "arguments": {"x": i}}],
    )


def make_samples(n: int = 30) -> list[Sample]:
    out = []
    for i in range(n):
        answer = TOOLS[i % len(TOOLS)]
        out.append(sample(i, answer, [answer, TOOLS[(i + 1) % len(TOOLS)]]))
    return out


@pytest.fixture
def build():
    """The sample builders, for tests that construct their own rows."""
    return type(
        "Builders", (), {"sample": staticmethod(sample), "many": staticmethod(make_samples), "tools": TOOLS}
    )


@pytest.fixture(scope="session")
def samples_parquet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("data") / "xlam.parquet"
    write_samples(make_samples(), path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    torch.set_num_threads(1)
    corpus = [f"Query: please {t.replace('_', ' ')}\nWhich tool fits this query?\nTool: {t}" for t in TOOLS]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<unk>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus * 10, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    cfg = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("model") / "base"
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    fast.save_pretrained(out)
    return str(out)
