"""Score one generated result folder into the score-file contract (see docs/architecture.md)."""

from __future__ import annotations

import json
from pathlib import Path

from toolcall_repro.eval.bfcl.aggregate import summarise_categories
from toolcall_repro.eval.bfcl.generate import CARD_FILE, EXPECTED_IDS_FILE
from toolcall_repro.eval.bfcl.handler import build_handler, register
from toolcall_repro.eval.bfcl.score import ResultFileError, mean_input_tokens, read_results, score_category
from toolcall_repro.protocol import Protocol


def score_run(result_dir: str | Path, protocol: Protocol | None = None) -> dict:
    """{"card", "categories", "summary", "coverage"} for a folder written by `generate`.

    `protocol`, when given, must be the one the results were generated under (else ValueError).
    """
    result_dir = Path(result_dir)
    card_path, ids_path = result_dir / CARD_FILE, result_dir / EXPECTED_IDS_FILE
    if not card_path.is_file() or not ids_path.is_file():
        raise ResultFileError(
            f"{result_dir} lacks {CARD_FILE}/{EXPECTED_IDS_FILE}: not written by `generate`"
        )
    card = json.loads(card_path.read_text())
    expected = json.loads(ids_path.read_text())
    if protocol is not None and card["protocol"] != protocol.to_dict():
        raise ValueError(
            f"results in {result_dir} were generated under protocol {card['protocol']}, not {protocol.to_dict()}"
        )
    registry_name = card["model"]["bfcl_registry_name"]
    register(registry_name, model_name=card["model"]["dir"])
    handler = build_handler(registry_name).bind(output_format=card["system_prompt"]["output_format"])
    results = read_results(result_dir / handler.registry_dir_name)
    foreign = sorted(set(results) - set(expected))
    if foreign:
        raise ResultFileError(f"{result_dir}: result files for categories never generated: {foreign}")

    categories = {
        category: score_category(handler, category, results.get(category, []), expected_ids=ids)
        for category, ids in expected.items()
    }
    for category, scored in categories.items():
        scored["mean_input_tokens"] = mean_input_tokens(results.get(category, []))
    summary, coverage = summarise_categories(categories)
    summary["inference_errors"] = sum(len(c["inference_errors"]) for c in categories.values())
    summary["mean_input_tokens"] = mean_input_tokens(line for c in expected for line in results.get(c, []))
    return {"card": card, "categories": categories, "summary": summary, "coverage": coverage}
