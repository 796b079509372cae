"""Normalised samples to build the local task from (the tiny model is the shared `tiny_model_dir`)."""

from __future__ import annotations

import pytest

from toolcall_repro.data.schema import Sample, write_samples

TOOLS = ["get_weather", "book_flight", "send_email", "convert_currency", "play_music", "find_recipe"]


def tool(name: str) -> dict:
    return {"name": name, "description": f"{name} tool", "parameters": {"type": "object", "properties": {}}}


def sample(i: int, answer: str, offered: list[str], setting: str = "single_turn", calls=None) -> Sample:
    return Sample.build(
        id=f"xlam:{i}",
        source="xlam",
        setting=setting,
        tools=[tool(n) for n in offered],
        messages=[{"role": "user", "content": f"please {answer.replace('_', ' ')} number {i}"}],
        ground_truth=calls if calls is not None else [{"name": answer, "arguments": {"x": i}}],
    )


def make_samples(n: int = 30) -> list[Sample]:
    out = []
    for i in range(n):
        answer = TOOLS[i % len(TOOLS)]
        out.append(sample(i, answer, [answer, TOOLS[(i + 1) % len(TOOLS)]]))
    return out


@pytest.fixture
def build():
    """The sample builders, for tests that construct their own rows."""
    return type(
        "Builders", (), {"sample": staticmethod(sample), "many": staticmethod(make_samples), "tools": TOOLS}
    )


@pytest.fixture(scope="session")
def samples_parquet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("data") / "xlam.parquet"
    write_samples(make_samples(), path)
    return str(path)
