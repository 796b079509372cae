"""Scoring on the real English data: the ground truth scores 100%, and each kind of mistake costs."""

import copy

import pytest

from toolcall_repro.eval.acebench.checker import base_name, standardise
from toolcall_repro.eval.acebench.data import CATEGORIES, GROUPS, load_category
from toolcall_repro.eval.acebench.scoring import (
    GROUP_WEIGHTS,
    CategoryScore,
    ground_truth_outputs,
    score_category,
    summarise,
)
from toolcall_repro.toolcall import format_tool_calls

TEXT_CATEGORIES = [c for c in CATEGORIES if not c.startswith("agent")]
NORMAL_SINGLE = [c for c in GROUPS["normal"] if not c.startswith("normal_multi_turn")]


@pytest.fixture(scope="module")
def entries(data_dir):
    return {c: load_category(data_dir, c) for c in CATEGORIES}


@pytest.mark.parametrize("fmt", ["python", "xml_json"])
def test_ground_truth_scores_100_percent_in_all_17_categories(entries, fmt):
    scores = {}
    for category in CATEGORIES:
        outputs = ground_truth_outputs(category, entries[category], fmt=fmt)
        scores[category] = score_category(category, entries[category], outputs, fmt=fmt)
        failures = [r for r in scores[category].entries if not r["valid"]]
        assert scores[category].accuracy == 1.0, (category, failures[:3])
        assert scores[category].total > 0
    summary = summarise(scores)
    assert summary["normal"] == summary["special"] == summary["agent"] == 1.0
    assert summary["agent_process"] == 1.0
    assert summary["overall"] == pytest.approx(sum(GROUP_WEIGHTS.values()))


def test_upstream_checker_fails_part_of_the_ground_truth(entries):
    category = "normal_atom_object_deep"
    outputs = ground_truth_outputs(category, entries[category])
    fixed = score_category(category, entries[category], outputs)
    upstream = score_category(category, entries[category], outputs, upstream=True)
    assert fixed.accuracy == 1.0 and upstream.accuracy < 1.0


def test_think_block_is_allowed_before_the_answer(entries):
    category = "special_incomplete"
    outputs = [
        "<think>\nthe user omitted a value\n</think>\n\n" + o
        for o in ground_truth_outputs(category, entries[category])
    ]
    assert score_category(category, entries[category], outputs).accuracy == 1.0
    # An unclosed think block (truncated output) is a counted parse failure, not a crash.
    broken = ["<think>" + outputs[0], *outputs[1:]]
    score = score_category(category, entries[category], broken)
    assert score.correct == score.total - 1 and score.entries[0]["error"].startswith("[parse]")


def _truth_calls(entry):
    truth = entry["ground_truth"][0] if isinstance(entry["ground_truth"], list) else entry["ground_truth"]
    return [{"name": base_name(k), "arguments": copy.deepcopy(v)} for k, v in truth.items()]


def _schema(entry, name):
    return next(f for f in entry["function"] if f["name"] == name)["parameters"]


def _wrong_string(entry, calls):
    for c in calls:
        props = _schema(entry, c["name"]).get("properties", {})
        for k, v in c["arguments"].items():
            if props.get(k, {}).get("type") == "string" and isinstance(v, str) and standardise(v):
                c["arguments"][k] = "zzqx"
                return calls
    return None


def _drop_required(entry, calls):
    for c in calls:
        required = _schema(entry, c["name"]).get("required", [])
        present = [k for k in required if k in c["arguments"]]
        if present:
            del c["arguments"][present[0]]
            return calls
    return None


def _rename(entry, calls):
    calls[0]["name"] = "no_such_function"
    return calls


def _extra_call(entry, calls):
    return [*calls, copy.deepcopy(calls[0])]


def _drop_call(entry, calls):
    return calls[1:] if len(calls) > 1 else None


def _extra_argument(entry, calls):
    calls[0]["arguments"]["unexpected_argument"] = "x"
    return calls


@pytest.mark.parametrize(
    "perturb", [_wrong_string, _drop_required, _rename, _extra_call, _drop_call, _extra_argument]
)
def test_each_mistake_fails_exactly_the_entries_it_touches(entries, perturb):
    touched_total = 0
    for category in NORMAL_SINGLE:
        rows = entries[category]
        outputs, touched = list(ground_truth_outputs(category, rows)), set()
        for i, entry in enumerate(rows):
            if isinstance(entry["ground_truth"], list) and len(entry["ground_truth"]) > 1:
                continue  # another alternative could still match
            names = [c["name"] for c in _truth_calls(entry)]
            if len(set(names)) < len(names):
                continue  # upstream lets any same-named call answer a ground-truth call: a twin may cover it
            changed = perturb(entry, _truth_calls(entry))
            if changed is not None:
                outputs[i] = format_tool_calls(changed, "python")
                touched.add(entry["id"])
        score = score_category(category, rows, outputs)
        assert {r["id"] for r in score.entries if not r["valid"]} == touched, category
        assert score.correct == len(rows) - len(touched)
        touched_total += len(touched)
    assert touched_total >= 20


