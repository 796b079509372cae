"""ACEBench scores: per category, per group, overall (upstream `eval_main.py` + `evaluation_helper.py`).

- normal single-turn categories: accuracy = share of entries whose calls pass the checker;
- normal multi-turn categories (one entry per dialogue turn, id `..._<conversation>_<turn>`): a
  conversation counts only if all its turns pass (end accuracy); process accuracy = mean share of passing
  turns per conversation;
- special categories: the answer text must carry the fixed phrase and name every item in the answer;
- agent categories: final-state comparison (end-to-end) and milestone process accuracy;
- groups are unweighted means of their categories; overall = 0.2676 special + 0.578 normal + 0.1545 agent
  (upstream's weights; they sum to 1.0001, so a perfect run scores 1.0001 overall).
Upstream rounds to 3 decimals along the way; we keep full precision (a difference below 0.0005).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from toolcall_repro.eval.acebench.agent.state import (
    check_final_state,
    process_fraction,
    validate_agent_output,
)
from toolcall_repro.eval.acebench.checker import Verdict, base_name, check_normal, check_special
from toolcall_repro.eval.acebench.data import GROUPS, group_of, is_normal_multi_turn
from toolcall_repro.toolcall import ToolCallParseError, format_tool_calls, parse_tool_calls, split_think

GROUP_WEIGHTS = {"special": 0.2676, "normal": 0.578, "agent": 0.1545}
FORMULA = (
    "overall = 0.2676*special + 0.578*normal + 0.1545*agent; each group = unweighted mean of its categories "
    "(normal 12, special 3, agent 2); normal_multi_turn = share of conversations with every turn correct; "
    "agent = end-to-end final-state accuracy (agent_process = mean milestone process accuracy)"
)
IRRELEVANT_ANSWER = "Due to the limitations of the function, I cannot solve this problem."

Parser = Callable[[str], list[dict]]


@dataclass
class CategoryScore:
    """accuracy = correct / total; for normal multi-turn categories these count conversations (entries are
    still one row per turn), and process_accuracy is set for those and for agent categories."""

    accuracy: float
    correct: int
    total: int
    entries: list[dict] = field(default_factory=list)
    process_accuracy: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def answer_text(output: str) -> str:
    """The answer after an optional leading `<think>` block (raises ToolCallParseError if it is malformed)."""
    return split_think(output)[1].strip()


def _judge_text(category: str, entry: Mapping, output: object, parse: Parser, upstream: bool) -> Verdict:
    if not isinstance(output, str):
        return Verdict.fail("malformed_output", f"expected model text, got {type(output).__name__}")
    try:
        if group_of(category) == "special":
            return check_special(category, answer_text(output), entry["ground_truth"])
        calls = parse(output)
    except ToolCallParseError as exc:
        return Verdict.fail("parse", str(exc))
    return check_normal(entry["function"], calls, entry["ground_truth"], upstream)


def _conversation_of(entry_id: str) -> str:
    parts = entry_id.rsplit("_", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"normal multi-turn id {entry_id!r} does not end in _<conversation>_<turn>")
    return parts[1]


def _row(entry: Mapping, verdict: Verdict) -> dict:
    return {"id": entry["id"], "valid": verdict.valid, "error": verdict.error}


def score_category(
    category: str,
    entries: Sequence[Mapping],
    outputs: Sequence[object],
    fmt: str = "python",
    upstream: bool = False,
) -> CategoryScore:
    """Score one category. `outputs[i]` answers `entries[i]` (entries carry `ground_truth`).

    Text categories take the raw model text (a leading `<think>` block is allowed); agent categories take
    `{"state": final state, "process": [execution messages]}` as produced by agent/episode.py.
    `fmt` is the tool-call format the model was asked for (`python` is ACEBench's own).
    `upstream=True` keeps three upstream checker defects that fail correct answers (see checker.py).
    """
    group = group_of(category)
    if len(entries) != len(outputs):
        raise ValueError(f"{category}: {len(entries)} entries but {len(outputs)} outputs")
    if not entries:
        raise ValueError(f"{category}: nothing to score")
    if group == "agent":
        return _score_agent(entries, outputs)

    def parse(text: str) -> list[dict]:
        return parse_tool_calls(text, fmt)

    rows = [
        _row(e, _judge_text(category, e, o, parse, upstream)) for e, o in zip(entries, outputs, strict=True)
    ]
    if not is_normal_multi_turn(category):
        correct = sum(r["valid"] for r in rows)
        return CategoryScore(correct / len(rows), correct, len(rows), rows)
    # Upstream groups consecutive turns of one conversation.
    conversations = [
        [r["valid"] for r in turns]
        for _, turns in itertools.groupby(rows, key=lambda r: _conversation_of(r["id"]))
    ]
    correct = sum(all(c) for c in conversations)
    process = sum(sum(c) / len(c) for c in conversations) / len(conversations)
    return CategoryScore(correct / len(conversations), correct, len(conversations), rows, process)


def _score_agent(entries: Sequence[Mapping], outputs: Sequence[object]) -> CategoryScore:
    rows, process_scores = [], []
    for entry, output in zip(entries, outputs, strict=True):
        verdict = validate_agent_output(output)
        if verdict.valid:
            verdict = check_final_state(output["state"], entry["ground_truth"])
        rows.append(_row(entry, verdict))
        if verdict.valid:
            process_scores.append(1.0)
        elif isinstance(output, Mapping) and isinstance(output.get("process"), list):
            process = [p for p in output["process"] if isinstance(p, str)]
            process_scores.append(process_fraction(process, entry.get("mile_stone", [])))
        else:
            process_scores.append(0.0)
    correct = sum(r["valid"] for r in rows)
    return CategoryScore(
        correct / len(rows), correct, len(rows), rows, sum(process_scores) / len(process_scores)
    )


def summarise(category_scores: Mapping[str, CategoryScore | Mapping]) -> dict:
    """Group means and ACEBench's overall. A group with no scored category counts as 0, as upstream does."""

    def accuracy(score: CategoryScore | Mapping) -> float:
        return score.accuracy if isinstance(score, CategoryScore) else float(score["accuracy"])

    for category in category_scores:
        group_of(category)
    summary: dict[str, object] = {}
    for group, members in GROUPS.items():
        scored = [accuracy(category_scores[c]) for c in members if c in category_scores]
        summary[group] = sum(scored) / len(scored) if scored else 0.0
    summary["overall"] = sum(GROUP_WEIGHTS[g] * summary[g] for g in GROUP_WEIGHTS)
    agent = [category_scores[c] for c in GROUPS["agent"] if c in category_scores]
    process = [
        s.process_accuracy if isinstance(s, CategoryScore) else s.get("process_accuracy") for s in agent
    ]
    summary["agent_process"] = sum(process) / len(process) if process and None not in process else None
    summary["categories_scored"] = [c for c in category_scores]
    summary["formula"] = FORMULA
    return summary


def _special_text(category: str, truth: Mapping | str) -> str:
    if category == "special_irrelevant":
        return f'["{IRRELEVANT_ANSWER}"]'
    if category == "special_incomplete":
        parts = [
            f"Missing necessary parameters ({','.join(values)}) for the api ({name})"
            for name, values in truth.items()
        ]
    else:
        parts = [
            f"There is incorrect value ({','.join(values)}) for the parameters ({param}) in the conversation history."
            for param, values in truth.items()
        ]
    return "[" + ", ".join(f'"{p}"' for p in parts) + "]"


def ground_truth_outputs(
    category: str, entries: Sequence[Mapping], answers: Sequence[Mapping] | None = None, fmt: str = "python"
) -> list[object]:
    """What a perfect model would output: call text in `fmt`, the special phrases, or the agent's end state.

    `answers` are possible_answer rows (default: the `ground_truth`/`mile_stone` the entries carry). Where
    the ground truth lists alternatives, the first is written.
    """
    answers = entries if answers is None else answers
    if len(answers) != len(entries):
        raise ValueError(f"{category}: {len(entries)} entries but {len(answers)} answers")
    group = group_of(category)
    outputs: list[object] = []
    for entry, answer in zip(entries, answers, strict=True):
        if answer.get("id", entry["id"]) != entry["id"]:
            raise ValueError(f"{category}: answer {answer.get('id')} does not belong to entry {entry['id']}")
        truth = answer["ground_truth"]
        if group == "agent":
            milestones = answer.get("mile_stone", [])
            first = (
                milestones[0] if milestones and all(isinstance(m, list) for m in milestones) else milestones
            )
            outputs.append({"state": truth if isinstance(truth, list) else [truth], "process": list(first)})
        elif group == "special":
            outputs.append(_special_text(category, truth))
        else:
            chosen = truth[0] if isinstance(truth, list) else truth
            calls = [{"name": base_name(name), "arguments": args} for name, args in chosen.items()]
            outputs.append(format_tool_calls(calls, fmt))
    return outputs
