"""Synthetic twins: in the sources' schemas (the real loaders read them), reproducible, learnable, with
the malformed rows and the turn spread the filters need."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from toolcall_repro.data.normalise import normalise_file
from toolcall_repro.data.schema import iter_jsonl, read_samples
from toolcall_repro.data.sources import load_rows
from toolcall_repro.data.synthetic import generate_rows, write_raw
from toolcall_repro.data.synthetic_tools import TOOLS, sample_request, summary, tool_result

SMALL = {
    "xlam": {"rows": 60, "malformed": 5},
    "toolace": {"rows": 30, "malformed": 4},
    "looptool": {"rows": 120, "malformed": 4},
    "tooln1": {"rows": 20, "malformed": 3},
}


def generated(tmp_path, source, seed=0, config=None):
    rows, planted = generate_rows(source, config or SMALL[source], seed)
    path = tmp_path / f"{source}-{seed}.jsonl"
    write_raw(rows, path)
    return path, planted


@pytest.mark.parametrize("source", sorted(SMALL))
def test_loaders_read_the_twins_and_reject_exactly_the_planted_rows(tmp_path, source):
    path, planted = generated(tmp_path, source)
    result = load_rows(source, iter_jsonl(path))
    assert result.rows == SMALL[source]["rows"] + SMALL[source]["malformed"]
    assert [{"row": r["row"], "reason": r["reason"]} for r in result.rejects] == planted
    assert len(planted) == SMALL[source]["malformed"]
    assert len({p["reason"] for p in planted}) >= 3  # several kinds of malformed row, not one repeated
    assert len(result.samples) >= SMALL[source]["rows"]


@pytest.mark.parametrize("source", sorted(SMALL))
def test_same_seed_gives_byte_identical_raw_and_normalised_files(tmp_path, source):
    a, _ = generated(tmp_path, source, seed=3)
    (tmp_path / "again").mkdir()
    b, _ = generated(tmp_path / "again", source, seed=3)
    c, _ = generated(tmp_path, source, seed=4)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    outs = []
    for raw, tag in ((a, "a"), (b, "b")):
        out = tmp_path / f"{tag}.parquet"
        normalise_file(source, raw, out, tmp_path / f"{tag}.rej.jsonl", tmp_path / f"{tag}.json")
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_the_job_writes_the_same_file_as_the_function(tmp_path):
    from toolcall_repro.cli import main

    out = tmp_path / "cli.jsonl"
    assert main(
        ["stage", "synthesize_source", "--option", "source=looptool", "--config", '{"rows": 10, "malformed": 2}']
        + ["--seed", "data=1", "--out", f"raw={out}"]
    ) == 0  # fmt: skip
    ref, _ = generated(tmp_path, "looptool", seed=1, config={"rows": 10, "malformed": 2})
    assert out.read_bytes() == ref.read_bytes()


def test_looptool_twin_spreads_turns_and_has_text_and_several_call_labels(tmp_path):
    path, _ = generated(tmp_path, "looptool")
    samples = load_rows("looptool", iter_jsonl(path)).samples
    turns = Counter(s.num_turns for s in samples)
    assert set(turns) == set(range(1, 8))  # 1 and 7 exist, so the 2-6 filter has work on both sides
    calls = Counter(len(s.ground_truth_list) for s in samples)
    assert calls[0] > 0 and calls[2] > 0 and calls[1] > calls[0] + calls[2]
    # every history turn is a full exchange: call, tool result, summary
    long = max(samples, key=lambda s: s.num_turns)
    roles = [m["role"] for m in long.messages_list]
    assert roles.count("tool") >= long.num_turns - 1 and roles[-1] in ("user", "tool")


def test_multi_turn_samples_are_clearly_longer_than_single_turn(tmp_path):
    def mean_len(source):
        path, _ = generated(tmp_path, source)
        samples = load_rows(source, iter_jsonl(path)).samples
        return sum(len(s.messages) + len(s.tools) for s in samples) / len(samples)

    assert mean_len("looptool") > 2 * mean_len("xlam")


def test_tool_library_is_typed_and_small():
    assert 10 <= len(TOOLS) <= 16
    kinds = Counter(p.kind for t in TOOLS for p in t.params)
    assert set(kinds) == {"enum", "int", "bool"}
    assert any(not p.required for t in TOOLS for p in t.params)  # optional params exist
    for t in TOOLS:
        for p in t.params:
            if p.kind == "int":
                assert 0 <= p.low <= p.high <= 99  # at most two free-form digits
            if p.kind == "enum":
                assert 2 <= len(p.values) <= 8


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
def test_every_argument_is_said_in_the_request(tool):
    rng = random.Random(tool.name)
    for _ in range(40):
        req = sample_request(tool, rng)
        words = req.text.split()
        for name, value in req.call["arguments"].items():
            said = tool.param(name).say(value)
            assert re.search(rf"\b{re.escape(said)}\b", req.text), (req.text, name, value)
        required = {p.name for p in tool.params if p.required}
        assert required <= set(req.call["arguments"])
        assert len(words) <= 14
        text = summary(req, tool_result(req, rng))
        assert "{" not in text and text.endswith(".")


def test_vocabulary_is_small(tmp_path):
    words = Counter()
    for source in ("xlam", "toolace", "looptool"):
        path, _ = generated(tmp_path, source)
        for s in load_rows(source, iter_jsonl(path)).samples:
            for m in s.messages_list:
                words.update(re.findall(r"[a-z]+", m["content"]))
    assert len(words) < 250


def test_unknown_source_is_refused():
    with pytest.raises(ValueError, match="unknown source"):
        generate_rows("glaive", {}, 0)


def test_normalised_twins_roundtrip_through_parquet(tmp_path):
    path, _ = generated(tmp_path, "toolace")
    out = tmp_path / "t.parquet"
    report = normalise_file("toolace", path, out, tmp_path / "r.jsonl", tmp_path / "rep.json")
    samples = read_samples(out)
    assert report["samples"] == len(samples)
    assert len({s.id for s in samples}) == len(samples)
    assert max(s.num_turns for s in samples) >= 2  # later call turns carry history
