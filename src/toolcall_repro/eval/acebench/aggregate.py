"""Seed summary of ACEBench score files: mean, sample std and range of every metric over seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

SUMMARY_METRICS = ("normal", "special", "agent", "overall", "agent_process")
# Card fields that legitimately differ between the seed files of one (model, protocol).
_PER_SEED_CARD_KEYS = ("seed", "protocol")


def _metrics(doc: Mapping) -> dict[str, float | None]:
    """Upstream-checker metrics under their plain names (the headline), fixed-checker ones as `fixed/<name>`."""
    out: dict[str, float | None] = {m: doc["summary"].get(m) for m in SUMMARY_METRICS}
    if "summary_fixed" in doc:
        out.update({f"fixed/{m}": doc["summary_fixed"].get(m) for m in SUMMARY_METRICS})
    for category, score in doc["categories"].items():
        for prefix, sc in (("", score), ("fixed/", score.get("fixed"))):
            if sc is None:
                continue
            out[f"{prefix}{category}/accuracy"] = sc["accuracy"]
            if sc.get("process_accuracy") is not None:
                out[f"{prefix}{category}/process_accuracy"] = sc["process_accuracy"]
    return out


def _shared_card(card: Mapping) -> dict:
    shared = {k: v for k, v in card.items() if k not in _PER_SEED_CARD_KEYS}
    protocol = {k: v for k, v in card.get("protocol", {}).items() if k != "seed"}
    return {**shared, "protocol": protocol}


def summarise_seeds(docs: Sequence[Mapping]) -> dict:
    """`{"card", "seeds", "metrics": {name: {"mean", "std", "min", "max", "per_seed"}}}`.

    std is the sample standard deviation (n-1), null for a single seed. All files must share one protocol,
    model, data and scoring (only the seed may differ), else ValueError.
    """
    if not docs:
        raise ValueError("no ACEBench score files to summarise")
    reference = _shared_card(docs[0]["card"])
    for doc in docs[1:]:
        card = _shared_card(doc["card"])
        if card != reference:
            differing = sorted(k for k in set(card) | set(reference) if card.get(k) != reference.get(k))
            raise ValueError(f"score files differ in more than the seed: {differing}")
    seeds = [doc["card"].get("seed") for doc in docs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"duplicate seeds among the score files: {seeds}")
    per_doc = [_metrics(doc) for doc in docs]
    names = [n for n in per_doc[0] if all(n in m for m in per_doc)]
    metrics = {}
    for name in names:
        values = [m[name] for m in per_doc]
        if any(v is None for v in values):
            metrics[name] = {"mean": None, "std": None, "min": None, "max": None, "per_seed": values}
            continue
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else None
        metrics[name] = {"mean": mean, "std": std, "min": min(values), "max": max(values), "per_seed": values}
    return {"card": {**reference, "seeds": seeds}, "seeds": seeds, "metrics": metrics}
