"""A tiny randomly initialised Qwen2 model and a BPE tokenizer built here (no Hub)."""

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from toolcall_repro.protocol import load_chat_template

# <|im_end|> first, so it gets id 0: a model whose logits are all equal picks it under greedy decoding
SPECIAL = [
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
]
CORPUS = [
    "What is the weather in Paris? Rome? Oslo?",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "system user assistant tool response You can call functions described in JSON",
    "[get_weather(city='Paris')] 0123456789 abcdefghijklmnopqrstuvwxyz",
]


def build_tokenizer() -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator(CORPUS, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    tok.chat_template = load_chat_template()
    return tok


def build_model(vocab_size: int, *, stop_at_once: bool = False) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config)
    if stop_at_once:
        with torch.no_grad():
            model.model.norm.weight.zero_()  # every logit 0: greedy picks id 0, <|im_end|>
    return model


def save_tiny(directory, *, stop_at_once: bool = False):
    tok = build_tokenizer()
    build_model(len(tok), stop_at_once=stop_at_once).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny_qwen2"))


@pytest.fixture(scope="session")
def stopping_model_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny_qwen2_stop"), stop_at_once=True)
