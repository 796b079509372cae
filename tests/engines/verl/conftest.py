"""Fixtures of the verl CPU tests. Nothing here imports verl: the main environment only skips them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

# This folder has no __init__.py (a package here would be named `verl`): make its helpers importable.
sys.path.insert(0, str(Path(__file__).parent))
from _verl_helpers import CHAT_TEMPLATE  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    from toolcall_repro.engines.local.tokenizer import provisional_tokenizer

    return provisional_tokenizer(CHAT_TEMPLATE)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, tokenizer):
    """A directory `AutoTokenizer.from_pretrained` loads (what `--base` points at)."""
    path = tmp_path_factory.mktemp("base")
    tokenizer.save_pretrained(path)
    return path
