"""Filter decisions, driven through the real rollout scoring with a deterministic scripted backend."""

from __future__ import annotations

import json

import pytest

from toolcall_repro.data import filters
from toolcall_repro.data.rollouts import ChunkStore, chunk_seed, run_rollouts
from toolcall_repro.data.schema import Sample
from toolcall_repro.data.split import is_reserved
from toolcall_repro.toolcall import format_tool_calls

try:
    from toolcall_repro.backends.base import Generation
except ImportError:  # the backends package lands separately; the interface is the contract's
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Generation:
        text: str
        prompt_tokens: int
        completion_tokens: int


TOOLS = [
    {"name": n, "description": "", "parameters": {"type": "object", "properties": {}, "required": []}}
    for n in ("a", "b")
]


def sample(i, setting="single_turn", turns=1, calls=1, source=None) -> Sample:
    messages = []
    for t in range(turns):
        messages.append({"role": "user", "content": f"req {i}.{t}"})
        if t < turns - 1:
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [{"name": "a", "arguments": {"t": t}}]},
                {"role": "tool", "content": "ok"},
                {"role": "assistant", "content": "done."},
            ]
    gt = [{"name": "a", "arguments": {"i": i}}, {"name": "b", "arguments": {}}][:calls]
    src = source or ("looptool" if setting == "multi_turn" else "xlam")
    return Sample.build(
        id=f"{src}:{i}", source=src, setting=setting, tools=TOOLS, messages=messages, ground_truth=gt
    )


def right(s: Sample) -> str:
    return "<think>x</think>\n" + format_tool_calls(s.ground_truth_list, "xml_json")


WRONG = "<think>x</think>\n" + format_tool_calls([{"name": "b", "arguments": {"nope": 1}}], "xml_json")


class ScriptedBackend:
    """The generation-backend interface, answering from a script: prompt -> n rollout texts."""

    def __init__(self, script: dict[str, list[str]], fail_on_call: int | None = None):
        self.script = script
        self.calls: list[dict] = []
        self.fail_on_call = fail_on_call  # the job is killed during this generate() call (0-based)

    def generate(self, prompts, n, *, temperature, top_p, max_tokens, seed):
        if len(self.calls) == self.fail_on_call:
            raise RuntimeError("preempted")
        self.calls.append({"prompts": list(prompts), "n": n, "seed": seed, "temperature": temperature})
        return [[Generation(t, len(p), len(t)) for t in self.script[p][:n]] for p in prompts]


def scorer(backend, n, seed=0, batch_size=2, store=None):
    return lambda batch: run_rollouts(
        batch,
        backend,
        lambda s: s.id,
        n,
        temperature=1.0,
        top_p=1.0,
        max_tokens=32,
        seed=seed,
        batch_size=batch_size,
        store=store,
    )


def test_rollouts_are_scored_with_the_samples_setting_and_chunked_seeds():
    s1, s2, s3 = sample(1), sample(2), sample(3, "multi_turn")
    backend = ScriptedBackend(
        {
            s1.id: [right(s1), WRONG],
            s2.id: [format_tool_calls(s2.ground_truth_list, "xml_json")]
            * 2,  # no <think>: single-turn format fails
            s3.id: [format_tool_calls(s3.ground_truth_list, "xml_json")] * 2,  # multi-turn has no format term
        }
    )
    results = scorer(backend, 2, seed=7)([s1, s2, s3])
    assert results[s1.id].scores == (1.0, 0.0) and results[s1.id].reasons == ("correct", "wrong_name")
    assert results[s2.id].scores == (0.0, 0.0) and set(results[s2.id].reasons) == {"format"}
    assert results[s3.id].scores == (1.0, 1.0)
    assert [c["seed"] for c in backend.calls] == [chunk_seed(7, 0), chunk_seed(7, 1)]
    assert [len(c["prompts"]) for c in backend.calls] == [2, 1]


