"""The paper's claims (claims.yaml) and the rules that judge them: numbers in, a verdict in plain words out.

A claim's test is fixed in claims.yaml before any run. `Evidence` is what our run measured for it (an
estimate, its interval and n, read from one table by `toolcall_repro.analysis.scorecard`); the verdict
rules below are pure functions of the evidence and the test:

- reproduced: the whole interval lies on the paper's side (of no effect, of a threshold, inside the
  margin of "unchanged") and, where the paper gives a size, the sizes agree: the paper's value inside
  our interval, or ours inside the paper's spread;
- direction only: the whole interval is on the paper's side but the size differs or cannot be compared
  (a stand-in benchmark on a pipeline check);
- not reproduced: the interval excludes the paper's effect: it lies on the other side, or it holds no
  effect and stops short of the paper's size;
- inconclusive: the interval holds both no effect and the paper's size (or a size that cannot be compared);
- no signal: a degenerate measurement that cannot speak either way: one seed (no interval), or an interval
  of no width (every seed gave the same value: a floor, a ceiling, scores that cannot vary);
- not testable at this scale: the run holds no evidence (a study it does not run, a single n), and why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np
import yaml

from toolcall_repro.analysis import stats

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NO_SIGNAL = "no signal"
NOT_TESTABLE = "not testable at this scale"
BEYOND = "beyond the paper"
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED, INCONCLUSIVE, NO_SIGNAL, NOT_TESTABLE, BEYOND)
CONFIDENCE = 0.95


@cache
def load_evidence() -> dict:
    """evidence.yaml, shipped in the package: the committed efficiency evidence every scorecard cites."""
    text = resources.files("toolcall_repro.analysis").joinpath("evidence.yaml").read_text()
    return yaml.safe_load(text)


def evidence_citation(setting: str, evidence: Mapping | None = None) -> str:
    """One line naming the committed efficiency evidence's result for `setting` (commit, archive, verdict)."""
    ev = evidence if evidence is not None else load_evidence()
    row = (ev.get("settings") or {}).get(setting)
    if not row:
        return f"the committed evidence ({ev.get('commit', '?')}) has no {setting} result"
    return (
        f"committed evidence ({ev['result']}, commit {ev['commit']}, archive {ev['archive']}; {ev['doc']}): "
        f"{row['verdict']}, {row['matched_speedup']}; {row['cost']}"
    )


@cache
def load_claims() -> dict:
    """claims.yaml, shipped in the package (the paper's numbers and the tests of its claims)."""
    text = resources.files("toolcall_repro.analysis").joinpath("claims.yaml").read_text()
    return yaml.safe_load(text)


@dataclass(frozen=True)
class Evidence:
    """What the run measured for one claim: estimate with interval (None: no interval) and n."""

    estimate: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    unit: str = ""  # "points", "%", "x"
    detail: str = ""  # what was compared, in words
    missing: str | None = None  # why there is no estimate (the claim is then not testable here)

    @property
    def has_estimate(self) -> bool:
        return self.estimate is not None and math.isfinite(self.estimate)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None and math.isfinite(self.low + self.high)


def absent(reason: str) -> Evidence:
    return Evidence(None, missing=reason)


@dataclass(frozen=True)
class Verdict:
    label: str
    reason: str


# --- statistics: values in, Evidence out -------------------------------------------------------------


def paired_difference(
    baseline: Mapping[int, float], candidate: Mapping[int, float], confidence: float = CONFIDENCE
) -> Evidence:
    """Mean over shared seeds of candidate - baseline, with a t interval over the seeds' differences.

    The seeds pair the runs (the same seed samples both protocols); n = 1 gives no interval, and
    seeds with a missing value on either side are left out.
    """
    seeds = sorted(
        s for s in set(baseline) & set(candidate) if _finite(baseline[s]) and _finite(candidate[s])
    )
    if not seeds:
        return absent("no evaluation seed scored on both sides")
    d = np.array([candidate[s] - baseline[s] for s in seeds], dtype=float)
    est = float(d.mean())
    if len(d) < 2:
        return Evidence(est, n=1)
    half = t_quantile(confidence, len(d) - 1) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return Evidence(est, est - half, est + half, len(d))


