import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcall_repro.rl import StreakFilter

IDS = [f"p{i}" for i in range(6)]
OK, BAD, MIX = [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]


def run_epoch(f, epoch, outcome, ids=IDS):
    active = f.active_set(epoch, ids)
    f.update(epoch, {pid: outcome(pid) for pid in active})
    return active


def test_all_correct_streak_k_skips_and_probe_every_breaks_it():
    f = StreakFilter(k=2, probe_every=2, semantics="temporary")
    assert run_epoch(f, 0, lambda p: OK if p == "p0" else MIX) == IDS
    assert "p0" in run_epoch(f, 1, lambda p: OK if p == "p0" else MIX)
    assert "p0" not in f.active_set(2, IDS)  # streak 2 >= k
    assert f.stats()["skipped"] == 1 and f.stats()["coverage"] == pytest.approx(5 / 6)
    f.update(2, {p: MIX for p in IDS if p != "p0"})
    assert "p0" not in run_epoch(f, 3, lambda p: MIX)
    active = f.active_set(4, IDS)  # skipped 2 epochs -> probed
    assert "p0" in active and f.stats()["probed"] == 1
    f.update(4, {p: (MIX if p == "p0" else OK) for p in active})  # the probe fails
    s = f.stats()
    assert s["probe_observed"] == 1 and s["probe_still_correct"] == 0 and s["precision"] == 0.0
    assert "p0" in f.active_set(5, IDS)  # streak broken: back in the active set


def test_successful_probe_keeps_the_skip_and_counts_precision():
    f = StreakFilter(k=1, probe_every=1)
    run_epoch(f, 0, lambda p: OK)
    assert f.active_set(1, IDS) == []
    f.update(1, {})
    assert f.active_set(2, IDS) == IDS  # all probed after one skipped epoch
    f.update(2, {p: OK for p in IDS})
    assert f.stats()["precision"] == 1.0
    assert f.active_set(3, IDS) == []


def test_permanent_never_returns():
    f = StreakFilter(k=1, semantics="permanent")
    run_epoch(f, 0, lambda p: OK if p in ("p1", "p2") else MIX)
    for e in range(1, 8):
        active = run_epoch(f, e, lambda p: MIX)
        assert "p1" not in active and "p2" not in active and len(active) == 4


def test_tracking_only_filter_never_skips_and_counts_transitions():
    f = StreakFilter(k=None)
    run_epoch(f, 0, lambda p: OK if p < "p3" else BAD)
    run_epoch(f, 1, lambda p: {"p0": OK, "p1": MIX, "p2": BAD}.get(p, BAD))
    s = f.stats()
    assert s["skipped"] == 0 and s["active"] == 6
    t = s["transitions"]
    assert t["all_correct"] == {"all_correct": 1, "all_wrong": 1, "mixed": 1}
    assert t["all_wrong"]["all_wrong"] == 3
    assert s["all_wrong_streak_ge_k"] == 4


def test_all_wrong_streak_skip_is_opt_in():
    f = StreakFilter(k=None, all_wrong_k=1, probe_every=3)
    run_epoch(f, 0, lambda p: BAD if p == "p5" else MIX)
    assert "p5" not in f.active_set(1, IDS)


def test_probe_fraction_is_seeded_by_epoch():
    ids = [f"q{i}" for i in range(400)]

    def probes(seed, epoch):
        f = StreakFilter(k=1, probe_fraction=0.25, seed=seed)
        run_epoch(f, epoch, lambda p: OK, ids)
        f.active_set(epoch + 1, ids)
        return f.stats()["probed"], set(f.active_set(epoch + 1, ids))

    n1, a1 = probes(0, 0)
    n2, a2 = probes(0, 0)
    assert a1 == a2 and 60 < n1 < 140
    assert probes(1, 0)[1] != a1


def test_active_set_is_idempotent_within_an_epoch():
    f = StreakFilter(k=1, probe_fraction=0.5, seed=2)
    run_epoch(f, 0, lambda p: OK)
    a = f.active_set(1, IDS)
    assert f.active_set(1, IDS) == a
    assert f.stats()["cumulative_skips"] == 6 - len(a)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"k": 0}, "k must be"),
        ({"k": 1, "probe_fraction": 1.5}, "probe_fraction"),
        ({"k": 1, "semantics": "forever"}, "semantics"),
        ({"k": 1, "semantics": "permanent", "probe_every": 2}, "never re-probes"),
        ({"k": 1}, "needs probe_every"),
    ],
)
def test_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StreakFilter(**kwargs)


def test_bad_updates_are_errors():
    f = StreakFilter(k=1, semantics="permanent")
    run_epoch(f, 0, lambda p: OK if p == "p0" else MIX)
    f.active_set(1, IDS)
    with pytest.raises(ValueError, match="not in epoch 1's active set"):
        f.update(1, {"p0": OK})
    f.update(1, {"p1": OK})
    with pytest.raises(ValueError, match="already observed"):
        f.update(1, {"p1": OK})
    with pytest.raises(ValueError, match="epoch 2"):
        f.update(2, {"p2": OK})
    with pytest.raises(ValueError, match="before the current epoch"):
        f.active_set(0, IDS)
    with pytest.raises(ValueError, match="duplicate"):
        f.active_set(2, ["a", "a"])


outcomes = st.sampled_from(["ok", "bad", "mix"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(outcomes, min_size=6, max_size=6), min_size=1, max_size=6), st.integers(0, 3))
def test_active_set_is_built_from_the_full_set(history, seed):
    f = StreakFilter(k=1, probe_every=2, probe_fraction=0.3, seed=seed)
    table = {"ok": OK, "bad": BAD, "mix": MIX}
    streak = dict.fromkeys(IDS, 0)
    for e, row in enumerate(history):
        active = f.active_set(e, IDS)
        s = f.stats()
        assert s["active"] + s["skipped"] == len(IDS)
        # a prompt is out only if its all-correct streak reached k: never by accident
        assert all(streak[p] >= 1 for p in IDS if p not in active)
        f.update(e, {p: table[row[i]] for i, p in enumerate(IDS) if p in active})
        for i, p in enumerate(IDS):
            if p in active:
                streak[p] = streak[p] + 1 if row[i] == "ok" else 0


def test_state_dict_round_trip_reproduces_the_future():
    def drive(f, epochs, rng):
        seen = []
        for e in epochs:
            active = f.active_set(e, IDS)
            f.update(e, {p: [float(x) for x in rng.integers(0, 2, 2)] for p in active})
            seen.append((active, f.stats()))
        return seen

    a = StreakFilter(k=1, probe_fraction=0.4, seed=5)
    drive(a, range(3), np.random.default_rng(0))
    state = json.loads(json.dumps(a.state_dict()))
    b = StreakFilter(k=1, probe_fraction=0.4, seed=5)
    b.load_state_dict(state)
    assert drive(a, range(3, 7), np.random.default_rng(1)) == drive(b, range(3, 7), np.random.default_rng(1))
    with pytest.raises(ValueError, match="settings differ"):
        StreakFilter(k=2, probe_fraction=0.4, seed=5).load_state_dict(state)
