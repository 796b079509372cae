import json

import pytest

from toolcall_repro.rewards import (
    REASONS,
    Reward,
    compare_calls,
    compute_score,
    load_ground_truth,
    multi_turn_reward,
    reward_for_setting,
    single_turn_reward,
)

F = {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}
G = {"name": "get_time", "arguments": {"tz": "CET"}}


def xml(*bodies: str, think: str | None = "reasoning") -> str:
    blocks = "\n".join(f"<tool_call>\n{b}\n</tool_call>" for b in bodies)
    return (f"<think>{think}</think>\n" if think is not None else "") + blocks


FJ = json.dumps(F)
GJ = json.dumps(G)

# (output, ground truth, expected reason) for the single-turn reward: one row per failure kind
SINGLE_TURN_TABLE = [
    (xml(FJ), [F], "correct"),
    (xml('{"name": "get_weather", "arguments": {"days": 2.0, "city": "Paris"}}'), [F], "correct"),
    (xml(GJ, FJ), [F, G], "correct"),
    (xml(f"[{FJ}, {GJ}]"), [F, G], "correct"),
    ("<think>no tool fits</think>\nI cannot do that.", [], "correct"),
    (xml(FJ, think=None), [F], "format"),
    ("Sure! " + xml(FJ), [F], "format"),
    (xml(FJ) + "\nDone.", [F], "format"),
    ("<think>cut off", [F], "format"),
    (xml(FJ)[:-5], [F], "format"),
    (xml('{"name": "get_weather", "arguments": {"city": "Par'), [F], "parse"),
    (xml('{"name": "get_weather"}'), [F], "parse"),
    (xml('{"name": "get_weather", "arguments": {"city": NaN}}'), [F], "parse"),
    (xml(GJ), [F], "wrong_name"),
    (xml(FJ, FJ), [F, G], "wrong_name"),
    (xml('{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}'), [F], "wrong_args"),
    (xml('{"name": "get_weather", "arguments": {"city": "Paris"}}'), [F], "wrong_args"),
    (xml('{"name": "get_weather", "arguments": {"city": "Paris", "days": "2"}}'), [F], "wrong_args"),
    (xml('{"name": "get_weather", "arguments": {"city": "Paris", "days": true}}'), [F], "wrong_args"),
    (xml(FJ, FJ), [F], "count"),
    (xml(FJ), [F, G], "count"),
    (xml(FJ), [], "unexpected_call"),
    ("<think>I think I am done</think>\nHere is the weather.", [F], "missing_call"),
]


@pytest.mark.parametrize(("output", "ground_truth", "reason"), SINGLE_TURN_TABLE)
def test_single_turn_reward_table(output, ground_truth, reason):
    for gt in (ground_truth, json.dumps(ground_truth)):
        reward = single_turn_reward(output, gt)
        assert reward == Reward(1.0 if reason == "correct" else 0.0, reason)


def test_single_turn_table_covers_every_reason():
    assert {reason for *_, reason in SINGLE_TURN_TABLE} == set(REASONS)


MULTI_TURN_TABLE = [
    (xml(FJ), [F], "correct"),
    (xml(FJ, think=None), [F], "correct"),
    ("Let me look that up. " + xml(FJ, think=None), [F], "correct"),
    ("The weather in Paris is sunny.", [], "correct"),
    ("<think>done</think>Summary: all tasks complete.", [], "correct"),
    (xml(FJ), [], "unexpected_call"),
    ("The weather is sunny.", [F], "missing_call"),
    ("<think>never closed", [F], "parse"),
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}', [F], "parse"),
    (xml(GJ), [F], "wrong_name"),
    (xml('{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'), [F], "wrong_args"),
    (xml(FJ, GJ), [F], "count"),
]


@pytest.mark.parametrize(("output", "ground_truth", "reason"), MULTI_TURN_TABLE)
def test_multi_turn_reward_table(output, ground_truth, reason):
    reward = multi_turn_reward(output, json.dumps(ground_truth))
    assert reward == Reward(1.0 if reason == "correct" else 0.0, reason)


def test_multi_turn_python_format():
    gt = [F]
    assert multi_turn_reward("[get_weather(city='Paris', days=2)]", gt, fmt="python").reason == "correct"
    assert multi_turn_reward("[get_weather(city='Paris', days=x)]", gt, fmt="python").reason == "parse"
    assert multi_turn_reward("No call needed.", [], fmt="python").reason == "correct"


def test_compare_calls_is_order_free_multiset():
    assert compare_calls([G, F], [F, G]).reason == "correct"
    assert compare_calls([F, F], [F, F]).reason == "correct"
    assert compare_calls([F, G], [F, F]).reason == "wrong_name"


@pytest.mark.parametrize(
    "bad", ["not json", '{"name": "f"}', "[1]", [{"name": "f"}], [{"name": "f", "arguments": [1]}], 5]
)
def test_bad_ground_truth_is_a_clear_error(bad):
    with pytest.raises(ValueError):
        load_ground_truth(bad)
    with pytest.raises(ValueError):
        single_turn_reward(xml(FJ), bad)


def test_reward_rejects_unknown_reason():
    with pytest.raises(ValueError):
        Reward(0.0, "bad_luck")


def test_reward_for_setting():
    assert reward_for_setting("single_turn") is single_turn_reward
    assert reward_for_setting("multi_turn") is multi_turn_reward
    with pytest.raises(ValueError, match="unknown setting"):
        reward_for_setting("three_turn")


def test_compute_score_routes_on_setting_and_data_source():
    no_think = xml(FJ, think=None)  # correct for multi-turn, a format failure for single-turn
    gt = json.dumps([F])
    assert compute_score("looptool", no_think, gt, {"setting": "multi_turn"}) == {
        "score": 1.0,
        "reason": "correct",
    }
    assert compute_score("looptool", no_think, gt, {"setting": "single_turn"}) == {
        "score": 0.0,
        "reason": "format",
    }
    assert compute_score("toolcall/multi_turn", no_think, gt) == {"score": 1.0, "reason": "correct"}
    assert compute_score("xlam", no_think, gt, {"index": 3}) == {"score": 0.0, "reason": "format"}
    assert compute_score("xlam", xml(FJ), [F])["score"] == 1.0