def test_rollouts_refuse_a_backend_that_returns_the_wrong_shape():
    s = sample(1)
    with pytest.raises(RuntimeError, match="generations"):
        scorer(ScriptedBackend({s.id: [right(s)]}), 2)([s])


def test_keep_not_all_correct_drops_only_what_the_policy_always_solves():
    pool = [sample(i) for i in range(6)]
    script = {}
    for s in pool:
        k = int(s.id.split(":")[1]) % 3  # 0: both right, 1: both wrong, 2: one of each
        script[s.id] = [[right(s)] * 2, [WRONG] * 2, [WRONG, right(s)]][k]
    config = {"heldout_size": 0, "target_size": None, "keep": "not_all_correct"}
    train, _, report = filters.filter_single_turn(pool, config, seed=0, score=scorer(ScriptedBackend(script), 2))
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["rollouts_not_all_correct"]["dropped"] == {"all_correct": 2}
    assert {s.id for s in train} == {"xlam:1", "xlam:2", "xlam:4", "xlam:5"}
    with pytest.raises(ValueError, match=r"keep: 'all' is not one of \['mixed', 'not_all_correct'\]"):
        filters.filter_single_turn(pool, {**config, "keep": "all"}, seed=0, score=scorer(ScriptedBackend(script), 2))


def test_single_turn_chain_keeps_only_mixed_samples():
    pool = [sample(i) for i in range(9)] + [sample(0, source="toolace")]  # toolace:0 duplicates xlam:0
    script = {}
    for s in pool:
        k = int(s.id.split(":")[1]) % 3  # 0: both right, 1: both wrong, 2: one of each
        script[s.id] = [[right(s)] * 2, [WRONG] * 2, [WRONG, right(s)]][k]
    train, heldout, report = filters.filter_single_turn(
        pool, {"heldout_size": 1, "target_size": None}, seed=0, score=scorer(ScriptedBackend(script), 2)
    )
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["dedupe"]["dropped"] == {"duplicate": 1}
    assert steps["rollouts_mixed"]["dropped"] == {"all_correct": 3, "all_wrong": 3}
    survivors = {s.id for s in train} | {s.id for s in heldout}
    assert survivors == {"xlam:2", "xlam:5", "xlam:8"}
    assert len(heldout) == 1 and not ({s.id for s in train} & {s.id for s in heldout})
    dropped = {d["id"]: d["reason"] for d in report["drops"] if d["step"] == "rollouts_mixed"}
    assert dropped["xlam:0"] == "all_correct" and dropped["xlam:1"] == "all_wrong"
    assert report["rollouts"]["correct_per_sample"] == {"0": 3, "1": 3, "2": 3}
    # each training sample's correct rollouts under the filter policy: one of two, by the keep rule
    assert report["train"]["filter_correct"] == {s.id: 1 for s in train}


def test_multi_turn_chain_turn_range_single_call_and_min_correct():
    pool = [sample(i, "multi_turn", turns=t) for i, t in enumerate([1, 2, 4, 6, 7, 3])]
    pool.append(sample(10, "multi_turn", turns=3, calls=2))
    script = {s.id: [WRONG] * 8 for s in pool}
    script["looptool:2"] = [WRONG] * 7 + [right(pool[2])]  # one correct of 8 is enough
    script["looptool:3"] = [right(pool[3])] * 8
    config = {"min_turns": 2, "max_turns": 6, "min_correct": 1, "heldout_size": 0, "target_size": 1}
    train, heldout, report = filters.filter_multi_turn(
        pool, config, seed=0, score=scorer(ScriptedBackend(script), 8)
    )
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["turn_range"]["dropped"] == {"too_few_turns": 1, "too_many_turns": 1}
    assert steps["single_call_answer"]["dropped"] == {"several_calls_in_answer": 1}
    assert steps["rollouts_min_correct"]["dropped"] == {"too_few_correct": 2}  # looptool:1 and looptool:5
    assert steps["target_size"]["dropped"] == {"over_target": 1}
    assert len(train) == 1 and train[0].id in {"looptool:2", "looptool:3"}
    assert report["train"]["reached"] is True
    assert report["train"]["filter_correct"] == {train[0].id: {"looptool:2": 1, "looptool:3": 8}[train[0].id]}
    tc = report["turn_counting"]
    assert tc["definition"] == "user_requests"
    assert tc["definitions"]["user_requests"]["in_range"] == 5
    # counting tool calls in the history shifts every count down by one (turns - 1), recorded side by side
    assert tc["definitions"]["history_tool_calls"]["histogram"] == {
        "0": 1,
        "1": 1,
        "2": 2,
        "3": 1,
        "5": 1,
        "6": 1,
    }
    assert tc["definitions"]["user_requests"]["histogram"] == {"1": 1, "2": 1, "3": 2, "4": 1, "6": 1, "7": 1}