def t_quantile(confidence: float, df: int) -> float:
    """Two-sided Student t quantile (scipy: part of the analysis environment's lock)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, df))


def spread_difference(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> Evidence:
    """Peak-to-peak over seeds of `candidate` minus that of `baseline` (the same seeds, in the same order),
    with a percentile bootstrap over seeds (one draw of seeds for both)."""
    a, b = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two equal-length series over the same seeds, got {a.shape} and {b.shape}")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if a.size < 2:
        return absent(f"{a.size} seed(s) scored: a spread needs two")
    est = float(np.ptp(b) - np.ptp(a))
    idx = stats.bootstrap_indices(a.size, n_bootstrap, seed)
    draws = np.ptp(b[idx], axis=1) - np.ptp(a[idx], axis=1)
    lo, hi = np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Evidence(est, float(lo), float(hi), int(a.size))


def share(successes: int, trials: int, confidence: float = CONFIDENCE) -> Evidence:
    """A proportion in percent with its Wilson interval."""
    if trials <= 0:
        return absent("no groups observed")
    iv = stats.wilson_interval(int(successes), int(trials), confidence)
    return Evidence(100 * iv.estimate, 100 * iv.low, 100 * iv.high, int(trials), "%")


def ratio_of_sums(
    numerator: Sequence[float],
    denominator: Sequence[float],
    *,
    n_bootstrap: int = 2000,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> tuple[float, float, float]:
    """sum(numerator) / sum(denominator) with a percentile bootstrap over items (steps); NaN if undefined."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if num.shape != den.shape or num.size == 0 or den.sum() <= 0:
        return math.nan, math.nan, math.nan
    idx = stats.bootstrap_indices(num.size, n_bootstrap, seed)
    sums = den[idx].sum(axis=1)
    draws = np.where(sums > 0, num[idx].sum(axis=1) / np.where(sums > 0, sums, 1.0), np.nan)
    lo, hi = np.nanquantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(num.sum() / den.sum()), float(lo), float(hi)


def normal_difference(
    base: float, rl: float, se_base: float, se_rl: float, confidence: float = CONFIDENCE
) -> tuple:
    """rl - base with a normal interval from two standard errors (independent samples, conservative when
    both were scored on the same documents)."""
    z = stats._z(confidence)
    half = z * math.sqrt(se_base**2 + se_rl**2)
    d = rl - base
    return d, d - half, d + half


# --- the paper's size -------------------------------------------------------------------------------


def paper_size(magnitude: Mapping | None) -> tuple[float, float, float] | None:
    """(value, low, high) of the paper's effect: a `range`, the difference of two `arms` (spread: the root
    sum of squares of the arms' spreads), or a single `value`."""
    if not magnitude:
        return None
    if "range" in magnitude:
        lo, hi = (float(v) for v in magnitude["range"])
        return (lo + hi) / 2, lo, hi
    if "arms" in magnitude:
        (ma, sa), (mb, sb) = magnitude["arms"]
        value = float(mb) - float(ma)
        spread = math.hypot(float(sa), float(sb)) if sa is not None and sb is not None else 0.0
        return value, value - spread, value + spread
    value = float(magnitude["value"])
    return value, value, value


def sizes_agree(ev: Evidence, size: tuple[float, float, float]) -> bool:
    """The paper's value inside our interval, or our estimate inside the paper's spread."""
    value, lo, hi = size
    inside_ours = ev.has_interval and ev.low <= value <= ev.high  # type: ignore[operator]
    return bool(inside_ours or lo <= ev.estimate <= hi)  # type: ignore[operator]


# --- verdict rules ------------------------------------------------------------------------------------


def fmt_evidence(ev: Evidence, digits: int = 1) -> str:
    """'+3.2 [1.0, 5.4] points, n=3' / '+3.2 points, n=1 (no interval)' / 'n/a'."""
    if not ev.has_estimate:
        return "n/a"
    unit = f" {ev.unit}" if ev.unit == "points" else ev.unit
    sign = "+" if ev.unit == "points" else ""
    text = f"{ev.estimate:{sign}.{digits}f}"
    if ev.has_interval:
        text += f" [{ev.low:.{digits}f}, {ev.high:.{digits}f}]"
    text += f"{unit}, n={ev.n}"
    return text if ev.has_interval else text + " (no interval)"


def _interval(ev: Evidence) -> str:
    return f"[{ev.low:.2f}, {ev.high:.2f}]"


def _no_signal(ev: Evidence, null: float | None = None) -> Verdict | None:
    """A measurement that cannot speak: one seed (no interval), or no effect in every seed (an interval of
    no width at `null`: every score equal, as at a floor or a ceiling)."""
    if not ev.has_interval:
        return Verdict(
            NO_SIGNAL, f"n={ev.n}: a single measurement gives no interval (ours {ev.estimate:.2f})"
        )
    if null is not None and ev.low == ev.high == null:
        return Verdict(
            NO_SIGNAL,
            f"every seed gave {null:g} (n={ev.n}): the scores do not move (a floor or a ceiling), so the "
            "measurement says nothing either way",
        )
    return None


