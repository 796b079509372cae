"""ACEBench test fixtures: the real English data (skipped when absent) and a tiny offline model folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolcall_repro.eval.acebench.data import default_data_dir, load_category
from toolcall_repro.eval.acebench.scoring import ground_truth_outputs

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


@dataclass
class Gen:
    text: str
    prompt_tokens: int = 10
    completion_tokens: int = 2


def _oracle(data_dir, categories, limit):
    """A GenerateFn that answers every prompt with the ground truth (agents: the next milestone)."""
    by_question, plans = {}, []
    for category in categories:
        entries = load_category(data_dir, category, limit)
        if category.startswith("agent"):
            # entries share questions, so plans are taken in entry order, one per episode
            plans.extend(
                e["mile_stone"][0] if isinstance(e["mile_stone"][0], list) else e["mile_stone"]
                for e in entries
            )
        else:
            for e, out in zip(entries, ground_truth_outputs(category, entries), strict=True):
                by_question[e["question"]] = out
    seeds, current = [], []

    def generate(requests, seed):
        seeds.append(seed)
        out = []
        for messages, _tools in requests:
            history = messages[-1]["content"].split("\n", 1)[1]
            if history in by_question:
                out.append(Gen(by_question[history]))
                continue
            if "execution result:" not in history and "agent:" not in history:
                current.append(plans.pop(0))  # a new episode starts
            done = history.count("execution result:")
            plan = current[-1]
            out.append(Gen(plan[done] if done < len(plan) else "finish conversation"))
        return out

    generate.seeds = seeds
    return generate


@pytest.fixture
def oracle():
    """`oracle(data_dir, categories, limit)`: a GenerateFn answering every prompt with its ground truth."""
    return _oracle


@pytest.fixture
def gen():
    """The Generation shape backends return (text, prompt_tokens, completion_tokens)."""
    return Gen