def test_turn_definitions_differ_as_documented():
    s = sample(0, "multi_turn", turns=3)
    assert filters.turn_count(s, "user_requests") == 3
    assert filters.turn_count(s, "history_tool_calls") == 2
    assert filters.turn_count(s, "user_blocks_incl_tool_results") == 5
    with pytest.raises(ValueError, match="unknown turn definition"):
        filters.turn_count(s, "bogus")


def test_every_step_balances_and_every_drop_is_explained():
    pool = [sample(i) for i in range(20)]
    script = {s.id: [WRONG, right(s)] for s in pool}
    train, heldout, report = filters.filter_single_turn(
        pool, {"heldout_fraction": 0.25, "target_size": 10}, seed=1, score=scorer(ScriptedBackend(script), 2)
    )
    for step in report["steps"]:
        assert step["out"] == step["in"] - sum(step["dropped"].values())
    assert len(report["drops"]) == len(pool) - len(train)
    assert len(heldout) == 5 and len(train) == 10
    assert {d["reason"] for d in report["drops"]} == {"heldout", "over_target"}


def test_same_seed_same_split_other_seed_other_split():
    pool = [sample(i) for i in range(30)]
    script = {s.id: [WRONG, right(s)] for s in pool}
    cfg = {"heldout_size": 5, "target_size": 12}

    def run(seed):
        train, heldout, _ = filters.filter_single_turn(pool, cfg, seed, scorer(ScriptedBackend(script), 2))
        return [s.id for s in train], [s.id for s in heldout]

    assert run(0) == run(0)
    assert run(0) != run(1)


def test_target_not_reached_is_reported_not_padded():
    pool = [sample(i) for i in range(4)]
    script = {s.id: [WRONG, right(s)] for s in pool}
    train, _, report = filters.filter_single_turn(
        pool, {"heldout_size": 0, "target_size": 10}, 0, scorer(ScriptedBackend(script), 2)
    )
    assert len(train) == 4 and report["train"]["reached"] is False


def test_prompt_length_limit_drops_long_prompts_before_rollouts():
    pool = [sample(i) for i in range(4)]
    backend = ScriptedBackend({s.id: [WRONG, right(s)] for s in pool})
    train, _, report = filters.filter_single_turn(
        pool,
        {"heldout_size": 0, "max_prompt_tokens": 10},
        0,
        scorer(backend, 2),
        prompt_tokens=lambda s: 5 if s.id in ("xlam:0", "xlam:1") else 50,
    )
    assert [s.id for s in train] == ["xlam:0", "xlam:1"]
    assert {p for c in backend.calls for p in c["prompts"]} == {"xlam:0", "xlam:1"}


