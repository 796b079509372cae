"""Run an evaluation stage through the job entry as a rule would (workflow/rules/common.smk `job()`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from toolcall_repro.job import run
from toolcall_repro.jobspec import Job


def _flat(named: dict) -> list[str]:
    return [p for v in named.values() for p in ([v] if isinstance(v, str) else v)]


@pytest.fixture
def run_stage():
    """`run_stage(stage, input=..., output=..., config=..., seeds=..., **options)` -> the manifest.

    Paths are str (as Snakemake gives them); output must name a `manifest`. The job must succeed.
    """

    def go(stage: str, *, input: dict, output: dict, config, seeds: dict, **options) -> dict:
        input = {k: v if isinstance(v, str) else list(v) for k, v in input.items()}
        job = Job(
            rule=stage,
            stage=stage,
            input=input,
            output=output,
            files={"input": _flat(input), "output": _flat(output)},
            config=config,
            seeds=seeds,
            options=options,
        )
        # through JSON, as the rule's params.job reaches the entry
        job = Job.from_json(json.dumps(dataclasses.asdict(job)))
        assert run(job) == 0
        return json.loads(Path(output["manifest"]).read_text())

    return go
