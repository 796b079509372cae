"""What a verl retry resumes: the run's identity is what it computes, and a mismatch never deletes.

`launch.prepare` and its fingerprint need no verl (validate=False skips composing against verl's schema),
so these run in the main env; tests/engines/verl/test_resume.py drives the same rule through verl's own
trainer in .venv-verl.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from toolcall_repro.data.schema import write_samples
from toolcall_repro.engines.verl import hydra, launch

sys.path.insert(0, str(Path(__file__).parent / "verl"))  # its helpers import no verl
from _verl_helpers import chat_messages, make_sample, run_config  # noqa: E402

MATH = ({"seed": 6}, {"lr": 2e-6}, {"epochs": 4}, {"verl": {"ppo_mini_batch_size": 2}})
PERFORMANCE = {
    "gpu_memory_utilization": 0.85,
    "ray_num_cpus": 12,
    "tensor_parallel": 1,
    "gradient_checkpointing": False,
    "param_offload": True,
    "optimizer_offload": True,
    "attn_implementation": "eager",
    "max_checkpoints_to_keep": 5,
    "vllm": {"enforce_eager": True, "max_num_batched_tokens": 4096, "max_num_seqs": 64},
    "extra_overrides": ["+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_DEBUG=INFO"],
}


@pytest.fixture
def attempt(tmp_path, tiny_model_dir):
    """attempt(**changes) -> (run.json, log lines): one `prepare` of the same job, `changes` to its run
    config (`seed`, and `verl` for train.verl keys)."""
    write_samples([make_sample(i) for i in range(12)], tmp_path / "train_in.parquet")
    write_samples([make_sample(100 + i) for i in range(4)], tmp_path / "heldout_in.parquet")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    out = tmp_path / "train" / "single_turn" / "efficient"

    def go(seed: int = 5, verl: dict | None = None, **changes) -> tuple[dict, list[str]]:
        messages: list[str] = []
        launch.prepare(
            train=str(tmp_path / "train_in.parquet"), heldout=str(tmp_path / "heldout_in.parquet"),
            base=str(tiny_model_dir), config={**run_config(**changes), "verl": verl or {}}, out=str(out),
            seed=seed, nodes=1, gpus_per_node=2, chat_messages=chat_messages, tokenizer=tokenizer,
            validate=False, log=messages.append,
        )  # fmt: skip
        return json.loads((out / "verl" / launch.RUN_JSON).read_text()), messages

    return go


def checkpoint(run: dict, step: int = 2) -> Path:
    """A complete checkpoint of `run` as verl and our trainer leave it (the weight shards stood in for)."""
    root = Path(run["paths"]["checkpoints"])
    folder = root / f"global_step_{step}"
    (folder / "actor").mkdir(parents=True)
    (folder / "actor" / "model_world_size_2_rank_0.pt").write_bytes(b"weights")
    (folder / "data.pt").write_bytes(b"loader")
    (folder / launch.CHECKPOINT_STATE).write_text(json.dumps({"fingerprint": run["fingerprint"]}))
    (root / launch.TRACKER).write_text(str(step))
    return folder


def test_every_performance_only_key_is_one_the_engine_knows():
    assert set(hydra.PERFORMANCE_ONLY) <= set(hydra.VERL_DEFAULTS) - {"nodes", "gpus_per_node", "ulysses_sp"}


@pytest.mark.parametrize("key", sorted(PERFORMANCE))
def test_retuning_a_performance_only_key_resumes_the_run(attempt, key):
    first, _ = attempt(verl={"tensor_parallel": 2})
    folder = checkpoint(first)
    retry, messages = attempt(verl={"tensor_parallel": 2, key: PERFORMANCE[key]})
    assert retry["verl"][key] != first["verl"][key]  # the knob did change
    assert retry["fingerprint"] == first["fingerprint"]
    assert retry["resume_from"] == str(folder) and messages == [f"resuming from {folder}"]


@pytest.mark.parametrize("changes", MATH, ids=lambda c: next(iter(c)))
def test_another_runs_checkpoints_are_moved_aside_never_deleted(attempt, changes):
    first, _ = attempt()
    folder = checkpoint(first)
    root = folder.parent
    other, messages = attempt(**changes)
    assert other["fingerprint"] != first["fingerprint"] and other["resume_from"] is None
    aside = root.with_name(f"checkpoints.stale-{first['fingerprint'][:12]}-1")
    assert (aside / folder.name / "actor" / "model_world_size_2_rank_0.pt").read_bytes() == b"weights"
    assert (aside / launch.TRACKER).read_text() == "2" and not root.exists()
    assert messages == [
        f"not resuming from {root}: global_step_2 is another run's (config, seed, data or base weights "
        f"differ); moved to {aside} (delete it when you do not need it)"
    ]
    # a second mismatch keeps the first one aside too
    checkpoint(other)
    attempt()
    assert aside.exists() and root.with_name(f"checkpoints.stale-{other['fingerprint'][:12]}-1").exists()


def test_an_incomplete_checkpoint_folder_is_moved_aside_too(attempt):
    first, _ = attempt()
    folder = checkpoint(first)
    (folder.parent / launch.TRACKER).unlink()
    again, messages = attempt()
    assert (
        again["resume_from"] is None
        and (folder.parent.with_name("checkpoints.stale-incomplete-1") / folder.name).is_dir()
    )
    assert messages[0].startswith(f"not resuming from {folder.parent}: no {launch.TRACKER}")