def test_format_subsets_are_matched_in_size():
    single = [sample(i) for i in range(10)]
    multi = [sample(i, "multi_turn", turns=3) for i in range(6)]
    a, b, report = filters.format_subsets(single, multi, 8, seed=0)
    assert len(a) == len(b) == 6 and report["reached"] is False
    a2, b2, report2 = filters.format_subsets(single, multi, 4, seed=0)
    assert len(a2) == len(b2) == 4 and report2["reached"] is True
    assert report2["multi_turn"]["mean_turns"] == 3 and report2["single_turn"]["mean_turns"] == 1
    assert filters.format_subsets(single, multi, 4, seed=0)[0] == a2


def test_pool_has_no_rollouts_and_a_heldout_split():
    pool = [sample(i) for i in range(10)] + [sample(1, source="toolace")]
    train, heldout, report = filters.pool_samples(pool, {"heldout_fraction": 0.2}, seed=0)
    assert len(heldout) == 2 and len(train) == 8
    assert report["steps"][1]["dropped"] == {"duplicate": 1}
    json.dumps(report)  # the report is plain JSON


def test_heldout_is_drawn_only_from_reserved_survivors():
    pool = [sample(i) for i in range(60)]
    script = {s.id: [WRONG, right(s)] for s in pool}
    cfg = {"heldout_fraction": 0.15, "reserve_fraction": 0.3, "target_size": None}
    train, heldout, report = filters.filter_single_turn(pool, cfg, 2, scorer(ScriptedBackend(script), 2))
    reserved = {s.id for s in pool if is_reserved(s, 0.3, 2)}
    assert len(heldout) == 9 and {s.id for s in heldout} <= reserved
    # the rest of the reserve is not wasted: it trains
    assert reserved - {s.id for s in heldout} <= {s.id for s in train}
    step = next(x for x in report["steps"] if x["step"] == "heldout_split")
    assert f"drawn from {len(reserved)} reserved survivors" in step["note"]
    assert report["heldout"]["reserve_fraction"] == 0.3


def test_a_short_reserve_caps_the_heldout_split_and_says_so():
    pool = [sample(i) for i in range(20)]
    script = {s.id: [WRONG, right(s)] for s in pool}
    cfg = {"heldout_size": 10, "reserve_fraction": 0.1, "target_size": None}
    _, heldout, report = filters.filter_single_turn(pool, cfg, 0, scorer(ScriptedBackend(script), 2))
    reserved = [s.id for s in pool if is_reserved(s, 0.1, 0)]
    assert [s.id for s in heldout] == reserved and len(reserved) < 10
    step = next(x for x in report["steps"] if x["step"] == "heldout_split")
    assert step["note"].startswith(
        f"drawn from {len(reserved)} reserved survivors (reserve_fraction 0.1); 10 wanted"
    )


def toolace_turns(conversations: int, calls: int) -> list[Sample]:
    """ToolACE-style samples: one per call of a conversation, later ones holding earlier answers."""
    out = []
    for c in range(conversations):
        history: list[dict] = []
        for k in range(calls):
            history = history + [{"role": "user", "content": f"conv {c} req {k}"}]
            gt = [{"name": "a", "arguments": {"c": c, "k": k}}]
            out.append(
                Sample.build(
                    id=f"toolace:{c}:{k}",
                    source="toolace",
                    setting="single_turn",
                    tools=TOOLS,
                    messages=history,
                    ground_truth=gt,
                )
            )
            history = history + [
                {"role": "assistant", "content": "", "tool_calls": gt},
                {"role": "tool", "content": "ok"},
            ]
    return out


