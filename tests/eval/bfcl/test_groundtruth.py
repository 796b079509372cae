"""Ground truth written as model output scores 100% with our harness (dataset quirks named)."""

import pytest

from toolcall_repro.eval.bfcl import groundtruth
from toolcall_repro.eval.bfcl.handler import build_handler, register
from toolcall_repro.eval.bfcl.score import load_category, score_category

# Entries whose ground truth no output can satisfy (checked over the full sets by benchmarks/bfcl_agreement.py).
KNOWN_QUIRKS = {
    "live_simple_106-63-0": "a required argument with an empty option list",
    "live_simple_112-68-0": "a required argument with an empty option list",
    "live_multiple_507-149-4": "a required argument whose only option is 'omit'",
    "live_multiple_862-181-3": "an argument the function schema does not declare",
    "live_multiple_964-207-0": "an argument the function schema does not declare",
}


@pytest.fixture(scope="module")
def handler():
    register("toolcallrepro-gttest", "test/gt")
    return build_handler("toolcallrepro-gttest")


def _gt_results(category, fmt, limit):
    prompts, truths = load_category(category)
    rows = []
    for i, prompt in enumerate(prompts[:limit]):
        truth = None if truths is None else truths[i]
        rows.append(
            {"id": prompt["id"], "result": groundtruth.ground_truth_output(category, prompt, truth, fmt)}
        )
    return rows


@pytest.mark.parametrize("fmt", ["python", "xml_json"])
@pytest.mark.parametrize(
    ("category", "limit"),
    [
        ("simple_python", 60),
        ("multiple", 40),
        ("parallel", 40),
        ("parallel_multiple", 40),
        ("irrelevance", 20),
        ("live_simple", 60),
        ("live_relevance", 16),
        ("multi_turn_base", 6),
        ("multi_turn_miss_func", 4),
        ("multi_turn_miss_param", 4),
    ],
)
def test_ground_truth_scores_full_marks(handler, category, limit, fmt):
    handler.bind(output_format=fmt)
    scored = score_category(handler, category, _gt_results(category, fmt, limit))
    failed = [(e["id"], e["error"]) for e in scored["entries"] if not e["valid"]]
    assert failed == []
    assert scored["correct"] == scored["total"] == limit


def test_known_quirks_are_reported_not_silently_written():
    prompts, truths = load_category("live_simple")
    by_id = {p["id"]: (p, truths[i]) for i, p in enumerate(prompts)}
    for entry_id in ("live_simple_106-63-0", "live_simple_112-68-0"):
        prompt, truth = by_id[entry_id]
        with pytest.raises(groundtruth.GroundTruthQuirk):
            groundtruth.ground_truth_output("live_simple", prompt, truth, "python")


def test_optional_arguments_marked_omittable_are_left_out_required_ones_kept():
    functions = [
        {"name": "f", "parameters": {"required": ["a", "b"], "properties": {"a": {}, "b": {}, "c": {}}}}
    ]
    truth = [{"f": {"a": [1], "b": ["", 25.0], "c": ["", "x"]}}]
    assert groundtruth.ast_calls(truth, functions) == [{"name": "f", "arguments": {"a": 1, "b": 25.0}}]


def test_nested_option_dicts_take_one_level_of_options():
    functions = [{"name": "g", "parameters": {"required": ["d", "l"], "properties": {"d": {}, "l": {}}}}]
    truth = [{"g": {"d": [{"k": ["v", "w"], "opt": [""]}], "l": [[{"x": [1]}, {"x": [2]}]]}}]
    assert groundtruth.ast_calls(truth, functions) == [
        {"name": "g", "arguments": {"d": {"k": "v"}, "l": [{"x": 1}, {"x": 2}]}}
    ]


def test_positional_ground_truth_arguments_are_named_from_the_backend_signature():
    prompts, truths = load_category("multi_turn_base")
    sigs = groundtruth._method_signatures(["GorillaFileSystem", "MathAPI"])
    calls = groundtruth.multi_turn_calls(["cd('archives')", "mean([37])", "sort(file_name='a.txt')"], sigs)
    assert calls == [
        {"name": "cd", "arguments": {"folder": "archives"}},
        {"name": "mean", "arguments": {"numbers": [37]}},
        {"name": "sort", "arguments": {"file_name": "a.txt"}},
    ]


def test_java_and_javascript_are_not_converted():
    prompts, truths = load_category("simple_java")
    with pytest.raises(groundtruth.UnsupportedCategory):
        groundtruth.ground_truth_output("simple_java", prompts[0], truths[0], "python")
