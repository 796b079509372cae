"""ACEBench test fixtures: the real English data (skipped when absent) and a tiny offline model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolcall_repro.eval.acebench.data import default_data_dir

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = default_data_dir(REPO.parent / "shared" / "data" / "acebench" / "data_all" / "data_en")
    if not (path / "data_normal_atom_bool.json").is_file():
        pytest.skip(f"ACEBench data not found at {path} (set ACEBENCH_DATA_DIR or place it in ../shared)")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_qwen2, data_dir) -> Path:
    """The shared tiny Qwen2 with a 16384-token context and a tokenizer trained on a slice of ACEBench
    text (short prompts)."""
    corpus = []
    for path in sorted(data_dir.glob("data_*.json"))[:6]:
        corpus.extend(path.read_text(encoding="utf-8").splitlines()[:20])
    return tiny_qwen2(max_positions=16384, corpus=corpus, vocab_size=3000)


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
