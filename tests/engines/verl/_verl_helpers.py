"""Helpers of the verl CPU tests: a chat template, samples, run configs (no verl import here)."""

from __future__ import annotations

import json
import os

CHAT_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


def tiny_qwen2_config():
    import transformers

    return transformers.Qwen2Config(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=64, architectures=["Qwen2ForCausalLM"],
    )  # fmt: skip


def chat_messages(messages: list[dict], tools: list[dict]) -> list[dict]:
    """A stand-in for the protocol's training rendering: tools in the system prompt, history as is."""
    system = {"role": "system", "content": "Tools: " + json.dumps(tools, sort_keys=True)}
    return [system] + [{"role": m["role"], "content": m["content"]} for m in messages]


def make_sample(i: int, setting: str = "single_turn", words: int = 1):
    from toolcall_repro.data.schema import Sample

    messages = [{"role": "user", "content": "weather " * words + f"in city{i}?"}]
    if setting == "multi_turn":
        messages = [
            {"role": "user", "content": f"weather in town{i}?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": f"town{i}"}}],
            },
            {"role": "tool", "content": '{"temp": 3}'},
            {"role": "user", "content": f"and in city{i}?"},
        ]
    return Sample.build(
        id=f"xlam:{i}",
        source="xlam",
        setting=setting,
        tools=TOOLS,
        messages=messages,
        ground_truth=[{"name": "get_weather", "arguments": {"city": f"city{i}"}}],
    )


def run_config(**changes) -> dict:
    """A paper-like run config scaled down (the train_grpo rule's JSON)."""
    cfg = {
        "setting": "single_turn",
        "variant": "efficient",
        "lr": 1e-6,
        "batch_size": 4,
        "n": 4,
        "temperature": 0.7,
        "top_p": 1.0,
        "max_prompt_tokens": 512,
        "max_new_tokens": 64,
        "epochs": 3,
        "clip_low": 0.2,
        "clip_high": 0.28,
        "loss_agg": "token-mean",
        "checkpoint_every": 2,
        "heldout_size": 3,
        "filter": {"k": 1, "probe_every": 2, "probe_fraction": 0.0, "semantics": "temporary"},
        "downsample": {"m": 2, "selection": "max_variance", "advantage_scope": "group"},
    }
    cfg.update(changes)
    return cfg


