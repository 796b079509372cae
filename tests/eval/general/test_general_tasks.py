from __future__ import annotations

import pytest

from toolcall_repro.eval.general.tasks import LOCAL_TASK, expand_tasks, local_task_config, tool_choice_docs


def test_every_document_offers_the_called_tool_as_gold(build):
    docs = tool_choice_docs(build.many(30), num_choices=4, fewshot_size=5, seed=3)
    assert len(docs.test) + len(docs.fewshot) == 30 and len(docs.fewshot) == 5
    for d in docs.test + docs.fewshot:
        assert len(d["choices"]) == 4 and len(set(d["choices"])) == 4
        assert d["choices"][d["gold"]] in d["query"].replace(" ", "_")  # the query names the tool


def test_deterministic_in_seed_and_independent_of_row_order(build):
    samples = build.many(30)
    a = tool_choice_docs(samples, seed=1)
    b = tool_choice_docs(list(reversed(samples)), seed=1)
    c = tool_choice_docs(samples, seed=2)
    assert a.test == b.test and a.fewshot == b.fewshot
    assert a.test != c.test


def test_unusable_samples_are_counted_by_reason_never_dropped_silently(build):
    sample, TOOLS = build.sample, build.tools
    rows = build.many(6) + [
        sample(100, "get_weather", ["get_weather"], calls=[]),
        sample(
            101,
            "get_weather",
            TOOLS[:3],
            calls=[{"name": "get_weather", "arguments": {}}, {"name": "send_email", "arguments": {}}],
        ),
        sample(102, "get_weather", ["get_weather"], setting="multi_turn"),
    ]
    docs = tool_choice_docs(rows, fewshot_size=0)
    assert len(docs.test) == 6
    assert docs.excluded == {"no_call": 1, "several_tools_called": 1, "setting_multi_turn": 1}


def test_choices_top_up_from_other_samples_when_a_sample_offers_one_tool(build):
    sample, TOOLS = build.sample, build.tools
    rows = [sample(i, TOOLS[i], [TOOLS[i]]) for i in range(4)]
    docs = tool_choice_docs(rows, num_choices=3, fewshot_size=0)
    assert all(len(d["choices"]) == 3 for d in docs.test)


def test_task_config_and_task_names(build):
    cfg = local_task_config("/x/test.jsonl", "/x/fewshot.jsonl")
    assert cfg["dataset_path"] == "json" and cfg["output_type"] == "multiple_choice"
    assert cfg["dataset_kwargs"]["data_files"]["test"] == "/x/test.jsonl"
    assert expand_tasks(["local", "mmlu"]) == [LOCAL_TASK, "mmlu"]
    with pytest.raises(ValueError):
        expand_tasks([])
    with pytest.raises(ValueError):
        tool_choice_docs(build.many(3), num_choices=1)
