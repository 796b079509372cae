"""The tiny Qwen2-architecture policy: built from a config, saved as an HF model directory atomically."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerBase,
    Qwen2Config,
    Qwen2ForCausalLM,
)

TINY_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "intermediate_size",
    "max_position_embeddings",
)


def set_threads(threads: int) -> None:
    """Torch threads from the rule's `threads` (1 per job on a busy 2-core machine is fastest)."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)


def tiny_config(tiny: Mapping, vocab_size: int, tokenizer: PreTrainedTokenizerBase) -> Qwen2Config:
    missing = [k for k in TINY_KEYS if k not in tiny]
    if missing:
        raise ValueError(f"model.tiny config lacks {missing}")
    if tiny["hidden_size"] % tiny["num_heads"] or tiny["num_heads"] % tiny["num_kv_heads"]:
        raise ValueError("hidden_size must divide by num_heads and num_heads by num_kv_heads")
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=int(tiny["hidden_size"]),
        intermediate_size=int(tiny["intermediate_size"]),
        num_hidden_layers=int(tiny["num_layers"]),
        num_attention_heads=int(tiny["num_heads"]),
        num_key_value_heads=int(tiny["num_kv_heads"]),
        max_position_embeddings=int(tiny["max_position_embeddings"]),
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )


def build_model(config: Qwen2Config, seed: int) -> Qwen2ForCausalLM:
    """Fresh weights from `seed` (the initialisation is the only randomness)."""
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    return model


def load_policy(model_dir: str | Path) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """An HF model directory (the tiny base model or a GRPO final/) in float32 on the CPU."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir} is not an HF model directory (no config.json)")
    # local_files_only: a local folder needs no hub, and the flag is saved with the tokenizer (tokenizer_config.json),
    # so leaving it to the caller's HF_HUB_OFFLINE would make a trained model's bytes the caller's shell's
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, local_files_only=True)
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ValueError(f"{model_dir}: the tokenizer needs an eos and a pad token")
    return model, tokenizer


def replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished directory into place; a killed job leaves only a dot-tmp directory behind."""
    if final.exists():
        old = final.with_name(f".{final.name}.old{os.getpid()}")
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old)
    else:
        tmp.rename(final)


def tmp_dir_for(final: Path) -> Path:
    tmp = final.with_name(f".{final.name}.tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def save_hf_dir(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    out: str | Path,
    extra_files: Mapping[str, str] | None = None,
) -> Path:
    """Save model + tokenizer (with its chat template) and any extra text files as an HF dir, atomically."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir_for(out)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    for name, text in (extra_files or {}).items():
        (tmp / name).write_text(text)
    replace_dir(tmp, out)
    return out
