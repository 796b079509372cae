"""lm-eval task data fetched at pinned revisions through lm-eval's own task construction (no network)."""

import datasets
import pytest
from lm_eval.tasks import TaskManager

from toolcall_repro.eval.general.fetch import MissingRevision, fetch_task_data

# slow: lm-eval's TaskManager, which both tests need, reads every task config lm-eval ships (~7 s).
pytestmark = pytest.mark.slow

HELLASWAG_ROW = {"ind": 0, "activity_label": "Cooking", "ctx_a": "A man cuts bread.", "ctx_b": "he",
                 "ctx": "A man cuts bread. he", "endings": ["eats.", "sings.", "runs.", "sleeps."],
                 "source_id": "x", "split": "val", "split_type": "indomain", "label": "0"}  # fmt: skip


@pytest.fixture(scope="module")
def task_manager():
    return TaskManager()


def fake_load(seen):
    def load(path=None, name=None, **kwargs):
        seen.append((path, name, kwargs))
        rows = datasets.Dataset.from_list([HELLASWAG_ROW, {**HELLASWAG_ROW, "ind": 1, "label": "2"}])
        return datasets.DatasetDict({"train": rows, "validation": rows})

    return load


def test_every_load_gets_the_pinned_revision_and_is_recorded(task_manager):
    seen = []
    record = fetch_task_data(
        ["hellaswag"],
        {"Rowan/hellaswag": "abc123"},
        load=fake_load(seen),
        resolve=lambda path, rev: f"sha-of-{rev}",
        task_manager=task_manager,
    )
    assert seen == [("Rowan/hellaswag", None, {"revision": "abc123"})]  # lm-eval's own call, pinned
    assert record["loads"] == [
        {"dataset": "Rowan/hellaswag", "config": None, "revision": "abc123", "rows": {"train": 2, "validation": 2}}
    ]
    assert record["datasets"] == {"Rowan/hellaswag": {"revision": "abc123", "commit": "sha-of-abc123"}}


def test_a_dataset_without_a_pin_is_an_error_naming_the_key(task_manager):
    with pytest.raises(MissingRevision, match=r"evaluate.general.revisions .*'Rowan/hellaswag'"):
        fetch_task_data(["hellaswag"], {"cais/mmlu": "main"}, load=fake_load([]), task_manager=task_manager)
