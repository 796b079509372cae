"""Fixtures for the local engine: samples in the normalised schema, a tiny base model, run configs."""

import json
import random

import pytest
import torch

from toolcall_repro.data.schema import Sample, write_samples

torch.set_num_threads(1)

ROOMS = ["kitchen", "bedroom", "office"]
CITIES = ["paris", "tokyo", "lima"]
TOOLS = [
    {
        "name": "set_light",
        "description": "turn a light on or off",
        "parameters": {
            "type": "object",
            "properties": {"room": {"type": "string", "enum": ROOMS}, "on": {"type": "boolean"}},
            "required": ["room", "on"],
        },
    },
    {
        "name": "get_weather",
        "description": "the weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": CITIES}},
            "required": ["city"],
        },
    },
]
# The warm start config the engine tests use: a model small enough to train in about a second.
TINY = {
    "seed": 0,
    "vocab_size": 1500,
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 2,
    "num_kv_heads": 1,
    "intermediate_size": 64,
    "max_position_embeddings": 2048,
    "sft_steps": 30,
    "sft_batch_size": 8,
    "sft_lr": 0.01,
}


def _request(rng):
    if rng.random() < 0.5:
        room, on = rng.choice(ROOMS), rng.random() < 0.5
        return f"switch the {room} light {'on' if on else 'off'}", {
            "name": "set_light",
            "arguments": {"room": room, "on": on},
        }
    city = rng.choice(CITIES)
    return f"what is the weather in {city}", {"name": "get_weather", "arguments": {"city": city}}


def make_samples(setting: str, count: int, seed: int, prefix: str) -> list[Sample]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        messages = []
        for _ in range(2 if setting == "multi_turn" else 0):
            text, call = _request(rng)
            messages += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": json.dumps({"status": "ok"})},
                {"role": "assistant", "content": "done."},
            ]
        text, call = _request(rng)
        messages.append({"role": "user", "content": text})
        source = "looptool" if setting == "multi_turn" else "xlam"
        out.append(
            Sample.build(
                id=f"{source}:{prefix}{i}",
                source=source,
                setting=setting,
                tools=TOOLS,
                messages=messages,
                ground_truth=[call],
            )
        )
    return out


def grpo_config(**over):
    cfg = {
        "lr": 1e-3,
        "batch_size": 4,
        "n": 4,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_prompt_tokens": 2048,
        "max_new_tokens": 10,
        "epochs": 2,
        "clip_low": 0.2,
        "clip_high": 0.28,
        "loss_agg": "token-mean",
        "checkpoint_every": 2,
        "heldout_size": 4,
        "filter": None,
        "downsample": None,
    }
    cfg.update(over)
    return cfg


VARIANTS = {
    "vanilla": {"filter": None, "downsample": None},
    "efficient": {
        "filter": {"k": 1, "probe_every": 2, "probe_fraction": 0.0, "semantics": "temporary"},
        "downsample": {"m": 2, "selection": "max_variance", "advantage_scope": "group"},
    },
    "filter_only": {
        "filter": {"k": 1, "probe_every": 2, "probe_fraction": 0.0, "semantics": "temporary"},
        "downsample": None,
    },
    "downsample_only": {
        "filter": None,
        "downsample": {"m": 2, "selection": "max_variance", "advantage_scope": "group"},
    },
}


@pytest.fixture(scope="session")
def sample_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("samples")
    files = {}
    for setting, seed in (("single_turn", 0), ("multi_turn", 1)):
        files[setting] = root / f"{setting}.parquet"
        files[f"heldout_{setting}"] = root / f"heldout_{setting}.parquet"
        write_samples(make_samples(setting, 16, seed, "t"), files[setting])
        write_samples(make_samples(setting, 6, seed + 10, "h"), files[f"heldout_{setting}"])
    return files


@pytest.fixture(scope="session")
def base_model(sample_files, tmp_path_factory):
    """A warm-started tiny model directory built in-process (the CLI is tested separately)."""
    from toolcall_repro.engines.local.model import save_hf_dir
    from toolcall_repro.engines.local.prompts import load_samples
    from toolcall_repro.engines.local.warmstart import warm_start

    samples = load_samples([sample_files["single_turn"], sample_files["multi_turn"]])
    model, tokenizer, _ = warm_start(samples, TINY, seed=0, log=lambda m: None)
    return save_hf_dir(model, tokenizer, tmp_path_factory.mktemp("models") / "base")


@pytest.fixture
def make_config():
    """A GRPO run config for the fixture data, with overrides."""
    return grpo_config


@pytest.fixture
def variants():
    return VARIANTS


@pytest.fixture
def tiny_config():
    return dict(TINY)
