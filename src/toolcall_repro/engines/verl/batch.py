"""Operations on one step's verl `DataProto` (n rollouts per prompt, grouped by `uid`).

The arithmetic is the RL core's (`toolcall_repro.rl`); this module only maps it onto verl's batch
layout: rows are rollouts, `non_tensor_batch["uid"]` names the prompt group of the step,
`non_tensor_batch["extra_info"][i]["id"]` the sample across steps, `token_level_rewards` holds the
outcome reward on the last response token, `response_mask` the tokens that carry the loss.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from verl import DataProto

from toolcall_repro.rl import group_advantages, select_subset


def sequence_rewards(batch: DataProto) -> np.ndarray:
    """One scalar reward per row (verl puts the outcome reward on the last response token)."""
    key = "token_level_rewards" if "token_level_rewards" in batch.batch.keys() else "token_level_scores"
    return batch.batch[key].sum(dim=-1).detach().to(torch.float64).cpu().numpy()


def groups_by_uid(batch: DataProto) -> dict[str, list[int]]:
    """Row indices of each prompt group, groups in order of first appearance, rows ascending."""
    if "uid" not in batch.non_tensor_batch:
        raise KeyError("the batch has no 'uid' column: verl assigns it before generation")
    groups: dict[str, list[int]] = {}
    for row, uid in enumerate(batch.non_tensor_batch["uid"]):
        groups.setdefault(str(uid), []).append(row)
    return groups


def sample_id_of_groups(batch: DataProto, groups: Mapping[str, list[int]]) -> dict[str, str]:
    """uid -> our sample id (`extra_info.id`, written by engines/verl/data.py)."""
    if "extra_info" not in batch.non_tensor_batch:
        raise KeyError(
            "the batch has no 'extra_info' column: was the parquet written by engines/verl/data.py?"
        )
    extra = batch.non_tensor_batch["extra_info"]
    out: dict[str, str] = {}
    for uid, rows in groups.items():
        ids = {str(extra[r].get("id")) if isinstance(extra[r], Mapping) else None for r in rows}
        if len(ids) != 1 or None in ids or "None" in ids:
            raise ValueError(f"group {uid} has sample ids {sorted(map(str, ids))}: expected exactly one")
        out[uid] = ids.pop()
    return out


def rewards_by_sample(batch: DataProto) -> dict[str, list[float]]:
    """{sample id: the n rewards of its group}: what `StreakFilter.update` takes."""
    rewards = sequence_rewards(batch)
    groups = groups_by_uid(batch)
    ids = sample_id_of_groups(batch, groups)
    out: dict[str, list[float]] = {}
    for uid, rows in groups.items():
        if ids[uid] in out:
            raise ValueError(f"sample {ids[uid]} appears in two groups of one step")
        out[ids[uid]] = [float(rewards[r]) for r in rows]
    return out


def downsample_plan(
    rewards: np.ndarray,
    groups: Mapping[str, list[int]],
    m: int,
    selection: str,
    scope: str,
    rng: np.random.Generator | None,
) -> tuple[list[int], np.ndarray]:
    """Rows to keep (m per group, ascending) and their advantages (same order).

    scope="group" normalises over all n rewards of the group, "subset" over the m kept.
    """
    kept_rows: list[int] = []
    kept_adv: list[float] = []
    for uid, rows in groups.items():
        if len(rows) < m:
            raise ValueError(f"group {uid} has {len(rows)} rollouts, fewer than m={m}")
        r = rewards[rows]
        kept = select_subset(selection, r, m, rng)
        adv, _ = group_advantages(r, scope=scope, kept=kept)
        kept_rows += [rows[j] for j in kept]
        kept_adv += [float(adv[j]) for j in kept]
    order = np.argsort(kept_rows, kind="stable")
    return [kept_rows[i] for i in order], np.asarray(kept_adv, dtype=np.float64)[order]


def subset_with_advantages(batch: DataProto, rows: list[int], advantages: np.ndarray) -> DataProto:
    """The kept rows, their advantages broadcast over response tokens, and a meta_info of their own.

    `select_idxs` shares meta_info with the parent batch; a copy keeps the full batch's
    `global_token_num` (read by verl's throughput metrics after the update) intact.
    """
    if len(rows) != len(advantages):
        raise ValueError(f"{len(rows)} rows but {len(advantages)} advantages")
    sub = batch.select_idxs(np.asarray(rows, dtype=np.int64))
    meta = dict(batch.meta_info)
    if "global_token_num" in meta:
        meta["global_token_num"] = [batch.meta_info["global_token_num"][r] for r in rows]
    sub.meta_info = meta
    mask = sub.batch["response_mask"]
    adv = torch.as_tensor(advantages, dtype=torch.float32, device=mask.device).unsqueeze(-1) * mask
    sub.batch["advantages"] = adv
    sub.batch["returns"] = adv.clone()
    return sub


def token_counts(batch: DataProto) -> dict[str, int]:
    """Response tokens (generated, loss-bearing) and prompt + response tokens of the rows."""
    return {
        "response_tokens": int(batch.batch["response_mask"].sum().item()),
        "total_tokens": int(batch.batch["attention_mask"].sum().item()),
        "rows": len(batch),
    }


def reason_fractions(batch: DataProto) -> dict[str, float]:
    """Share of rows per reward reason (`reason` column from our reward function), if present."""
    reasons = batch.non_tensor_batch.get("reason")
    if reasons is None or len(reasons) == 0:
        return {}
    values, counts = np.unique(np.asarray(reasons, dtype=str), return_counts=True)
    return {f"reward/reason/{v}": float(c) / len(reasons) for v, c in zip(values, counts, strict=True)}