def test_reserve_heldout_is_drawn_before_the_rollouts_unfiltered():
    pool = [sample(i) for i in range(80)]
    # every sample both right: the mixed filter would drop them all, the held-out split keeps its size
    script = {s.id: [right(s)] * 2 for s in pool}
    backend = ScriptedBackend(script)
    cfg = {"heldout_size": 10, "reserve_fraction": 0.3, "heldout_from": "reserve", "target_size": None}
    train, heldout, report = filters.filter_single_turn(pool, cfg, 1, scorer(backend, 2))
    reserved = {s.id for s in pool if is_reserved(s, 0.3, 1)}
    assert len(heldout) == 10 and {s.id for s in heldout} <= reserved
    assert train == []  # all-correct for the policy: nothing to train on
    rolled = {p for c in backend.calls for p in c["prompts"]}
    assert not rolled & {s.id for s in heldout}  # no rollouts spent on the held-out split
    steps = [x["step"] for x in report["steps"]]
    assert steps.index("heldout_split") < steps.index("rollouts_mixed")
    note = next(x for x in report["steps"] if x["step"] == "heldout_split")["note"]
    assert note == f"drawn from {len(reserved)} reserved samples before the rollouts (reserve_fraction 0.3)"
    assert report["heldout"]["from"] == "reserve" and report["train"]["from"] == "all"


def test_reserve_heldout_takes_its_conversations_out_of_training():
    pool = toolace_turns(30, 3)
    script = {s.id: [WRONG, right(s)] for s in pool}
    cfg = {"heldout_size": 6, "reserve_fraction": 0.5, "heldout_from": "reserve", "target_size": None}
    train, heldout, report = filters.filter_single_turn(pool, cfg, 0, scorer(ScriptedBackend(script), 2))
    held = {s.id.rsplit(":", 1)[0] for s in heldout}
    assert held and not held & {s.id.rsplit(":", 1)[0] for s in train}
    step = next(x for x in report["steps"] if x["step"] == "heldout_conversations")
    # every sample of a held-out conversation is either held out or dropped, and counted
    siblings = [s for s in pool if s.id.rsplit(":", 1)[0] in held and s not in heldout]
    assert step["dropped"] == {"shares_heldout_conversation": len(siblings)}
    assert step["in"] - step["out"] == len(siblings)


def test_train_from_reserve_trains_only_on_conversations_the_warm_start_never_saw():
    pool = [sample(i, "multi_turn", turns=2) for i in range(60)]
    script = {s.id: [right(s)] + [WRONG] * 7 for s in pool}
    cfg = {
        "min_turns": 2,
        "max_turns": 6,
        "min_correct": 1,
        "heldout_size": 5,
        "reserve_fraction": 0.4,
        "heldout_from": "reserve",
        "train_from": "reserve",
        "target_size": None,
    }
    backend = ScriptedBackend(script)
    train, heldout, report = filters.filter_multi_turn(pool, cfg, 3, scorer(backend, 8))
    reserved = {s.id for s in pool if is_reserved(s, 0.4, 3)}
    assert {s.id for s in train} == reserved - {s.id for s in heldout}
    step = next(x for x in report["steps"] if x["step"] == "train_from_reserve")
    assert step["dropped"] == {"seen_by_warm_start": 60 - len(reserved)}
    assert {p for c in backend.calls for p in c["prompts"]} == {s.id for s in train}
    assert report["train"]["from"] == "reserve"


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        (
            {"heldout_from": "reserve", "reserve_fraction": 0.0},
            "heldout_from: reserve needs reserve_fraction > 0",
        ),
        ({"train_from": "reserve"}, "train_from: reserve needs reserve_fraction > 0"),
        ({"heldout_from": "mixed", "reserve_fraction": 0.3}, "heldout_from: 'mixed' is not one of"),
    ],
)
def test_reserve_modes_refuse_what_they_cannot_do(cfg, match):
    pool = [sample(i) for i in range(4)]
    script = {s.id: [WRONG, right(s)] for s in pool}
    with pytest.raises(ValueError, match=match):
        filters.filter_single_turn(pool, {"heldout_size": 1, **cfg}, 0, scorer(ScriptedBackend(script), 2))