def direction_verdict(
    ev: Evidence,
    *,
    sign: int = 1,
    null: float = 0.0,
    magnitude: Mapping | None = None,
    comparable: bool = True,
    stand_in: str = "",
) -> Verdict:
    """An effect with a sign: the whole interval beyond `null` on the side of `sign`, then the size."""
    if not ev.has_estimate:
        return Verdict(NOT_TESTABLE, ev.missing or "no estimate")
    degenerate = _no_signal(ev, null)
    if degenerate:
        return degenerate
    side = "above" if sign > 0 else "below"
    ends = sorted(sign * (v - null) for v in (ev.low, ev.high))  # type: ignore[operator]
    if ends[1] < 0:
        return Verdict(NOT_REPRODUCED, f"the opposite: the interval {_interval(ev)} is not {side} {null:g}")
    size = paper_size(magnitude)
    if ends[0] <= 0:
        holds = f"the interval {_interval(ev)} includes {null:g} (n={ev.n})"
        if size is not None and comparable and ends[1] < sign * (size[1] - null):
            near = size[1] if sign > 0 else size[2]
            return Verdict(NOT_REPRODUCED, f"{holds} and stops short of the paper's {near:.2f}")
        if size is None:
            return Verdict(INCONCLUSIVE, holds)
        if not comparable:
            return Verdict(INCONCLUSIVE, f"{holds}; the size is not comparable: {stand_in}")
        return Verdict(INCONCLUSIVE, f"{holds} and the paper's {size[0]:.2f}")
    where = f"the interval {_interval(ev)} is {side} {null:g}"
    if size is None:
        return Verdict(REPRODUCED, where)
    if not comparable:
        return Verdict(DIRECTION_ONLY, f"{where}; the size is not comparable: {stand_in}")
    if sizes_agree(ev, size):
        return Verdict(REPRODUCED, f"{where}, and the paper's {size[0]:.2f} agrees with ours")
    return Verdict(
        DIRECTION_ONLY,
        f"{where}, but the size differs: ours {ev.estimate:.2f}, the paper's {size[0]:.2f}"
        + (f" (spread {size[1]:.2f} to {size[2]:.2f})" if size[1] < size[2] else ""),
    )


def threshold_verdict(ev: Evidence, *, above: float) -> Verdict:
    """A level: the whole interval above `above`."""
    if not ev.has_estimate:
        return Verdict(NOT_TESTABLE, ev.missing or "no estimate")
    degenerate = _no_signal(ev)
    if degenerate:
        return degenerate
    if ev.low > above:  # type: ignore[operator]
        return Verdict(REPRODUCED, f"the interval {_interval(ev)} is above {above:g}")
    if ev.high <= above:  # type: ignore[operator]
        return Verdict(NOT_REPRODUCED, f"the interval {_interval(ev)} is not above {above:g}")
    return Verdict(INCONCLUSIVE, f"the interval {_interval(ev)} includes {above:g} (n={ev.n})")


def unchanged_verdict(ev: Evidence, *, margin: float) -> Verdict:
    """No change: the whole interval of the change inside (-margin, margin)."""
    if not ev.has_estimate:
        return Verdict(NOT_TESTABLE, ev.missing or "no estimate")
    degenerate = _no_signal(ev, 0.0)
    if degenerate:
        return degenerate
    if -margin < ev.low and ev.high < margin:  # type: ignore[operator]
        return Verdict(REPRODUCED, f"the interval {_interval(ev)} lies within ±{margin:g}")
    if ev.low >= margin or ev.high <= -margin:  # type: ignore[operator]
        return Verdict(NOT_REPRODUCED, f"changed: the interval {_interval(ev)} lies beyond ±{margin:g}")
    return Verdict(INCONCLUSIVE, f"the interval {_interval(ev)} reaches beyond ±{margin:g} (n={ev.n})")


def beyond_verdict(ev: Evidence, null: float = 0.0) -> Verdict:
    """A measurement the paper does not make: its sign in words, no verdict against the paper."""
    if not ev.has_estimate:
        return Verdict(NOT_TESTABLE, ev.missing or "no estimate")
    if not ev.has_interval:
        return Verdict(BEYOND, f"n={ev.n}, no interval")
    if ev.low > null:  # type: ignore[operator]
        return Verdict(BEYOND, f"helps: the interval {_interval(ev)} is above {null:g}")
    if ev.high < null:  # type: ignore[operator]
        return Verdict(BEYOND, f"hurts: the interval {_interval(ev)} is below {null:g}")
    return Verdict(BEYOND, f"no clear effect: the interval {_interval(ev)} includes {null:g}")


def judge(test: Mapping, ev: Evidence, *, comparable: bool = True, stand_in: str = "") -> Verdict:
    """The verdict of one claim's test (claims.yaml) on its evidence."""
    kind = test["kind"]
    if kind == "direction":
        return direction_verdict(
            ev,
            sign=int(test.get("sign", 1)),
            null=float(test.get("no_effect", 0.0)),
            magnitude=test.get("magnitude"),
            comparable=comparable,
            stand_in=stand_in,
        )
    if kind == "threshold":
        return threshold_verdict(ev, above=float(test["above"]))
    if kind == "unchanged":
        return unchanged_verdict(ev, margin=float(test["margin"]))
    if kind == "beyond":
        return beyond_verdict(ev, float(test.get("no_effect", 0.0)))
    raise ValueError(f"unknown test kind {kind!r}; allowed: direction, threshold, unchanged, beyond")


def _finite(v: object) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)
