"""ACEBench test fixtures: the real English data (skipped when absent) and a tiny offline model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolcall_repro.eval.acebench.data import default_data_dir

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = default_data_dir(REPO)
    if not (path / "data_normal_atom_bool.json").is_file():
        pytest.skip(f"ACEBench data not found at {path} (set ACEBENCH_DATA_DIR or place it in ../shared)")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, data_dir) -> Path:
    """A 2-layer random Qwen2 with a byte-level BPE trained on a slice of ACEBench text (short prompts)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from toolcall_repro.protocol import load_chat_template

    torch.set_num_threads(1)
    corpus = []
    for path in sorted(data_dir.glob("data_*.json"))[:6]:
        corpus.extend(path.read_text(encoding="utf-8").splitlines()[:20])
    special = [
        "<|im_end|>",
        "<|im_start|>",
        "<|endoftext|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
    ]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=3000, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    tokenizer.chat_template = load_chat_template()
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16384,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    out = tmp_path_factory.mktemp("tiny_acebench_model")
    Qwen2ForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture
def protocol_json():
    """Inline protocol JSON as the workflow passes it (with its `id`), short generations."""
    return _protocol_json


def _protocol_json(**overrides) -> str:
    spec = {
        "id": "stronger",
        "system_prompt": "stronger",
        "template": "native",
        "thinking": "drop",
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 6,
        "seed": 0,
        "backend": "transformers",
    }
    spec.update(overrides)
    return json.dumps(spec)
