"""Scoring result files: bad input is an error or a counted failure, never dropped."""

import json

import pytest

from toolcall_repro.eval.bfcl.handler import build_handler, register
from toolcall_repro.eval.bfcl.score import (
    ResultFileError,
    check_categories,
    first_query_input_tokens,
    mean_input_tokens,
    read_result_file,
    read_results,
    score_category,
)


@pytest.fixture(scope="module")
def handler():
    register("toolcallrepro-scoretest", "test/score")
    return build_handler("toolcallrepro-scoretest").bind(output_format="python")


GOOD = "[calculate_triangle_area(base=10, height=5)]"


def test_missing_results_count_as_failures(handler):
    rows = [{"id": "simple_python_0", "result": GOOD}]
    scored = score_category(
        handler, "simple_python", rows, expected_ids=["simple_python_0", "simple_python_1"]
    )
    assert (scored["correct"], scored["total"]) == (1, 2)
    assert scored["missing"] == ["simple_python_1"]
    assert scored["entries"][1] == {
        "id": "simple_python_1",
        "valid": False,
        "error_type": "missing_result",
        "error": "no result line",
    }


def test_inference_errors_are_counted(handler):
    rows = [
        {"id": "irrelevance_0", "result": "Error during inference: out of memory"},
        {"id": "irrelevance_1", "result": "I cannot answer that with these tools."},
    ]
    scored = score_category(handler, "irrelevance", rows)
    assert scored["inference_errors"] == ["irrelevance_0"]
    # bfcl's own verdict is kept (no call == correct abstention), the failure is visible in the count
    assert scored["correct"] == 2


def test_foreign_duplicate_and_unexpected_ids_are_errors(handler):
    with pytest.raises(ResultFileError, match="not in BFCL"):
        score_category(handler, "simple_python", [{"id": "simple_python_9999", "result": GOOD}])
    with pytest.raises(ResultFileError, match="duplicate"):
        score_category(handler, "simple_python", [{"id": "simple_python_0", "result": GOOD}] * 2)
    with pytest.raises(ResultFileError, match="not generated"):
        score_category(
            handler,
            "simple_python",
            [{"id": "simple_python_3", "result": GOOD}],
            expected_ids=["simple_python_0"],
        )
    with pytest.raises(ResultFileError, match="nothing to score"):
        score_category(handler, "simple_python", [])


def test_error_fields_name_the_checker_failure(handler):
    rows = [
        {"id": "simple_python_0", "result": "[calculate_triangle_area(base=11, height=5)]"},
        {"id": "simple_python_1", "result": "[f(a="},
    ]
    entries = score_category(handler, "simple_python", rows)["entries"]
    assert entries[0]["error_type"] == "value_error:others"
    assert "base" in entries[0]["error"]
    assert entries[1]["error_type"] == "ast_decoder:decoder_failed"


def test_excluded_and_unknown_categories_are_refused():
    with pytest.raises(ValueError, match="network"):
        check_categories(["web_search_base"])
    with pytest.raises(ValueError, match="hub"):
        check_categories(["memory_vector"])
    with pytest.raises(ValueError, match="unknown"):
        check_categories(["simple"])
    with pytest.raises(ValueError, match="duplicate"):
        check_categories(["multiple", "multiple"])


def test_result_files_are_read_strictly(tmp_path):
    d = tmp_path / "m" / "non_live"
    d.mkdir(parents=True)
    f = d / "BFCL_v4_multiple_result.json"
    f.write_text(json.dumps({"id": "multiple_0", "result": "[]"}) + "\n\n")
    assert read_result_file(f) == ("multiple", [{"id": "multiple_0", "result": "[]"}])
    assert set(read_results(tmp_path / "m")) == {"multiple"}
    f.write_text(json.dumps({"id": "multiple_0", "result": "[]"}) + "\n{not json\n")
    with pytest.raises(ResultFileError, match=r":2: not JSON"):
        read_result_file(f)
    f.write_text(json.dumps({"id": "parallel_0", "result": "[]"}) + "\n")
    with pytest.raises(ResultFileError, match="does not belong"):
        read_result_file(f)
    with pytest.raises(ResultFileError, match="no BFCL_v4"):
        read_results(tmp_path / "empty")


def test_first_query_tokens_read_both_bfcl_shapes():
    assert (
        first_query_input_tokens({"id": "simple_python_0", "result": GOOD, "input_token_count": 120}) == 120
    )
    multi = {"id": "multi_turn_base_0", "result": [["x"]], "input_token_count": [[900, 950], [1010]]}
    assert first_query_input_tokens(multi) == 900  # first turn, first step; later steps are longer
    assert first_query_input_tokens({"id": "a", "result": "Error during inference: boom"}) is None


@pytest.mark.parametrize("count", [None, [], [[]], [7], -1, 2.5, True, float("nan"), "12"])
def test_a_line_without_a_usable_count_is_an_error(count):
    line = {"id": "simple_python_0", "result": GOOD, "input_token_count": count}
    with pytest.raises(ResultFileError, match="simple_python_0"):
        first_query_input_tokens(line)


def test_mean_input_tokens_leaves_out_inference_errors_only():
    lines = [
        {"id": "a", "result": GOOD, "input_token_count": 100},
        {"id": "b", "result": "Error during inference: x", "traceback": "..."},
        {"id": "c", "result": [["y"]], "input_token_count": [[300, 400]]},
    ]
    assert mean_input_tokens(lines) == 200.0
    assert mean_input_tokens(lines[1:2]) is None
    assert mean_input_tokens([]) is None
