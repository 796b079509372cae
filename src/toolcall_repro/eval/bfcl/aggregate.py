"""BFCL summary scores from per-category accuracies (pure; no bfcl-eval import).

The four BFCL aggregates follow `bfcl_eval.eval_checker.eval_runner_helper.generate_leaderboard_csv`
(checked against it in tests/eval/bfcl/test_aggregate.py). BFCL has no "single-turn" column; the paper
reports one, so both candidate formulas are kept side by side until one reproduces the paper's rows.

One deliberate difference: bfcl-eval counts a category that was not run as 0 inside an aggregate. We
average over the categories that were run and record which members are missing, so a subset run is
labelled partial instead of silently deflated.
"""

from __future__ import annotations

from collections.abc import Mapping

SIMPLE_AST = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_AST = ("multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
SINGLE_TURN = (*SIMPLE_AST, *NON_LIVE_AST, "irrelevance", *LIVE_AST, "live_irrelevance", "live_relevance")

FORMULAS = {
    "non_live": "mean(mean(simple_python, simple_java, simple_javascript), multiple, parallel, "
    "parallel_multiple)  [BFCL Non-Live AST overall]",
    "live": "count-weighted mean(live_simple, live_multiple, live_parallel, live_parallel_multiple)  "
    "[BFCL Live AST overall]",
    "irrelevance": "mean(irrelevance, live_irrelevance)  [BFCL Irrelevance]",
    "multi_turn": "mean(multi_turn_base, multi_turn_miss_func, multi_turn_miss_param, "
    "multi_turn_long_context)  [BFCL Multi Turn overall]",
    "single_turn_mean_nl_l": "mean(non_live, live)  [paper single-turn, candidate 1]",
    "single_turn_weighted": "sum(correct)/sum(total) over the 13 single-turn categories  "
    "[paper single-turn, candidate 2]",
    "avg": "mean(multi_turn, single_turn_mean_nl_l)  [paper avg with candidate 1]",
    "avg_weighted": "mean(multi_turn, single_turn_weighted)  [paper avg with candidate 2]",
    "mean_input_tokens": "mean over the entries of all categories run that have a result line without an "
    "inference error (missing results and inference errors are left out; both are counted elsewhere) of "
    "the prompt tokens of the entry's first model query (bfcl's input_token_count: the number itself "
    "for single-turn entries, [0][0] = first turn, first step for multi-turn entries), i.e. the rendered "
    "system prompt, tool docs and first user turn as the backend's tokenizer counts them; the same mean "
    "per category is in categories[c].mean_input_tokens",
}
SCALE = (
    "accuracies: fraction in [0, 1]; every mean is over the member categories that were run (see "
    "coverage); mean_input_tokens: tokens"
)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _accuracy(cats: Mapping[str, Mapping], name: str) -> float | None:
    return float(cats[name]["accuracy"]) if name in cats else None


def _weighted(cats: Mapping[str, Mapping], names: tuple[str, ...]) -> float | None:
    run = [cats[n] for n in names if n in cats]
    total = sum(int(c["total"]) for c in run)
    if total == 0:
        return None
    return sum(float(c["accuracy"]) * int(c["total"]) for c in run) / total


def summarise_categories(cats: Mapping[str, Mapping]) -> tuple[dict[str, float | None], dict[str, dict]]:
    """`cats`: {category: {"accuracy", "correct", "total"}} -> (summary, coverage per summary key)."""
    for name, c in cats.items():
        if not 0 <= int(c["correct"]) <= int(c["total"]):
            raise ValueError(f"{name}: correct={c['correct']} outside 0..total={c['total']}")
    simple = _mean([_accuracy(cats, n) for n in SIMPLE_AST])
    non_live = _mean([simple, *(_accuracy(cats, n) for n in NON_LIVE_AST)])
    live = _weighted(cats, LIVE_AST)
    single_run = [cats[n] for n in SINGLE_TURN if n in cats]
    single_total = sum(int(c["total"]) for c in single_run)
    summary = {
        "non_live": non_live,
        "live": live,
        "irrelevance": _mean([_accuracy(cats, n) for n in IRRELEVANCE]),
        "multi_turn": _mean([_accuracy(cats, n) for n in MULTI_TURN]),
        "single_turn_mean_nl_l": _mean([non_live, live]),
        "single_turn_weighted": (
            sum(int(c["correct"]) for c in single_run) / single_total if single_total else None
        ),
    }
    summary["avg"] = _mean([summary["multi_turn"], summary["single_turn_mean_nl_l"]])
    summary["avg_weighted"] = _mean([summary["multi_turn"], summary["single_turn_weighted"]])
    if summary["multi_turn"] is None or summary["single_turn_mean_nl_l"] is None:
        summary["avg"] = None  # an "avg" of one side alone would read as the paper's number
    if summary["multi_turn"] is None or summary["single_turn_weighted"] is None:
        summary["avg_weighted"] = None

    members = {
        "non_live": SIMPLE_AST + NON_LIVE_AST,
        "live": LIVE_AST,
        "irrelevance": IRRELEVANCE,
        "multi_turn": MULTI_TURN,
        "single_turn_mean_nl_l": SIMPLE_AST + NON_LIVE_AST + LIVE_AST,
        "single_turn_weighted": SINGLE_TURN,
        "avg": SIMPLE_AST + NON_LIVE_AST + LIVE_AST + MULTI_TURN,
        "avg_weighted": SINGLE_TURN + MULTI_TURN,
    }
    coverage = {
        key: {
            "run": [n for n in names if n in cats],
            "missing": [n for n in names if n not in cats],
            "complete": all(n in cats for n in names),
        }
        for key, names in members.items()
    }
    return summary, coverage
