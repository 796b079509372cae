"""verl's custom reward function: `reward.custom_reward_function.path=pkg://toolcall_repro.engines.verl.reward`.

verl's reward manager decodes each response (special tokens skipped; Qwen's `<think>` and
`<tool_call>` are ordinary added tokens, so they survive) and calls `compute_score` with the row's
`data_source`, `reward_model.ground_truth` and `extra_info` (our `setting` decides the reward).
The returned dict becomes per-row columns: `acc` makes verl report held-out accuracy as
`val-core/<data_source>/acc/mean@1`, and `reason` (a string) is counted per step by the trainer.
"""

from __future__ import annotations

from typing import Any

from toolcall_repro import rewards


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **_: Any
) -> dict:
    """`{"score", "acc", "reason"}` for one rollout; extra keyword arguments (reward-model routing) unused."""
    result = rewards.compute_score(data_source, solution_str, ground_truth, extra_info)
    score = float(result["score"])
    return {"score": score, "acc": score, "reason": str(result["reason"])}
