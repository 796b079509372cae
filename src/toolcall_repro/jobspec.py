"""A job as its rule declares it: the spec the rule's params write and the `Job` the job entry reads.

Every rule's body is the same line, `python -m toolcall_repro.job {params.job:q} {params.files:q} >
{log} 2>&1` (job.py runs it). `params.job` (`job_param`, through `job()` in workflow/rules/common.smk)
says what runs: stage, config, seeds, options, a function of the wildcards alone, so Snakemake's params
rerun trigger records it (a param that reads input or output is "derived" and not recorded).
`params.files` (`files_param`) adds the rule's own `input`, `output` and `resources`. Together, one job
as JSON:

    {"stage": "train_grpo",           # the rule's own name, or X's for `use rule X as Y` (the sheet's)
     "rule": "train_grpo_seed",       # only a `use rule X as Y` twin names itself: else rule = stage
     "input": {"train": "...parquet", "samples": ["...", "..."]},   # the rule's named inputs
     "output": {"summary": "...", "manifest": "..."},              # the rule's named outputs
     "files": {"input": [...], "output": [...]},                   # every path, named or not
     "config": {...},                 # the config subtree the stage reads (and the manifest records)
     "seeds": {"train": 0},           # every seed the job uses
     "options": {"threads": 1},       # what is not config: thread counts, backends, launcher paths
     "gpus": 0,                       # GPUs the job holds (the manifest's device seconds)
     "cuda": 13}                      # the GPU envs' CUDA major (engines.cuda): a GPU job's driver check
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

# The stages (stage -> the module of its function) are the job sheet's (sheet.py): a stage is named as its
# rule and runs the function of that name; a `use rule X as Y` twin runs X's. A benchmark registered
# outside the package (benchmarks.py) names its stage's module in options.module.
from toolcall_repro.sheet import STAGES


class JobError(ValueError):
    """A spec the entry cannot run: names the key and what is allowed."""


@dataclass(frozen=True)
class Job:
    """One job as its rule declared it (see the module docstring for the JSON)."""

    rule: str
    stage: str
    input: dict = field(default_factory=dict)
    output: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    config: object = None
    seeds: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    gpus: int = 0
    cuda: int | None = None  # engines.cuda (params.files); None: gpu_driver's default (a spec made by hand)

    @classmethod
    def from_json(cls, text: str, files: str | None = None) -> Job:
        """A job from its spec, and the rule's files when they come apart (the spec's keys win). The rule
        is the stage's name unless the spec names a twin."""
        raw: dict = {}
        for part in (files, text):
            if part is None:
                continue
            try:
                doc = json.loads(part)
            except json.JSONDecodeError as exc:
                raise JobError(f"job spec is not JSON: {exc}") from None
            if not isinstance(doc, dict):
                raise JobError(f"job spec must be a JSON object, got {type(doc).__name__}")
            raw.update(doc)
        raw.setdefault("rule", raw.get("stage"))
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise JobError(f"job spec: unknown key(s) {unknown}; allowed: {sorted(cls.__dataclass_fields__)}")
        for key in ("rule", "stage"):
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise JobError(f"job spec: {key!r} must be a non-empty string, got {raw.get(key)!r}")
        module = (raw.get("options") or {}).get("module")
        if raw["stage"] not in STAGES and not module:
            raise JobError(f"job spec: stage {raw['stage']!r} is not one of {sorted(STAGES)}")
        return cls(**raw)

    # --- the rule's paths -----------------------------------------------------------------------------

    def path(self, name: str, kind: str = "input") -> str:
        """The one path of a named input (or output): an error if it is missing or a list."""
        value = self._named(name, kind)
        if not isinstance(value, str):
            raise JobError(f"{self.rule}: {kind} {name!r} is a list of {len(value)}, expected one path")
        return value

    def paths(self, name: str, kind: str = "input") -> list[str]:
        """Every path of a named input (or output): a single path becomes a list of one."""
        value = self._named(name, kind, default=[])
        return [value] if isinstance(value, str) else list(value)

    def out(self, name: str) -> str:
        return self.path(name, "output")

    def option(self, name: str, default: object = ...) -> object:
        if name in self.options:
            return self.options[name]
        if default is ...:
            raise JobError(f"{self.rule}: option {name!r} is not set; set: {sorted(self.options)}")
        return default

    def seed(self, name: str) -> int:
        if name not in self.seeds:
            raise JobError(f"{self.rule}: seed {name!r} is not set; set: {sorted(self.seeds)}")
        return int(self.seeds[name])

    def _named(self, name: str, kind: str, default: object = ...) -> object:
        named = self.input if kind == "input" else self.output
        if name in named:
            return named[name]
        if default is ...:
            raise JobError(f"{self.rule}: no {kind} named {name!r}; named: {sorted(named)}")
        return default

    @property
    def manifest(self) -> str | None:
        return self.output.get("manifest")


# --- the rule side: what a rule's params hold (workflow/rules/common.smk) ----------------------------------


def job_param(stage, *, cpu_capability, config=None, seeds=None, gpus=None, twin=None, **options):
    """A rule's params.job: a function of the wildcards returning the job spec as JSON.

    config (the subtree the stage reads and the manifest records), seeds, every option and gpus are
    values or functions of the wildcards, and of nothing else: Snakemake records a param for its rerun
    trigger only when its function does not read input, output, threads or resources, so a changed knob
    reruns the jobs that read it. The paths travel in params.files (`files_param`). A rule is named as
    its stage; `twin` names a `use rule X as Y` rule, which runs X's stage (the sheet's row, common.smk's
    `job`). stage too may be a function of the wildcards (a plug-in benchmark's score_<name>). gpus
    overrides resources.gpu.
    """
    from toolcall_repro.io import compact_json

    def value(v, w):
        return v(w) if callable(v) else v

    def spec(wildcards):
        out = {
            "stage": value(stage, wildcards),
            "config": value(config, wildcards),
            "seeds": value(seeds, wildcards) or {},
            "options": {"cpu_capability": cpu_capability, **{k: value(v, wildcards) for k, v in options.items()}},
        }
        if gpus is not None:
            out["gpus"] = int(value(gpus, wildcards))
        if twin is not None:
            out["rule"] = twin
        return compact_json(out)

    return spec


def files_param(wildcards, input, output, resources, cuda=None):
    """A rule's params.files: its own named input and output, every path (named or not), the GPUs it
    holds (resources.gpu), and the CUDA major of the GPU envs (engines.cuda; common.smk's job_files passes
    it), which a GPU job checks the node's driver against. It travels here and not in params.job because
    Snakemake records no param that reads input, output or resources for its rerun trigger: choosing
    engines.cuda then reruns only the jobs whose env it changes (the software-env trigger), not all."""
    from toolcall_repro.io import compact_json

    def named(files):
        return {k: v if isinstance(v, str) else list(v) for k, v in files.items()}

    out = {
        "input": named(input),
        "output": named(output),
        "files": {"input": list(input), "output": list(output)},
        "gpus": int(resources.get("gpu", 0) or 0),
    }
    if cuda is not None:
        out["cuda"] = int(cuda)
    return compact_json(out)
