"""Seed summary of ACEBench score files: which numbers are metrics, which card fields may differ."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolcall_repro.eval.seeds import summarise_seeds as _summarise

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
    """The seed summary (`eval.seeds.summarise_seeds`) of ACEBench score files: upstream-checker metrics
    under their plain names, fixed-checker ones as `fixed/<name>`; a metric undefined for a seed is kept
    with None statistics. Only the seed (and the protocol's seed) may differ between the files.
    """
    return _summarise(docs, metrics_of=_metrics, shared_card=_shared_card, keep_undefined=True)