def step_batch(groups: dict[str, list[float]], prompt_len: int = 5, response_len: int = 7, seed: int = 0):
    """One step's batch as verl's fit() hands it to `_update_actor`: n rows per prompt, interleaved,
    with uid, extra_info, rewards on the last response token and verl's own GRPO advantages."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    gen = torch.Generator().manual_seed(seed)
    uids, extra, rewards, reasons = [], [], [], []
    for g, (sample_id, rs) in enumerate(groups.items()):
        for r in rs:
            uids.append(f"uid-{g}")
            extra.append({"id": sample_id, "index": g})
            rewards.append(float(r))
            reasons.append("correct" if r >= 1.0 else "wrong_args")
    rows = len(rewards)
    lengths = torch.randint(1, response_len + 1, (rows,), generator=gen)
    response_mask = (torch.arange(response_len)[None, :] < lengths[:, None]).long()
    prompt_mask = torch.ones(rows, prompt_len, dtype=torch.long)
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    scores = torch.zeros(rows, response_len)
    scores[torch.arange(rows), lengths - 1] = torch.tensor(rewards)
    batch = DataProto.from_single_dict(
        {
            "prompts": torch.randint(0, 50, (rows, prompt_len), generator=gen),
            "responses": torch.randint(0, 50, (rows, response_len), generator=gen),
            "input_ids": torch.randint(0, 50, (rows, prompt_len + response_len), generator=gen),
            "attention_mask": attention_mask,
            "response_mask": response_mask,
            "token_level_scores": scores,
            "token_level_rewards": scores.clone(),
            "old_log_probs": -torch.rand(rows, response_len, generator=gen),
            "uid": np.array(uids, dtype=object),
            "extra_info": np.array(extra, dtype=object),
            "reason": np.array(reasons, dtype=object),
        },
        meta_info={"global_token_num": attention_mask.sum(-1).tolist(), "temperature": 1.0},
    )
    n = len(next(iter(groups.values())))
    return compute_advantage(batch, adv_estimator="grpo", num_repeat=n)


ALWAYS_RIGHT = {f"xlam:{i}" for i in range(8)}  # of twelve training samples; the other four stay mixed


def rewards_for(sample_id: str) -> list[float]:
    return [1.0] * 4 if sample_id in ALWAYS_RIGHT else [1.0, 0.0, 0.0, 1.0]


def prepared_overrides(tmp_path, tokenizer, model_dir, seed: int = 5, log=print, **run_changes) -> list[str]:
    """`launch.prepare` on twelve training and four held-out samples (2 GPUs); the override list."""
    from toolcall_repro.data.schema import write_samples
    from toolcall_repro.engines.verl import launch

    write_samples([make_sample(i) for i in range(12)], tmp_path / "train_in.parquet")
    write_samples([make_sample(100 + i) for i in range(4)], tmp_path / "heldout_in.parquet")
    return launch.prepare(
        train=str(tmp_path / "train_in.parquet"),
        heldout=str(tmp_path / "heldout_in.parquet"),
        base=str(model_dir),
        config=run_config(**run_changes),
        out=str(tmp_path / "train" / "single_turn" / "efficient"),
        seed=seed,
        nodes=1,
        gpus_per_node=2,
        chat_messages=chat_messages,
        tokenizer=tokenizer,
        validate=False,
        log=log,
    )


def cpu_trainer(overrides: list[str], tokenizer):
    """Our trainer as verl builds it (datasets, StatefulDataLoader, sampler) with a stand-in worker
    group: two data-parallel ranks whose checkpoint save/load do nothing (the GPU part)."""
    from types import SimpleNamespace

    from verl.trainer.ppo.ray_trainer import Role

    from toolcall_repro.engines.verl.main import build_trainer, compose_config

    t = build_trainer(
        compose_config(overrides),
        tokenizer=tokenizer,
        processor=None,
        role_worker_mapping={Role.ActorRollout: object},
        resource_pool_manager=None,
        ray_worker_group_cls=None,
    )
    t.actor_rollout_wg = SimpleNamespace(
        _dispatch_info={"actor": [0, 1]},
        save_checkpoint=lambda local_path, *a, **k: os.makedirs(local_path, exist_ok=True),
        load_checkpoint=lambda *a, **k: None,
    )
    return t


def drive(t, stop_after: int | None = None) -> list[dict]:
    """`RayPPOTrainer.fit`'s epoch loop without the GPU: restore a checkpoint, take verl's epoch as
    `global_steps // len(dataloader)`, loop over the epochs left and their batches, n rollouts a
    prompt (`rewards_for`), our `_update_actor`. With `stop_after`, checkpoint at that step and stop
    (a kill). One record a step: step, the filter's epoch, prompts seen, prompts skipped."""
    from verl import DataProto

    steps = []
    t.global_steps = 0
    t._load_checkpoint()
    current_epoch = t.global_steps // len(t.train_dataloader)
    t.global_steps += 1
    for _epoch in range(current_epoch, t.config.trainer.total_epochs):
        for batch_dict in t.train_dataloader:
            ids = [e["id"] for e in DataProto.from_single_dict(batch_dict).non_tensor_batch["extra_info"]]
            t._update_actor(step_batch({i: rewards_for(i) for i in ids}, seed=t.global_steps))
            steps.append(
                {
                    "step": t.global_steps,
                    "filter_epoch": t.streak_sampler.epoch,
                    "ids": sorted(ids),
                    "skipped": t.streak_sampler.filter.stats()["skipped"],
                }
            )
            if t.global_steps == stop_after:  # verl's checkpoint (data.pt, marker) + ours, then a kill
                t._save_checkpoint()
                return steps
            t.global_steps += 1
    return steps
