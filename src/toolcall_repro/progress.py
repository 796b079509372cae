"""Progress lines a person can read in a long job's log: done of total, elapsed time, what remains.

    warm start: 200/800 steps (25%) loss 1.2345, 3m12s elapsed, ~9m36s left

The estimate is the rate so far carried over what remains, elapsed / done * (total - done). Time is
wall-clock (`time.monotonic`): a log line, never a result; nothing here may reach a result file.

A call site picks how often a line appears: `every=N` (a line each time the count crosses a multiple of
N), `every_s=S` (at most one line per S seconds), or neither (`EVERY_S` seconds). A loop that printed a
line also prints its last (the count reaching the total), so a slow loop's log says when it ended; a fast
one prints nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

EVERY_S = 30.0  # seconds between lines when the call site names no rate (tests set 0: a line per update)


def duration(seconds: float) -> str:
    """45s, 3m12s, 2h05m (rounded to the second; hours and minutes past an hour)."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def print_line(text: str) -> None:
    """The default sink: stdout, flushed (a job's stdout is its log file, block-buffered otherwise)."""
    print(text, flush=True)


class Progress:
    """Counts a loop's items and logs progress lines, rate-limited.

    total: items the loop will do (None: unknown, no estimate); label: what the loop is; unit: the items'
    name after the count ("steps"); start: items already done before this process started on them (a
    resumed run), counted in the total but not in the rate; approx: the total is an estimate ("12/~40").
    `update()` advances and logs when due; `advance()` only counts; `status()` and `estimate()` give the
    text for a call site that folds it into a line of its own.
    """

    def __init__(
        self,
        total: int | None,
        label: str,
        log: Callable[[str], object] | None = print_line,
        *,
        unit: str = "",
        every: int | None = None,
        every_s: float | None = None,
        start: int = 0,
        approx: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if every is not None and every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if every is None and every_s is None:
            every_s = EVERY_S
        self.total, self.label, self.log, self.unit = total, label, log, unit
        self.every, self.every_s, self.approx, self.clock = every, every_s, approx, clock
        self.done = self.base = int(start)  # base: items not timed (done before, or skipped)
        self.t0 = self.last_t = clock()
        self.last_done = self.done
        self.lines = 0

    # --- counting -------------------------------------------------------------------------------
    def advance(self, n: int = 1, *, done: int | None = None, total: int | None = None, approx=None) -> None:
        """Count n more items (or set the count to `done`); `total`/`approx` revise the total."""
        self.done = int(done) if done is not None else self.done + int(n)
        if total is not None:
            self.total = int(total)
        if approx is not None:
            self.approx = bool(approx)

    def skip(self, n: int) -> None:
        """Count n items that took no work (an earlier attempt's, read back): not in the rate."""
        self.done += int(n)
        self.base += int(n)

    # --- text -------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.t0

    def remaining_s(self) -> float | None:
        """elapsed / timed items * items left; None without a total or before any timed item."""
        timed = self.done - self.base
        if self.total is None or timed <= 0:
            return None
        return self.elapsed() / timed * max(0, self.total - self.done)

    def status(self, unit: str = "") -> str:
        """`200/800 (25%)`, `12/~40 (30%)`, or `120` without a total; `unit` after the count."""
        named = f" {unit}" if unit else ""
        if self.total is None:
            return f"{self.done}{named}"
        pct = 100 if self.total <= 0 else min(100, 100 * self.done // self.total)
        return f"{self.done}/{'~' if self.approx else ''}{self.total}{named} ({pct}%)"

    def estimate(self) -> str:
        """`3m12s elapsed, ~9m36s left`; the elapsed time alone when there is nothing to estimate from."""
        left = self.remaining_s()
        text = f"{duration(self.elapsed())} elapsed"
        return text if left is None else f"{text}, ~{duration(left)} left"

    def line(self, **extra) -> str:
        """`label: 200/800 steps (25%) loss 1.2345, 3m12s elapsed, ~9m36s left` (extra: `name value`)."""
        details = "".join(f" {k} {v}" for k, v in extra.items())
        return f"{self.label}: {self.status(self.unit)}{details}, {self.estimate()}"

    # --- logging ----------------------------------------------------------------------------------
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total

    def due(self) -> bool:
        """Whether a line is due: the count crossed a multiple of `every` and/or `every_s` seconds
        passed since the last line (both, when both are set); or a loop that logged reached its end."""
        if self.lines and self.finished() and self.last_done < self.done:
            return True
        if self.every is not None and self.done // self.every <= self.last_done // self.every:
            return False
        return self.every_s is None or self.clock() - self.last_t >= self.every_s

    def update(
        self, n: int = 1, *, done: int | None = None, total: int | None = None, force: bool = False, **extra
    ) -> str | None:
        """Count n items (or set `done`), then log a line when due (or `force`); returns the line logged."""
        self.advance(n, done=done, total=total)
        if not (force or self.due()):
            return None
        text = self.line(**extra)
        self.last_done, self.last_t = self.done, self.clock()
        self.lines += 1
        if self.log is not None:
            self.log(text)
        return text
