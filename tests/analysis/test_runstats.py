from __future__ import annotations

import pandas as pd
import pytest

from toolcall_repro.analysis import runstats


@pytest.fixture
def frame(toy):
    return lambda **kw: pd.DataFrame(toy.train_metrics(**kw))


def test_filter_rate_counts_each_epoch_once(frame):
    # 3 steps an epoch, 2 of 8 prompts skipped each epoch: rate 2/8 whatever the steps per epoch
    assert (
        runstats.filter_rate(frame(steps_per_epoch=3, epochs=2, skip=2, gen_s=1, update_s=1, m=8, n=8))
        == 0.25
    )
    assert (
        runstats.filter_rate(frame(steps_per_epoch=1, epochs=2, skip=0, gen_s=1, update_s=1, m=8, n=8)) == 0.0
    )


def test_totals_update_share_and_kept_fraction(frame):
    t = runstats.run_totals(frame(steps_per_epoch=2, epochs=2, skip=0, gen_s=1.0, update_s=3.0, m=4, n=8))
    assert t["steps"] == 4 and t["update_share"] == pytest.approx(0.75)
    assert t["kept_fraction"] == pytest.approx(0.5)
    assert t["gen_tokens"] == 4 * 100 * 4 * 8 and t["update_tokens"] == 4 * 150 * 4 * 4


def test_group_fractions_long_format(frame):
    g = runstats.group_fractions(frame(steps_per_epoch=1, epochs=2, skip=0, gen_s=1, update_s=1, m=8, n=8))
    per = g[g["step"] == 0].set_index("group_type")["fraction"]
    assert per.to_dict() == pytest.approx({"all_correct": 0.5, "all_wrong": 0.25, "mixed": 0.25})


def test_retention_from_transitions_and_probes(frame):
    m = frame(steps_per_epoch=2, epochs=3, skip=2, gen_s=1, update_s=1, m=8, n=8)
    r = runstats.retention_one_epoch(m)
    assert list(r["epoch"]) == [1, 2] and list(r["p"]) == pytest.approx(
        [0.75, 0.75]
    )  # epoch 0 has no history
    p = runstats.probe_precision(m, k=1)
    assert list(p["p"]) == [0.5, 0.5] and set(p["estimator"]) == {"probes"}


def test_missing_keys_are_named():
    with pytest.raises(KeyError, match="timing_s/update_actor"):
        runstats.update_share(pd.DataFrame({"timing_s/step": [1.0]}))
    with pytest.raises(KeyError, match="timing_cpu_s/update_actor"):
        runstats.update_share(pd.DataFrame({"timing_s/step": [1.0], "timing_cpu_s/step": [1.0]}))


def test_costs_use_cpu_seconds_where_the_run_recorded_them(frame):
    # The local engine records both clocks; its wall seconds grow with other load and pauses.
    m = frame(steps_per_epoch=2, epochs=2, skip=0, gen_s=1.0, update_s=3.0, m=4, n=8)
    assert runstats.clock(m) == "timing_s"
    for phase in ("gen", "update_actor", "optimizer", "step"):
        m[f"timing_cpu_s/{phase}"] = m[f"timing_s/{phase}"]
    m["timing_s/gen"] *= 7.0  # a job stopped while it generated: wall says the update share is small
    m["timing_s/step"] = m["timing_s/gen"] + m["timing_s/update_actor"] + m["timing_s/optimizer"]
    assert runstats.clock(m) == "timing_cpu_s"
    t = runstats.run_totals(m)
    assert t["update_share"] == pytest.approx(0.75) and t["step_s"] == pytest.approx(16.0)
    assert list(runstats.step_costs(m)["gen_s"]) == [1.0] * 4
    assert list(runstats.step_seconds(m)) == [4.0] * 4


def test_step_costs_prompt_tokens_per_row(frame):
    c = runstats.step_costs(frame(steps_per_epoch=1, epochs=2, skip=0, gen_s=1, update_s=2, m=8, n=8))
    assert list(c["prompt_tokens_per_row"]) == pytest.approx([50.0, 100.0])
