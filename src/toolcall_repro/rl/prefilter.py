"""Online pre-rollout filter: skip prompts whose rollouts were all correct for k epochs in a row.

Paper gap closed here: the paper builds each epoch's active set from the previous one, so a skipped
prompt never returns although the text calls the skip temporary. This filter builds every epoch's
active set from the full set; with `semantics="temporary"` skipped prompts are re-probed (after
`probe_every` skipped epochs and/or a seeded `probe_fraction` per epoch) so a streak can break;
`semantics="permanent"` (no probes) reproduces the paper's formula on purpose.
All-wrong streaks are tracked and reported; they are skipped only if `all_wrong_k` is set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from toolcall_repro.rl.advantage import GROUP_TYPES, as_rewards, group_type

SEMANTICS = ("temporary", "permanent")


def filter_problems(
    k: int | None,
    probe_every: int | None = None,
    probe_fraction: float = 0.0,
    semantics: str = "temporary",
    all_wrong_k: int | None = None,
) -> list[str]:
    """What is wrong with a filter's settings (empty: nothing); the one home of the probe schedule rule,
    read by `StreakFilter` and by the config check before any job (toolcall_repro.runconfig)."""
    out = []
    for name, value in (("k", k), ("all_wrong_k", all_wrong_k), ("probe_every", probe_every)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            out.append(f"{name} must be None or an int >= 1, got {value!r}")
    if isinstance(probe_fraction, bool) or not isinstance(probe_fraction, (int, float)):
        return [*out, f"probe_fraction must be a number in [0, 1], got {probe_fraction!r}"]
    if not 0.0 <= float(probe_fraction) <= 1.0:
        out.append(f"probe_fraction must be in [0, 1], got {probe_fraction}")
    if semantics not in SEMANTICS:
        out.append(f"semantics must be one of {SEMANTICS}, got {semantics!r}")
    probes = probe_every is not None or probe_fraction > 0
    skips = k is not None or all_wrong_k is not None
    if semantics == "permanent" and probes:
        out.append("semantics='permanent' never re-probes: set probe_every=None, probe_fraction=0")
    if semantics == "temporary" and skips and not probes:
        out.append(
            "semantics='temporary' needs probe_every or probe_fraction > 0: "
            "without probes a skip never ends (use semantics='permanent' for that)"
        )
    return out


@dataclass
class PromptState:
    all_correct_streak: int = 0
    all_wrong_streak: int = 0
    skipped_epochs: int = 0  # consecutive epochs skipped since the last observation
    last_mean_reward: float | None = None


def _empty_transitions() -> dict[str, dict[str, int]]:
    return {a: dict.fromkeys(GROUP_TYPES, 0) for a in GROUP_TYPES}


class StreakFilter:
    """Per-prompt all-correct / all-wrong streaks over epochs and the active set they imply.

    Call `active_set(epoch, all_ids)` once an epoch (repeat calls return the same set), then
    `update(epoch, {prompt_id: rewards})` for the groups generated in that epoch, in any number
    of calls. `k=None` never skips: it only tracks group types and transitions (vanilla runs).
    """

    def __init__(
        self,
        k: int | None,
        probe_every: int | None = None,
        probe_fraction: float = 0.0,
        semantics: str = "temporary",
        seed: int = 0,
        all_wrong_k: int | None = None,
        correct: float = 1.0,
    ) -> None:
        problems = filter_problems(k, probe_every, probe_fraction, semantics, all_wrong_k)
        if problems:
            raise ValueError(problems[0])
        self.k, self.all_wrong_k = k, all_wrong_k
        self.probe_every, self.probe_fraction = probe_every, float(probe_fraction)
        self.semantics, self.seed, self.correct = semantics, int(seed), float(correct)
        self._prompts: dict[str, PromptState] = {}
        self._epoch: int | None = None
        self._total = 0
        self._active: list[str] = []
        self._skipped: list[str] = []
        self._probed: list[str] = []
        self._observed: dict[str, str] = {}  # this epoch's group type per prompt
        self._previous: dict[str, str] = {}  # the previous epoch's, for transitions
        self._transitions = _empty_transitions()
        self._probe_observed = 0
        self._probe_still_correct = 0
        self._cum_probe_observed = 0
        self._cum_probe_still_correct = 0
        self._cum_skips = 0

    # --- the active set -------------------------------------------------------------------------
    def _is_candidate(self, st: PromptState) -> bool:
        return (self.k is not None and st.all_correct_streak >= self.k) or (
            self.all_wrong_k is not None and st.all_wrong_streak >= self.all_wrong_k
        )

    def active_set(self, epoch: int, all_ids: Sequence[str]) -> list[str]:
        """The prompts to generate for in `epoch`, in `all_ids` order, built from the full set."""
        ids = [str(i) for i in all_ids]
        if len(set(ids)) != len(ids):
            raise ValueError("all_ids has duplicate prompt ids")
        if self._epoch is not None and epoch == self._epoch:
            if len(ids) != self._total:
                raise ValueError(f"epoch {epoch} active set already built over {self._total} prompts")
            return list(self._active)
        if self._epoch is not None and epoch < self._epoch:
            raise ValueError(f"epoch {epoch} is before the current epoch {self._epoch}")
        self._previous = dict(self._observed) if self._epoch is not None and epoch == self._epoch + 1 else {}
        candidates = [i for i in ids if i in self._prompts and self._is_candidate(self._prompts[i])]
        probed: set[str] = set()
        if self.semantics == "temporary" and candidates:
            if self.probe_every is not None:
                probed |= {i for i in candidates if self._prompts[i].skipped_epochs >= self.probe_every}
            if self.probe_fraction > 0:
                # Seeded by (seed, epoch) alone so a resumed run draws the same probes.
                rng = np.random.default_rng([self.seed, int(epoch)])
                draws = rng.random(len(candidates))
                probed |= {i for i, u in zip(candidates, draws, strict=True) if u < self.probe_fraction}
        skipped = set(candidates) - probed
        for i in skipped:
            self._prompts[i].skipped_epochs += 1
        for i in probed:
            self._prompts[i].skipped_epochs = 0
        self._epoch, self._total = int(epoch), len(ids)
        self._active = [i for i in ids if i not in skipped]
        self._skipped = [i for i in ids if i in skipped]
        self._probed = [i for i in ids if i in probed]
        self._observed = {}
        self._transitions = _empty_transitions()
        self._probe_observed = self._probe_still_correct = 0
        self._cum_skips += len(skipped)
        return list(self._active)

    # --- outcomes -------------------------------------------------------------------------------
    def update(self, epoch: int, results: Mapping[str, Sequence[float]]) -> None:
        """Record the groups generated in `epoch`: streaks, probe outcomes, transitions."""
        if self._epoch is None or epoch != self._epoch:
            raise ValueError(f"update for epoch {epoch} but the active set is for epoch {self._epoch}")
        active, probed = set(self._active), set(self._probed)
        for pid in results:
            if str(pid) not in active:
                raise ValueError(f"prompt {pid!r} is not in epoch {epoch}'s active set")
            if str(pid) in self._observed:
                raise ValueError(f"prompt {pid!r} was already observed in epoch {epoch}")
        for pid, rewards in results.items():
            pid = str(pid)
            r = as_rewards(rewards)
            kind = group_type(r, self.correct)
            st = self._prompts.setdefault(pid, PromptState())
            st.all_correct_streak = st.all_correct_streak + 1 if kind == "all_correct" else 0
            st.all_wrong_streak = st.all_wrong_streak + 1 if kind == "all_wrong" else 0
            st.skipped_epochs = 0
            st.last_mean_reward = float(r.mean())
            self._observed[pid] = kind
            if pid in probed:
                self._probe_observed += 1
                self._cum_probe_observed += 1
                still = kind == "all_correct"
                self._probe_still_correct += still
                self._cum_probe_still_correct += still
            if pid in self._previous:
                self._transitions[self._previous[pid]][kind] += 1

    # --- reporting ------------------------------------------------------------------------------
    def skipped_reward_mean(self) -> float | None:
        """Mean last-observed reward of this epoch's skipped prompts (None when nothing is skipped)."""
        values = [self._prompts[i].last_mean_reward for i in self._skipped]
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None

    def stats(self) -> dict:
        """This epoch's filter report; `precision` = probed prompts still all-correct (cumulative)."""
        streak_ac = [s.all_correct_streak for s in self._prompts.values()]
        streak_aw = [s.all_wrong_streak for s in self._prompts.values()]
        k = self.k if self.k is not None else 1
        return {
            "epoch": self._epoch,
            "total": self._total,
            "active": len(self._active),
            "skipped": len(self._skipped),
            "coverage": len(self._active) / self._total if self._total else float("nan"),
            "probed": len(self._probed),
            "probe_observed": self._probe_observed,
            "probe_still_correct": self._probe_still_correct,
            "precision": (
                self._cum_probe_still_correct / self._cum_probe_observed if self._cum_probe_observed else None
            ),
            "cumulative_skips": self._cum_skips,
            "observed": len(self._observed),
            "observed_types": {t: sum(v == t for v in self._observed.values()) for t in GROUP_TYPES},
            "all_correct_streak_ge_k": sum(s >= k for s in streak_ac),
            "all_wrong_streak_ge_k": sum(s >= k for s in streak_aw),
            "transitions": {a: dict(b) for a, b in self._transitions.items()},
        }

    # --- checkpointing --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """JSON-serialisable state; `load_state_dict` on a filter with the same settings restores it."""
        return {
            "config": self._config(),
            "prompts": {pid: asdict(st) for pid, st in self._prompts.items()},
            "epoch": self._epoch,
            "total": self._total,
            "active": list(self._active),
            "skipped": list(self._skipped),
            "probed": list(self._probed),
            "observed": dict(self._observed),
            "previous": dict(self._previous),
            "transitions": {a: dict(b) for a, b in self._transitions.items()},
            "counters": [
                self._probe_observed,
                self._probe_still_correct,
                self._cum_probe_observed,
                self._cum_probe_still_correct,
                self._cum_skips,
            ],
        }

    def load_state_dict(self, state: Mapping) -> None:
        if dict(state["config"]) != self._config():
            raise ValueError(f"filter settings differ: saved {state['config']} vs {self._config()}")
        self._prompts = {pid: PromptState(**st) for pid, st in state["prompts"].items()}
        self._epoch = state["epoch"]
        self._total = int(state["total"])
        self._active, self._skipped = list(state["active"]), list(state["skipped"])
        self._probed = list(state["probed"])
        self._observed, self._previous = dict(state["observed"]), dict(state["previous"])
        self._transitions = {a: dict(b) for a, b in state["transitions"].items()}
        (
            self._probe_observed,
            self._probe_still_correct,
            self._cum_probe_observed,
            self._cum_probe_still_correct,
            self._cum_skips,
        ) = (int(c) for c in state["counters"])

    def _config(self) -> dict:
        return {
            "k": self.k,
            "all_wrong_k": self.all_wrong_k,
            "probe_every": self.probe_every,
            "probe_fraction": self.probe_fraction,
            "semantics": self.semantics,
            "seed": self.seed,
            "correct": self.correct,
        }