def test_a_retry_continues_after_the_last_complete_chunk_and_ends_identical(tmp_path):
    """Killed during chunk 2: the retry reads chunks 0-1 back, generates only the chunks from 2 on (with
    their own seeds), and its train / held-out split and report equal an uninterrupted run's."""
    samples = [sample(i) for i in range(8)]
    script = {s.id: ([right(s), WRONG] if i % 3 else [right(s)] * 2) for i, s in enumerate(samples)}
    config = {"rollouts": 2, "target_size": 4, "heldout_fraction": 0.25}
    whole = ScriptedBackend(script)
    expected = filters.filter_single_turn(samples, config, 3, scorer(whole, 2, seed=7))
    assert len(whole.calls) >= 3  # chunks of 2 prompts
    folder = tmp_path / "single_turn.chunks"

    killed = ScriptedBackend(script, fail_on_call=2)
    with pytest.raises(RuntimeError, match="preempted"):
        filters.filter_single_turn(samples, config, 3, scorer(killed, 2, seed=7, store=ChunkStore(folder, "run")))
    assert sorted(p.name for p in folder.iterdir()) == ["chunk-000000.json", "chunk-000001.json"]

    retry = ScriptedBackend(script)
    store = ChunkStore(folder, "run")
    got = filters.filter_single_turn(samples, config, 3, scorer(retry, 2, seed=7, store=store))
    assert store.reused == [0, 1]
    assert [c["prompts"] for c in retry.calls] == [c["prompts"] for c in whole.calls[2:]]
    assert [c["seed"] for c in retry.calls] == [chunk_seed(7, k) for k in range(2, len(whole.calls))]
    assert got == expected

    other = ScriptedBackend(script)  # another run (a changed config, policy or seed): nothing is reused
    filters.filter_single_turn(samples, config, 3, scorer(other, 2, seed=7, store=ChunkStore(folder, "other")))
    assert len(other.calls) == len(whole.calls)


def test_rollouts_log_progress_and_reused_chunks_count_but_are_not_timed(tmp_path, monkeypatch):
    """A line per chunk here (progress.EVERY_S 0; 30s apart in a job) with samples done of the total,
    elapsed time and an estimate left; a retry counts the chunks it reads back, and logs what it runs."""
    import re

    import toolcall_repro.progress as progress

    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    samples = [sample(i) for i in range(5)]
    script = {s.id: [right(s), WRONG] for s in samples}
    folder = tmp_path / "chunks"

    def go(backend, log):
        return run_rollouts(
            samples, backend, lambda s: s.id, 2, temperature=1.0, top_p=1.0, max_tokens=32, seed=0,
            batch_size=2, store=ChunkStore(folder, "run"), log=log, label="single_turn filter rollouts",
        )  # fmt: skip

    lines = []
    first = go(ScriptedBackend(script), lines.append)
    assert [m.split(",")[0] for m in lines] == [
        "single_turn filter rollouts: 2/5 samples (40%)",
        "single_turn filter rollouts: 4/5 samples (80%)",
        "single_turn filter rollouts: 5/5 samples (100%)",
    ]
    assert all(re.search(r", \d+s elapsed, ~\d+s left$", m) for m in lines), lines
    (folder / "chunk-000002.json").unlink()  # the last chunk lost: the retry generates it alone
    again, retry = [], ScriptedBackend(script)
    assert go(retry, again.append) == first and len(retry.calls) == 1
    assert len(again) == 1 and again[0].startswith("single_turn filter rollouts: 5/5 samples (100%), ")
    assert run_rollouts(
        samples, ScriptedBackend(script), lambda s: s.id, 2, temperature=1.0, top_p=1.0, max_tokens=32, seed=0
    ) == first  # no log: no lines, the same rollouts


def test_filter_rollouts_render_with_the_policys_thinking_switch():
    """The filter job's config carries its policy's model.enable_thinking; its protocol (and so every
    rendered prompt and the report's card) takes it, as training and evaluation do."""
    from toolcall_repro.data.rollouts import make_protocol

    knobs = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 4096}
    assert make_protocol({**knobs, "enable_thinking": True}, 0, "vllm").enable_thinking is True
    assert make_protocol(knobs, 0, "vllm").enable_thinking is None  # unset: the template's default
