import pytest

from toolcall_repro.rl import STEP_KEYS, TRANSITION_KEYS, StreakFilter, predicted_speedup, step_metrics
from toolcall_repro.rl.metrics import full_set_reward, without_timings

TIMINGS = {"gen": 1.0, "update_actor": 2.0, "optimizer": 0.1, "step": 3.2}


def make(groups, fs=None, skipped=None, timings=TIMINGS):
    return step_metrics(
        step=3,
        epoch=1,
        groups=groups,
        filter_stats=fs,
        skipped_reward_mean=skipped,
        gen_tokens=10,
        update_tokens=30,
        total_num_tokens=40,
        gen_rows=4,
        update_rows=2,
        timings=timings,
        cumulative_s=9.0,
        cumulative_device_s=8.0,
    )


def test_keys_and_values_without_filter():
    m = make([[1, 1], [0, 1]])
    assert set(m) == set(STEP_KEYS) | set(TRANSITION_KEYS)
    assert m["group/all_correct_frac"] == 0.5 and m["group/mixed_frac"] == 0.5
    assert m["reward/active_mean"] == 0.75 and m["reward/full_mean"] == 0.75
    assert m["filter/coverage"] == 1.0 and m["filter/skipped"] == 0
    assert "timing_s/gen" not in without_timings(m) and "step" in without_timings(m)


def test_filter_stats_flow_into_the_line():
    f = StreakFilter(k=1, probe_every=3)
    ids = ["a", "b", "c", "d"]
    f.active_set(0, ids)
    f.update(0, {"a": [1, 1], "b": [0, 1], "c": [0, 1], "d": [0, 0]})
    f.active_set(1, ids)
    m = make([[0, 1]], f.stats(), f.skipped_reward_mean())
    assert m["filter/skipped"] == 1 and m["filter/active"] == 3 and m["filter/coverage"] == 0.75
    # skipped prompt counted at its last observed reward (1.0)
    assert m["reward/full_mean"] == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)


def test_full_set_reward_unknown_and_errors():
    assert full_set_reward(0.5, 0.5, None) is None
    with pytest.raises(ValueError, match="timings lacks"):
        make([[1]], timings={"gen": 1})
    with pytest.raises(ValueError, match="at least one group"):
        make([])


def test_predicted_speedup():
    assert predicted_speedup(0.0, 0.5, 8, 8) == 1.0
    assert predicted_speedup(0.5, 0.0, 4, 8) == 2.0
    # update-only with m = n/2: 1 / (0.5 + 0.25)
    assert predicted_speedup(0.0, 1.0, 4, 8) == 2.0
    assert predicted_speedup(0.2, 0.6, 4, 8) == pytest.approx(1 / (0.8 * 0.4 + 0.8 * 0.6 * 0.5))
    with pytest.raises(ValueError):
        predicted_speedup(1.0, 0.5, 4, 8)
    with pytest.raises(ValueError):
        predicted_speedup(0.1, 0.5, 9, 8)


def test_epoch_report_weights_steps_by_their_groups_and_keeps_the_filter_counts():
    from toolcall_repro.rl.metrics import epoch_report

    def line(epoch, groups, skipped):
        return {
            **step_metrics(
                step=1,
                epoch=epoch,
                groups=groups,
                filter_stats={"skipped": skipped, "active": 4, "coverage": 4 / (4 + skipped)},
                skipped_reward_mean=1.0,
                gen_tokens=1,
                update_tokens=1,
                total_num_tokens=2,
                gen_rows=2 * len(groups),
                update_rows=2 * len(groups),
                timings={"gen": 1.0, "update_actor": 1.0, "optimizer": 0.0, "step": 2.0},
                cumulative_s=0.0,
                cumulative_device_s=0.0,
            ),
        }

    ac, aw, mx = [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]
    # epoch 0: a step of 3 groups (2 all-correct, 1 mixed) and a step of 1 (all-wrong): 4 groups in all
    rep = epoch_report([line(0, [ac, ac, mx], 0), line(0, [aw], 0), line(1, [mx, mx], 2)])
    assert [r["groups"] for r in rep] == [4, 2]
    assert (rep[0]["all_correct_frac"], rep[0]["all_wrong_frac"], rep[0]["mixed_frac"]) == (0.5, 0.25, 0.25)
    assert rep[1]["mixed_frac"] == 1.0 and rep[1]["skipped"] == 2 and rep[1]["coverage"] == 4 / 6
    assert rep[0]["steps"] == 2 and "all_wrong_streak_ge_k" in rep[0]
