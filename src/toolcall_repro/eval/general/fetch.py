"""Fetch lm-eval's task data on the submit host (paper scale), for compute nodes that are offline.

The download_lm_eval_data job: `toolcall-repro stage download_lm_eval_data --config '{"tasks": "mmlu,...",
"revisions": {...}}' --out record=record.json`.

lm-eval builds every task of the list (each MMLU subject, ...) and each task loads its dataset with
`datasets.load_dataset`. Run online, with the HF_HOME the compute nodes share, lm-eval's own task
construction fills the datasets cache with exactly what the evaluation job (HF_DATASETS_OFFLINE=1) reads
back. lm-eval's task files pin no revision, so each load gets the revision config pins for its dataset
(`evaluate.general.revisions`); the record names every (dataset, config, revision, commit, rows) read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from unittest import mock

from toolcall_repro.io import atomic_write_json


class MissingRevision(ValueError):
    """A task reads a dataset that config pins no revision for."""


def hub_commit(path: str, revision: str) -> str | None:
    """The commit sha a revision (branch, tag or sha) of a Hub dataset resolves to now."""
    from huggingface_hub import HfApi

    return HfApi().dataset_info(path, revision=revision).sha


@contextmanager
def pinned_loads(revisions: Mapping[str, str], load: Callable, calls: list):
    """`datasets.load_dataset` with the pinned revision of its dataset added, each call recorded."""
    import datasets

    def load_pinned(path=None, name=None, **kwargs):
        if path not in revisions:
            raise MissingRevision(
                f"evaluate.general.revisions has no revision for dataset {path!r} (config {name!r}); "
                f"pinned: {sorted(revisions)}"
            )
        kwargs["revision"] = revisions[path]
        data = load(path=path, name=name, **kwargs)
        rows = {split: len(part) for split, part in data.items()} if hasattr(data, "items") else None
        calls.append({"dataset": path, "config": name, "revision": revisions[path], "rows": rows})
        return data

    with mock.patch.object(datasets, "load_dataset", load_pinned):
        yield


def fetch_task_data(
    tasks: Sequence[str],
    revisions: Mapping[str, str],
    *,
    load: Callable | None = None,
    resolve: Callable[[str, str], str | None] = hub_commit,
    task_manager=None,
) -> dict:
    """Build every task with lm-eval (which loads its data) at pinned revisions; return the record."""
    import datasets
    from lm_eval.tasks import TaskManager

    from toolcall_repro.provenance import package_versions

    calls: list[dict] = []
    with pinned_loads(revisions, load or datasets.load_dataset, calls):
        built = (task_manager or TaskManager()).load(list(tasks))
    used = sorted({c["dataset"] for c in calls})
    return {
        "tasks": list(tasks),
        "task_entries": len(built),
        "loads": sorted(calls, key=lambda c: (c["dataset"], str(c["config"]))),
        "datasets": {d: {"revision": revisions[d], "commit": resolve(d, revisions[d])} for d in used},
        "versions": package_versions(["lm-eval", "datasets"]),
    }


def fetch(tasks: str, revisions: dict, out: str) -> dict:
    """Fetch the comma list of `tasks` at `revisions` and write the record to `out`."""
    record = fetch_task_data([t.strip() for t in tasks.split(",") if t.strip()], revisions)
    atomic_write_json(out, record)
    print(json.dumps({d: v["commit"] for d, v in record["datasets"].items()}))
    return record


def download_lm_eval_data(j) -> None:
    """The download_lm_eval_data job (toolcall_repro.job): config {"tasks": "a,b", "revisions": {...}}."""
    fetch(j.config["tasks"], j.config["revisions"], j.out("record"))
