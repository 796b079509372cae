"""Fixtures of the verl CPU tests. Nothing here imports verl: the main environment only skips them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

# This folder has no __init__.py (a package here would be named `verl`): make its helpers importable.
sys.path.insert(0, str(Path(__file__).parent))
from _verl_helpers import CHAT_TEMPLATE, tiny_qwen2_config  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    from toolcall_repro.engines.local.tokenizer import provisional_tokenizer

    return provisional_tokenizer(CHAT_TEMPLATE)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, tokenizer):
    """A base model directory as `--base` gets it: tokenizer and config (no weights)."""
    path = tmp_path_factory.mktemp("base")
    tokenizer.save_pretrained(path)
    tiny_qwen2_config().save_pretrained(path)  # verl's HFModelConfig reads the architecture
    return path
