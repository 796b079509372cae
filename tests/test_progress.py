"""Progress lines: exact text on a fake clock, rate limits, the edges (nothing done, done, no total)."""

import pytest

from toolcall_repro.progress import Progress, duration


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def make(total, clock, **kw):
    lines = []
    return Progress(total, kw.pop("label", "warm start"), lines.append, clock=clock, **kw), lines


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.4, "0s"), (59.4, "59s"), (60, "1m00s"), (192, "3m12s"), (3599, "59m59s"), (3600, "1h00m"),
     (7500, "2h05m"), (90000, "25h00m"), (-3, "0s")],
)  # fmt: skip
def test_duration_reads_as_a_person_writes_it(seconds, text):
    assert duration(seconds) == text


def test_the_line_says_done_of_total_elapsed_and_the_estimate_left():
    clock = Clock()
    p, lines = make(800, clock, unit="steps", every=200)
    for _ in range(200):
        clock.t += 0.96
        p.update(loss="1.2345")
    assert lines == ["warm start: 200/800 steps (25%) loss 1.2345, 3m12s elapsed, ~9m36s left"]
    assert p.remaining_s() == pytest.approx(576.0)


def test_every_n_items_is_one_line_per_multiple_of_n():
    clock = Clock()
    p, lines = make(10, clock, every=4)
    logged = []
    for i in range(1, 11):
        clock.t += 1
        if p.update() is not None:
            logged.append(i)
    assert logged == [4, 8, 10]  # 10: a loop that logged also logs its end
    assert lines[-1] == "warm start: 10/10 (100%), 10s elapsed, ~0s left"
    assert lines[0] == "warm start: 4/10 (40%), 4s elapsed, ~6s left"


def test_every_s_is_at_most_one_line_per_that_many_seconds():
    clock = Clock()
    p, lines = make(22, clock, every_s=30)
    logged = []
    for i in range(1, 23):
        clock.t += 7  # 7s an item: 30s have passed after 5 items (35s)
        if p.update() is not None:
            logged.append(i)
    assert logged == [5, 10, 15, 20, 22]  # 22: the end of a loop that logged
    assert lines[0] == "warm start: 5/22 (22%), 35s elapsed, ~1m59s left"


def test_both_limits_must_pass_and_a_forced_line_always_appears():
    clock = Clock()
    p, lines = make(100, clock, every=10, every_s=60)
    for _ in range(10):
        clock.t += 1
        p.update()
    assert lines == []  # 10 items but only 10 seconds
    assert p.update(force=True) == "warm start: 11/100 (11%), 10s elapsed, ~1m21s left"
    for _ in range(9):
        clock.t += 10
        p.update()
    assert lines[1:] == ["warm start: 20/100 (20%), 1m40s elapsed, ~6m40s left"]


def test_a_quiet_loop_stays_quiet_at_its_end():
    clock = Clock()
    p, lines = make(3, clock, every_s=30)
    for _ in range(3):
        clock.t += 1
        p.update()
    assert lines == []  # a fast loop prints nothing, not even its end


def test_nothing_done_yet_has_no_estimate_and_a_zero_total_is_complete():
    clock = Clock()
    p, _ = make(800, clock, unit="steps")
    clock.t += 5
    assert p.line() == "warm start: 0/800 steps (0%), 5s elapsed"
    empty, _ = make(0, clock)
    assert empty.line() == "warm start: 0/0 (100%), 0s elapsed" and empty.finished()


def test_an_unknown_total_counts_without_an_estimate():
    clock = Clock()
    p, lines = make(None, clock, label="bfcl generation", unit="entries", every=50)
    for _ in range(120):
        clock.t += 1.6
        p.update()
    assert lines == [
        "bfcl generation: 50 entries, 1m20s elapsed",
        "bfcl generation: 100 entries, 2m40s elapsed",
    ]
    assert p.remaining_s() is None and not p.finished()


def test_a_resumed_or_reused_part_counts_in_the_total_not_in_the_pace():
    clock = Clock()
    p, _ = make(100, clock, start=40, approx=True)
    clock.t += 30
    p.advance(10)  # 10 items in 30s: 3s each, 50 left
    assert p.status() == "50/~100 (50%)" and p.estimate() == "30s elapsed, ~2m30s left"
    q, _ = make(100, clock)
    q.skip(60)  # read back from an earlier attempt
    clock.t += 20
    q.advance(10)
    assert q.estimate() == "20s elapsed, ~1m00s left"


def test_the_total_can_be_revised_and_no_log_means_no_output():
    clock = Clock()
    p = Progress(None, "grpo", None, clock=clock, every=1)
    clock.t += 12
    assert p.update(done=3, total=8) == "grpo: 3/8 (37%), 12s elapsed, ~20s left"


def test_the_default_rate_is_the_module_setting(monkeypatch):
    import toolcall_repro.progress as progress

    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    p, lines = make(2, Clock())
    p.update()
    assert lines == ["warm start: 1/2 (50%), 0s elapsed, ~0s left"]
    with pytest.raises(ValueError, match="every"):
        Progress(2, "x", every=0)
