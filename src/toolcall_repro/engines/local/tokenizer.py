"""A byte-level BPE tokenizer trained on the synthetic data (with `tokenizers`), wrapped for transformers.

It pre-tokenizes exactly as Qwen2's tokenizer (NFC, Qwen's split regex, byte-level): transformers 5
rebuilds any `qwen2` model directory's tokenizer as `Qwen2Tokenizer` with that hard-coded pipeline, so
any other pre-tokenizer would encode differently once the model is reloaded with AutoTokenizer.
The chat markers and tool-call tags are single added tokens, as in Qwen's tokenizer.
Training is deterministic for the same texts and vocabulary size.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX as QWEN2_SPLIT

EOS = "<|im_end|>"
PAD = "<|endoftext|>"
SPECIAL_TOKENS = (PAD, "<|im_start|>", EOS)
# Tags the chat template and the tool-call format write; kept whole (not special: decoding keeps them).
TAG_TOKENS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tools>",
    "</tools>",
    "<tool_response>",
    "</tool_response>",
)


def _wrap(tok: Tokenizer, chat_template: str | None) -> PreTrainedTokenizerFast:
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[SPECIAL_TOKENS[1]],
        clean_up_tokenization_spaces=False,
    )
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast


def _trained_bpe(texts: list[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    # Reserved ids first (0 = pad); registering them after training reuses these ids, never new ones.
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[*SPECIAL_TOKENS, *TAG_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    tok.add_tokens(list(TAG_TOKENS))
    return tok


def provisional_tokenizer(chat_template: str) -> PreTrainedTokenizerFast:
    """A byte-only tokenizer with the chat template: enough to render prompts as text before training."""
    return _wrap(_trained_bpe(["a"], 0), chat_template)


def train_tokenizer(texts: Iterable[str], vocab_size: int, chat_template: str) -> PreTrainedTokenizerFast:
    """Train a BPE of at most `vocab_size` tokens on `texts`; every byte string stays encodable."""
    floor = len(pre_tokenizers.ByteLevel.alphabet()) + len(SPECIAL_TOKENS) + len(TAG_TOKENS)
    if vocab_size <= floor:
        raise ValueError(f"vocab_size must exceed {floor} (bytes + special tokens), got {vocab_size}")
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to train the tokenizer on")
    return _wrap(_trained_bpe(texts, vocab_size), chat_template)