def test_wrong_numbers_pass_because_acebench_does_not_compare_them(entries):
    category, rows = "normal_atom_number", entries["normal_atom_number"]
    outputs = []
    for entry in rows:
        calls = _truth_calls(entry)
        for c in calls:
            for k, v in c["arguments"].items():
                if type(v) is int:
                    c["arguments"][k] = v + 7
        outputs.append(format_tool_calls(calls, "python"))
    assert score_category(category, rows, outputs).accuracy == 1.0


def test_normal_multi_turn_scores_whole_conversations(entries):
    category, rows = "normal_multi_turn_user_switch", entries["normal_multi_turn_user_switch"]
    outputs = ground_truth_outputs(category, rows)
    conversations = {r["id"].rsplit("_", 2)[1] for r in rows}
    first_turn_of_0 = next(i for i, r in enumerate(rows) if r["id"].rsplit("_", 2)[1] == "0")
    turns_of_0 = sum(r["id"].rsplit("_", 2)[1] == "0" for r in rows)
    outputs[first_turn_of_0] = "[]"
    score = score_category(category, rows, outputs)
    assert score.total == len(conversations) and score.correct == len(conversations) - 1
    assert score.accuracy == pytest.approx((len(conversations) - 1) / len(conversations))
    expected_process = (len(conversations) - 1 + (turns_of_0 - 1) / turns_of_0) / len(conversations)
    assert score.process_accuracy == pytest.approx(expected_process)
    assert sum(not r["valid"] for r in score.entries) == 1


@pytest.mark.parametrize(
    ("category", "mutate"),
    [
        ("special_incomplete", lambda t: t.replace("Missing necessary parameters", "Please provide")),
        ("special_incomplete", lambda t: t.split(" for the api")[0]),
        ("special_error_param", lambda t: t.replace("There is incorrect value", "Wrong value")),
        ("special_irrelevant", lambda t: "I cannot help."),
    ],
)
def test_special_answers_without_the_phrase_or_the_names_fail(entries, category, mutate):
    rows = entries[category]
    outputs = [mutate(o) for o in ground_truth_outputs(category, rows)]
    assert score_category(category, rows, outputs).accuracy == 0.0


def test_a_tool_call_in_a_special_category_fails(entries):
    rows = entries["special_irrelevant"]
    outputs = ["[get_weather(city='Paris')]"] * len(rows)
    assert score_category("special_irrelevant", rows, outputs).accuracy == 0.0


def test_agent_state_changes_fail_and_process_counts_milestones(entries):
    category, rows = "agent_multi_turn", entries["agent_multi_turn"]
    outputs = ground_truth_outputs(category, rows)
    travel = next(i for i, r in enumerate(rows) if r["involved_classes"] == ["Travel"])
    state = copy.deepcopy(outputs[travel]["state"])
    state[0]["Travel"]["users"]["user1"]["cash_balance"] += 1
    milestones = outputs[travel]["process"]
    outputs[travel] = {"state": state, "process": milestones[:1]}
    outputs[0] = {"state": outputs[0]["state"][:1], "process": []}  # a class missing
    outputs[1] = "not an agent outcome"
    score = score_category(category, rows, outputs)
    errors = {r["id"]: r["error"] for r in score.entries if not r["valid"]}
    assert set(errors) == {rows[travel]["id"], rows[0]["id"], rows[1]["id"]}
    assert errors[rows[0]["id"]].startswith("[wrong_class_count]")
    assert errors[rows[1]["id"]].startswith("[malformed_output]")
    n = len(rows)
    expected = (n - 3 + 1 / len(milestones)) / n
    assert score.process_accuracy == pytest.approx(expected)


def test_extra_dict_entries_in_the_agent_state_pass_as_upstream(entries):
    rows = entries["agent_multi_turn"][:1]
    outputs = ground_truth_outputs("agent_multi_turn", rows)
    inbox = next(s["MessageApi"]["inbox"] for s in outputs[0]["state"] if "MessageApi" in s)
    inbox["99"] = {"sender_id": "USR100", "receiver_id": "USR101", "message": "extra"}
    assert score_category("agent_multi_turn", rows, outputs).accuracy == 1.0


def test_summarise_weights_groups_and_averages_within_them():
    scores = {
        "normal_atom_bool": CategoryScore(0.5, 1, 2),
        "normal_atom_enum": CategoryScore(1.0, 2, 2),
        "special_irrelevant": CategoryScore(0.25, 1, 4),
        "agent_multi_step": CategoryScore(0.0, 0, 2, process_accuracy=0.5),
        "agent_multi_turn": {"accuracy": 1.0, "process_accuracy": 1.0},
    }
    summary = summarise(scores)
    assert summary["normal"] == 0.75 and summary["special"] == 0.25 and summary["agent"] == 0.5
    assert summary["overall"] == pytest.approx(0.578 * 0.75 + 0.2676 * 0.25 + 0.1545 * 0.5)
    assert summary["agent_process"] == 0.75
    assert "0.2676" in summary["formula"]


def test_misaligned_outputs_are_rejected(entries):
    with pytest.raises(ValueError, match="entries but"):
        score_category("normal_atom_bool", entries["normal_atom_bool"], ["[]"])
    with pytest.raises(ValueError, match="unknown ACEBench category"):
        summarise({"normal_atom_float": CategoryScore(1.0, 1, 1)})
