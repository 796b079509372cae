"""The units of an experiment: a training run, a score file, a study. Each knows its paths (from its
layout: layout.py, the one author of every results path and manifest key), the rule that makes it and that
rule's manifest; the analysis receives them as plain dicts (`unit()`) and reads them back (`from_unit`).
The experiment (experiment.py) says which of them a config asks for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from toolcall_repro.benchmarks import get_benchmark
from toolcall_repro.layout import Layout, manifest_path


# The rule that writes each kind of score file, by (benchmark, file name): each benchmark's (benchmarks.py).
def score_rule(benchmark: str, name: str) -> str:
    rules = get_benchmark(benchmark).score_rules
    kind = name.removesuffix(".json")
    if kind not in rules:
        raise ValueError(f"benchmark {benchmark!r} writes no {name}; it writes {sorted(rules)}")
    return rules[kind]


@dataclass(frozen=True)
class TrainingRun:
    """One GRPO run: a training set (a setting or a format-study subset), a variant and a seed.

    `seed` None is the run at train.seed, at the plain path every other stage reads; another seed (the
    efficiency experiment) sits in a seed<k> folder beside it.
    """

    run_dir: str
    dataset: str
    variant: str
    seed: int | None = None

    @property
    def key(self) -> str:
        return Layout.training_key(self.dataset, self.variant, self.seed)

    @property
    def dir(self) -> str:
        return Layout(self.run_dir).training_dir(self.dataset, self.variant, self.seed)

    @property
    def summary(self) -> str:
        return self._file("summary")

    @property
    def files(self) -> list[str]:
        """What the analysis reads of the run."""
        return [self._file(kind) for kind in ("summary", "metrics", "curve")]

    def _file(self, kind: str) -> str:
        return Layout(self.run_dir).training_file(self.dataset, self.variant, kind, self.seed)

    @property
    def rule(self) -> str:
        """train_grpo; train_grpo_seed (its `use rule` twin) for a run at another seed."""
        return "train_grpo" if self.seed is None else "train_grpo_seed"

    @property
    def manifest(self) -> str:
        return manifest_path(self.run_dir, self.rule, self.key)

    def unit(self) -> dict:
        """The run as the analysis receives it (its config): what it is and where it lies."""
        return {"dataset": self.dataset, "variant": self.variant, "seed": self.seed, "dir": self.dir,
                "manifest": self.manifest}  # fmt: skip


@dataclass(frozen=True)
class Score:
    """One score file the analysis reads: a benchmark's summary (or seed-variance summary) of a model
    under a protocol; the general-capability check has no protocol."""

    run_dir: str
    benchmark: str
    model: str
    protocol: str | None
    name: str = "summary.json"

    @property
    def path(self) -> str:
        return Layout(self.run_dir).score(self.benchmark, self.model, self.protocol, self.kind)

    @property
    def kind(self) -> str:
        """summary or variance (layout.SCORE_KINDS): the file's name without .json."""
        return self.name.removesuffix(".json")

    @property
    def rule(self) -> str:
        return score_rule(self.benchmark, self.name)

    @property
    def manifest(self) -> str:
        return Layout(self.run_dir).manifest(self.rule, self.model, self.protocol)

    def unit(self) -> dict:
        """The score as the analysis receives it (its config): what it is and where it lies."""
        return {"benchmark": self.benchmark, "model": self.model, "protocol": self.protocol, "kind": self.kind,
                "path": self.path, "manifest": self.manifest}  # fmt: skip


@dataclass(frozen=True)
class Study:
    """A sensitivity study: models x protocols, scored at its seeds on its benchmarks."""

    name: str
    models: tuple[str, ...]
    protocols: tuple[str, ...]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "pairs", tuple((m, p) for m in self.models for p in self.protocols))

    def unit(self) -> dict:
        """The study as the analysis receives it (its config): defaults resolved, pairs by `from_unit`."""
        return {"models": list(self.models), "protocols": list(self.protocols), "seeds": list(self.seeds),
                "benchmarks": list(self.benchmarks)}  # fmt: skip

    @classmethod
    def from_unit(cls, name: str, unit: Mapping) -> Study:
        """A study from its unit, or from a config spec (no seeds or benchmarks: every benchmark)."""
        return cls(name, tuple(unit["models"]), tuple(unit["protocols"]), tuple(unit.get("seeds", ())),
                   tuple(unit.get("benchmarks", ())))  # fmt: skip
