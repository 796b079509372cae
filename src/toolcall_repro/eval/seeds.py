"""Across seeds: mean, std and the per-seed values of every metric of one (model, protocol) (pure).

The one seed summary of the package: BFCL, ACEBench and the held-out benchmark all write their
`summary.json` through :func:`summarise_seeds`; each benchmark says only which numbers of a score file are
its metrics (`metrics_of`) and which card fields may differ between seeds (`shared_card`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

STD_DEFINITION = "sample standard deviation (n-1) across seeds; null for a single seed (undefined)"


def without_seed(card: Any) -> Any:
    """The card with every `seed` key removed, at any depth: what must agree across a seed set."""
    if isinstance(card, Mapping):
        return {k: without_seed(v) for k, v in card.items() if k not in ("seed", "inference_errors")}
    if isinstance(card, list):
        return [without_seed(v) for v in card]
    return card


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample std (n-1); the std of one value is undefined: None."""
    if not values:
        raise ValueError("no values")
    mean = sum(values) / len(values)
    if len(values) == 1:
        return mean, None
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


def summary_and_categories(doc: Mapping) -> dict[str, float | None]:
    """BFCL's (and the held-out benchmark's) metrics: every `summary` key, then `category/<name>` accuracy."""
    out: dict[str, float | None] = dict(doc["summary"])
    for category in sorted(doc["categories"]):
        out[f"category/{category}"] = doc["categories"][category]["accuracy"]
    return out


def summarise_seeds(
    docs: Sequence[Mapping],
    *,
    metrics_of: Callable[[Mapping], Mapping[str, float | None]] = summary_and_categories,
    shared_card: Callable[[Any], Any] = without_seed,
    keep_undefined: bool = False,
) -> dict:
    """`docs`: score files of one (model, protocol), one per seed -> the `summary.json` contract.

    Every metric of `metrics_of(doc)` becomes `metrics[name] = {"mean", "std", "min", "max",
    "peak_to_peak", "per_seed"}` (seeds in ascending order; std None for one seed). A metric that is None
    for every seed is undefined for the categories run: left out, or with `keep_undefined` kept with None
    statistics (then also when only some seeds lack it); left out, a metric missing for some seeds only
    is an error. Raises ValueError when the files disagree on anything but the seed (`shared_card` of
    their cards, summary keys, categories), repeat a seed, or are none.
    """
    if not docs:
        raise ValueError("no score files to summarise")
    seeds = [int(d["card"]["seed"]) for d in docs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"repeated seeds among the score files: {sorted(seeds)}")
    reference = shared_card(docs[0]["card"])
    for seed, d in zip(seeds, docs, strict=True):
        card = shared_card(d["card"])
        if card != reference:
            diff = sorted(k for k in set(reference) | set(card) if reference.get(k) != card.get(k))
            raise ValueError(
                f"score files differ in more than the seed: seed {seed} vs seed {seeds[0]} in card keys {diff}"
            )
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
    per_doc = [metrics_of(docs[i]) for i in order]

    metrics = {}
    for name in per_doc[0]:
        values = [m.get(name) for m in per_doc]
        if any(v is None for v in values):
            if keep_undefined:
                metrics[name] = {k: None for k in ("mean", "std", "min", "max", "peak_to_peak")}
                metrics[name]["per_seed"] = values
                continue
            if not all(v is None for v in values):
                raise ValueError(f"summary {name!r} is missing for some seeds only")
            continue  # not defined for the categories run (see coverage)
        metrics[name] = _metric([float(v) for v in values])

    return {
        "card": {**reference, "seeds": seeds},
        "seeds": seeds,
        "metrics": metrics,
        "coverage": docs[0].get("coverage", {}),
        "std_definition": STD_DEFINITION,
    }
