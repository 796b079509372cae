"""Single-turn and multi-turn rewards, and the adapter verl's custom reward function expects.

Both rewards compare predicted and ground-truth calls as multisets of (name, canonical JSON arguments),
order-free, as Tool-N1 and LoopTool do. Every score comes with a reason so training logs can count failure
kinds:

=================  =================================================================================
``correct``        calls equal the ground truth (or both are "no call")
``format``         single-turn only: not ``<think>...</think>`` followed by ``<tool_call>`` blocks only
                   (or by a plain answer); see :func:`toolcall_repro.toolcall.check_xml_layout`
``parse``          a tool-call block could not be parsed (bad JSON, bad call shape, ...)
``unexpected_call`` the ground truth is "no call" but the output calls a tool
``missing_call``   the ground truth has calls but the output has none
``count``          both have calls, but a different number of them
``wrong_name``     same number of calls, the multisets of names differ
``wrong_args``     same names, some arguments differ
=================  =================================================================================
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolcall_repro.toolcall import (
    ToolCallParseError,
    canonical_calls,
    check_xml_layout,
    parse_tool_calls,
)

REASONS = (
    "correct",
    "format",
    "parse",
    "wrong_name",
    "wrong_args",
    "count",
    "unexpected_call",
    "missing_call",
)
SETTINGS = ("single_turn", "multi_turn")


@dataclass(frozen=True)
class Reward:
    """A reward score with the reason it was given (one of ``REASONS``)."""

    score: float
    reason: str

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"unknown reward reason {self.reason!r}")


def load_ground_truth(ground_truth: str | list) -> list[dict]:
    """Ground truth as a list of calls, from a JSON string or a list; bad ground truth raises ValueError."""
    if isinstance(ground_truth, str):
        try:
            ground_truth = json.loads(ground_truth)
        except json.JSONDecodeError as exc:
            raise ValueError(f"ground truth is not valid JSON: {exc}") from exc
    if not isinstance(ground_truth, list | tuple):
        raise ValueError(f"ground truth must be a list of calls, got {type(ground_truth).__name__}")
    calls = list(ground_truth)
    canonical_calls(calls)  # validates every call's shape and arguments
    return calls


def compare_calls(predicted: list[dict], ground_truth: list[dict]) -> Reward:
    """Score predicted calls against the ground truth (both already parsed)."""
    if not ground_truth:
        return Reward(1.0, "correct") if not predicted else Reward(0.0, "unexpected_call")
    if not predicted:
        return Reward(0.0, "missing_call")
    if len(predicted) != len(ground_truth):
        return Reward(0.0, "count")
    pred, gold = canonical_calls(predicted), canonical_calls(ground_truth)
    if pred == gold:
        return Reward(1.0, "correct")
    if Counter(name for name, _ in pred.elements()) != Counter(name for name, _ in gold.elements()):
        return Reward(0.0, "wrong_name")
    return Reward(0.0, "wrong_args")


def _parse_prediction(output: str, fmt: str) -> list[dict] | None:
    try:
        predicted = parse_tool_calls(output, fmt)
        canonical_calls(predicted)
    except ToolCallParseError:
        return None
    return predicted


def single_turn_reward(output: str, ground_truth: str | list) -> Reward:
    """1 when ``output`` has the ``<think>``/``<tool_call>`` layout and its calls equal the ground truth."""
    gold = load_ground_truth(ground_truth)
    if check_xml_layout(output) is not None:
        return Reward(0.0, "format")
    predicted = _parse_prediction(output, "xml_json")
    if predicted is None:
        return Reward(0.0, "parse")
    return compare_calls(predicted, gold)


def multi_turn_reward(output: str, ground_truth: str | list, fmt: str = "xml_json") -> Reward:
    """1 when the calls in ``output`` equal the ground truth; no format term ("no call" matches "no call")."""
    gold = load_ground_truth(ground_truth)
    predicted = _parse_prediction(output, fmt)
    if predicted is None:
        return Reward(0.0, "parse")
    return compare_calls(predicted, gold)


def reward_for_setting(setting: str) -> Callable[[str, str | list], Reward]:
    """The reward function of a training setting (``single_turn`` or ``multi_turn``)."""
    if setting == "single_turn":
        return single_turn_reward
    if setting == "multi_turn":
        return multi_turn_reward
    raise ValueError(f"unknown setting {setting!r}; expected one of {SETTINGS}")


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None
) -> dict:
    """verl's custom reward function: ``{"score": float, "reason": str}``.

    The setting comes from ``extra_info["setting"]`` when present, else from ``data_source`` (a source
    containing "multi_turn" is multi-turn, anything else single-turn).
    """
    setting = (extra_info or {}).get("setting")
    if setting is None:
        setting = "multi_turn" if "multi_turn" in str(data_source) else "single_turn"
    reward = reward_for_setting(setting)(solution_str, ground_truth)
    return {"score": reward.score, "reason": reward.reason}
