"""Across seeds: mean, std and the per-seed values of every summary score and category accuracy (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

STD_DEFINITION = "sample standard deviation (n-1) across seeds; 0.0 for a single seed"


def without_seed(card: Any) -> Any:
    """The card with every `seed` key removed, at any depth: what must agree across a seed set."""
    if isinstance(card, Mapping):
        return {k: without_seed(v) for k, v in card.items() if k not in ("seed", "inference_errors")}
    if isinstance(card, list):
        return [without_seed(v) for v in card]
    return card


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        raise ValueError("no values")
    mean = sum(values) / len(values)
    if len(values) == 1:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _metric(per_seed: list[float]) -> dict:
    mean, std = mean_std(per_seed)
    return {
        "mean": mean,
        "std": std,
        "min": min(per_seed),
        "max": max(per_seed),
        "peak_to_peak": max(per_seed) - min(per_seed),
        "per_seed": per_seed,
    }


def summarise_seeds(docs: Sequence[Mapping]) -> dict:
    """`docs`: score files of one (model, protocol), one per seed -> the `summary.json` contract.

    Every `summary` key (accuracies, `inference_errors`, `mean_input_tokens`) and every category accuracy
    becomes `metrics[name] = {"mean", "std", "min", "max", "peak_to_peak", "per_seed"}`.
    Raises ValueError when the files disagree on anything but the seed (protocol, model, data, prompt,
    categories, summary keys), repeat a seed, or cover different categories.
    """
    if not docs:
        raise ValueError("no score files to summarise")
    seeds = [int(d["card"]["seed"]) for d in docs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"repeated seeds {sorted(seeds)}")
    reference = without_seed(docs[0]["card"])
    for seed, d in zip(seeds, docs, strict=True):
        if without_seed(d["card"]) != reference:
            diff = sorted(
                k
                for k in set(reference) | set(d["card"])
                if reference.get(k) != without_seed(d["card"]).get(k)
            )
            raise ValueError(f"score file for seed {seed} differs from seed {seeds[0]} in card keys {diff}")
        if set(d["summary"]) != set(docs[0]["summary"]):
            raise ValueError(
                f"seed {seed} has summary keys {sorted(d['summary'])}, not {sorted(docs[0]['summary'])} "
                "(score files from different versions? rescore them)"
            )
        if set(d["categories"]) != set(docs[0]["categories"]):
            raise ValueError(
                f"seed {seed} covers categories {sorted(d['categories'])}, not {sorted(docs[0]['categories'])}"
            )
    order = sorted(range(len(docs)), key=seeds.__getitem__)
    seeds = [seeds[i] for i in order]
    docs = [docs[i] for i in order]

    metrics = {}
    for key in docs[0]["summary"]:
        values = [d["summary"][key] for d in docs]
        if any(v is None for v in values):
            if not all(v is None for v in values):
                raise ValueError(f"summary {key!r} is missing for some seeds only")
            continue  # not defined for the categories run (see coverage)
        metrics[key] = _metric([float(v) for v in values])
    for category in sorted(docs[0]["categories"]):
        metrics[f"category/{category}"] = _metric(
            [float(d["categories"][category]["accuracy"]) for d in docs]
        )

    card = dict(reference)
    card["seeds"] = seeds
    return {
        "card": card,
        "seeds": seeds,
        "metrics": metrics,
        "coverage": docs[0].get("coverage", {}),
        "std_definition": STD_DEFINITION,
    }
