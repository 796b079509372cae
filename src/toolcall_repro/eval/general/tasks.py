"""The local multiple-choice task for the embedded default (pure): "which tool fits this query?".

Built from normalised samples: the query is the last user message, the choices are tool names (the
sample's own tools, topped up with tool names from other samples), the answer is the tool the ground
truth calls. The paper config uses lm-eval's own MMLU / HellaSwag / TruthfulQA / Winogrande instead.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from toolcall_repro.data.schema import Sample

LOCAL_TASK = "toolcall_tool_choice"
PAPER_TASKS = ("mmlu", "hellaswag", "truthfulqa_mc2", "winogrande")
PROMPT = "Query: {{query}}\nWhich tool fits this query?\nTool:"


@dataclass
class ToolChoiceDocs:
    test: list[dict]
    fewshot: list[dict]
    excluded: Counter = field(default_factory=Counter)  # reason -> samples left out, never silently


def _doc(sample: Sample) -> tuple[dict | None, str | None]:
    try:
        tools, messages, calls = sample.tools_list, sample.messages_list, sample.ground_truth_list
    except json.JSONDecodeError:
        return None, "bad_json"
    names = list(dict.fromkeys(t.get("name") for t in tools if isinstance(t, dict) and t.get("name")))
    called = {c.get("name") for c in calls if isinstance(c, dict)}
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not calls:
        return None, "no_call"
    if len(called) != 1:
        return None, "several_tools_called"
    if not users or not isinstance(users[-1], str) or not users[-1].strip():
        return None, "no_user_message"
    answer = next(iter(called))
    if answer not in names:
        return None, "answer_not_in_tools"
    return {"id": sample.id, "query": users[-1].strip(), "answer": answer, "tools": names}, None


def tool_choice_docs(
    samples: Iterable[Sample],
    *,
    num_choices: int = 4,
    fewshot_size: int = 16,
    seed: int = 0,
    settings: tuple[str, ...] = ("single_turn",),
) -> ToolChoiceDocs:
    """Multiple-choice documents {id, query, choices, gold}; deterministic in (samples, seed).

    Every sample either becomes a document or is counted under a reason in `excluded`. The first
    `fewshot_size` documents of a seeded shuffle form the few-shot pool, the rest the test split.
    """
    if num_choices < 2:
        raise ValueError(f"num_choices must be at least 2, got {num_choices}")
    excluded: Counter = Counter()
    raw = []
    for s in samples:
        if s.setting not in settings:
            excluded[f"setting_{s.setting}"] += 1
            continue
        doc, reason = _doc(s)
        if reason:
            excluded[reason] += 1
        else:
            raw.append(doc)
    pool = sorted({n for d in raw for n in d["tools"]})
    docs = []
    for d in sorted(raw, key=lambda d: d["id"]):
        rng = random.Random(f"{seed}:{d['id']}")  # per-document stream: independent of the other rows
        others = [n for n in d["tools"] if n != d["answer"]]
        others = rng.sample(others, min(len(others), num_choices - 1))
        spare = [n for n in pool if n != d["answer"] and n not in others]
        others += rng.sample(spare, min(len(spare), num_choices - 1 - len(others)))
        if not others:
            excluded["too_few_tool_names"] += 1
            continue
        choices = [d["answer"], *others]
        rng.shuffle(choices)
        docs.append(
            {"id": d["id"], "query": d["query"], "choices": choices, "gold": choices.index(d["answer"])}
        )
    random.Random(seed).shuffle(docs)
    return ToolChoiceDocs(test=docs[fewshot_size:], fewshot=docs[:fewshot_size], excluded=excluded)


def local_task_config(test_file: str, fewshot_file: str, task: str = LOCAL_TASK) -> dict:
    """lm-eval task config (its YAML format) over local JSONL files: loglikelihood multiple choice."""
    return {
        "task": task,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": test_file, "fewshot": fewshot_file}},
        "test_split": "test",
        "fewshot_split": "fewshot",
        "output_type": "multiple_choice",
        "doc_to_text": PROMPT,
        "doc_to_choice": "{{choices}}",
        "doc_to_target": "{{gold}}",
        "target_delimiter": " ",
        "fewshot_delimiter": "\n\n",
        "metric_list": [
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        ],
        "metadata": {"version": 1.0},
    }


def expand_tasks(tasks: Iterable[str]) -> list[str]:
    """'local' is our tool-choice task; every other name is an lm-eval task or group, passed through."""
    out = [LOCAL_TASK if t == "local" else t for t in tasks]
    if not out:
        raise ValueError("no tasks given")
    return out
