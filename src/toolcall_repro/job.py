"""The one job entry of the workflow: `python -m toolcall_repro.job SPEC [FILES]`.

Every rule's body is the same line, `python -m toolcall_repro.job {params.job:q} {params.files:q} >
{log} 2>&1`. `params.job` (`job()` in workflow/rules/common.smk) says what runs: stage, config, seeds,
options, a function of the wildcards alone, so Snakemake's params rerun trigger records it (a param
that reads input or output is "derived" and not recorded). `params.files` (`FILES`) adds the rule's own
`input`, `output` and `resources`. Together, one job as JSON:

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

The entry imports the stage's function, calls it with a `Job` (the stage reads typed values from it; no
argv is rebuilt on the way), checks that every declared output exists, then writes the manifest from
the same spec: what ran is what is recorded. When the stage raises or an output is missing, nothing is
written and the exit status is not 0 (Snakemake then removes the outputs).
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# The stages (stage -> the module of its function) are the job sheet's (sheet.py): a stage is named as its
# rule and runs the function of that name (rule `generate_bfcl` runs
# `toolcall_repro.eval.bfcl.jobs.generate_bfcl`); a `use rule X as Y` twin runs X's. By hand:
# `toolcall-repro stage NAME` (stage_main). A benchmark registered outside the package (benchmarks.py)
# names its stage's module in options.module.
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


def stage_function(stage: str, module: str | None = None) -> Callable[[Job], object]:
    """The stage's function: STAGES' module, or the one a job names (options.module: the score stage of a
    benchmark registered outside the package, benchmarks.py)."""
    return getattr(importlib.import_module(STAGES.get(stage) or module), stage)


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (bfcl's scorer, verl's launcher)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _driver_ok(job: Job) -> bool:
    """A GPU job first asks the node's NVIDIA driver whether it runs the CUDA of the GPU locks the config
    chose (engines.cuda, job.cuda; gpu_driver): too old, or unreadable, fails the job here in one line, not
    at the first CUDA call minutes in. Where there is no nvidia-smi at all (the paper path on a CPU,
    train.verl.device: cpu) nothing is checked."""
    from toolcall_repro.gpu_driver import CUDA_MAJOR, check

    code, line = check(cuda=CUDA_MAJOR if job.cuda is None else job.cuda)
    if code == 1:
        print(f"{job.rule}: {line}", file=sys.stderr)
        return False
    if code == 0:
        print(f"{job.rule}: {line}", flush=True)
    return True


def run(job: Job) -> int:
    """Run the job under its lease (toolcall_repro.lease: one writer per output); 6 when another job,
    still alive, holds it, before anything is written."""
    from toolcall_repro import lease

    if job.manifest is None:
        return _run(job)
    outputs = [o for o in job.files.get("output", []) if Path(o) != Path(job.manifest)]
    try:
        held = lease.acquire(job.manifest, job.rule, outputs, log=lambda line: print(line, flush=True))
    except lease.LeaseHeld as exc:
        print(f"{job.rule}: not started: {exc}", file=sys.stderr)
        return lease.HELD_EXIT
    try:
        return _run(job)
    finally:
        lease.release(held)


def _run(job: Job) -> int:
    """Run the job's stage, then write its manifest; on failure write nothing.

    The CPU kernels are pinned (options.cpu_capability, engines.cpu_capability in config) before the
    stage imports torch, and checked after it ran: a CPU that cannot run them fails the job (4). A job
    that holds GPUs checks the node's driver before anything else (5: too old for the GPU locks).
    """
    from toolcall_repro.io import atomic_write_json
    from toolcall_repro.machine import KernelPinError, check_kernels, pin_kernels
    from toolcall_repro.provenance import build_manifest

    if job.gpus and not _driver_ok(job):
        return 5
    capability = job.options.get("cpu_capability")
    if capability is not None:
        pin_kernels(str(capability))
    start = time.perf_counter()
    rc = stage_function(job.stage, job.options.get("module"))(job)
    if rc not in (None, 0):
        return int(rc)
    if capability is not None:
        try:
            check_kernels(str(capability))
        except KernelPinError as exc:
            print(f"{job.rule}: {exc}", file=sys.stderr)
            return 4
    # CPU of the whole job process (imports included), as a job's own process is the job.
    wall, cpu = time.perf_counter() - start, cpu_seconds()
    outputs = [o for o in job.files.get("output", []) if job.manifest is None or Path(o) != Path(job.manifest)]
    missing = [o for o in outputs if not Path(o).exists()]
    if missing:
        print(f"{job.rule}: the stage finished but did not write {missing}", file=sys.stderr)
        return 3
    if job.manifest is None:
        return 0
    atomic_write_json(
        job.manifest,
        build_manifest(
            rule=job.rule,
            config_subtree=job.config,
            inputs=job.files.get("input", []),
            outputs=outputs,
            seeds=job.seeds,
            wall_s=wall,
            cpu_s=cpu,
            # GPU-seconds at paper scale are the job's wall-clock x GPUs it held.
            device_s=round(wall * job.gpus, 3) if job.gpus else round(cpu, 3),
            command=["python", "-m", "toolcall_repro.job", job.stage],
            options=job.options,
        ),
    )
    return 0


# --- by hand: one stage outside the workflow (`toolcall-repro stage NAME ...`) ------------------------------


def _pairs(values: list[str] | None, flag: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise JobError(f"{flag} {item!r}: expected NAME=VALUE")
        out.setdefault(key, []).append(value)
    return out


def _option_value(text: str) -> object:
    """An option's value: JSON when it parses (numbers, true/false, null, objects), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def hand_job(
    stage: str, *, inputs=None, outputs=None, config=None, seeds=None, options=None, gpus=0, cuda=None
) -> Job:
    """The job a rule of this stage would run, from NAME=VALUE lists (the stage CLI): a name given twice is
    a list of paths; config is inline JSON or a JSON/YAML file; an option is JSON or text. With no
    output named `manifest`, no manifest is written."""
    from toolcall_repro.configarg import load_config_arg

    if stage not in STAGES:
        raise JobError(f"stage {stage!r} is not one of {sorted(STAGES)}")

    def named(pairs):
        return {k: v[0] if len(v) == 1 else v for k, v in pairs.items()}

    def flat(named_paths):
        return [p for v in named_paths.values() for p in ([v] if isinstance(v, str) else v)]

    ins, outs = named(_pairs(inputs, "--in")), named(_pairs(outputs, "--out"))
    seed_values = {}
    for k, v in _pairs(seeds, "--seed").items():
        try:
            seed_values[k] = int(v[-1])
        except ValueError:
            raise JobError(f"--seed {k}={v[-1]!r}: a seed is an integer") from None
    return Job(
        rule=stage,
        stage=stage,
        input=ins,
        output=outs,
        files={"input": flat(ins), "output": flat(outs)},
        config=load_config_arg(config) if config else {},
        seeds=seed_values,
        options={k: _option_value(v[-1]) for k, v in _pairs(options, "--option").items()},
        gpus=int(gpus),
        cuda=cuda,
    )


def stage_parser():
    import argparse

    from toolcall_repro.gpu_driver import CUDA_CHOICES, CUDA_MAJOR

    p = argparse.ArgumentParser(
        prog="toolcall-repro stage",
        description="Run one stage by hand, as its rule runs it: the same function, the same named inputs, "
        "outputs, config, seeds and options (NAME=VALUE; a name given twice is a list). `--describe` prints "
        "what the stage reads. Stages: " + ", ".join(sorted(STAGES)),
    )
    p.add_argument("stage", metavar="NAME")
    p.add_argument("--in", dest="inputs", action="append", metavar="NAME=PATH", help="a named input")
    p.add_argument("--out", dest="outputs", action="append", metavar="NAME=PATH", help="a named output "
                   "(`manifest=PATH` also writes the job's manifest)")  # fmt: skip
    p.add_argument("--config", help="the config subtree the stage reads: inline JSON or a JSON/YAML file")
    p.add_argument("--seed", dest="seeds", action="append", metavar="NAME=INT")
    p.add_argument("--option", dest="options", action="append", metavar="NAME=VALUE")
    p.add_argument("--gpus", type=int, default=0, help="GPUs the job holds (the manifest's device seconds)")
    p.add_argument("--cuda", type=int, choices=CUDA_CHOICES, help="engines.cuda: the CUDA major whose lock a GPU "
                   f"job checks the node's driver against (default {CUDA_MAJOR})")  # fmt: skip
    p.add_argument("--describe", action="store_true", help="print what the stage reads, run nothing")
    return p


def job_from_argv(argv: list[str]) -> Job:
    """The job `toolcall-repro stage ARGV` runs (a JobError, FileNotFoundError or ValueError if bad)."""
    return _job_from_args(stage_parser().parse_args(argv))


def _job_from_args(args) -> Job:
    return hand_job(args.stage, inputs=args.inputs, outputs=args.outputs, config=args.config,
                    seeds=args.seeds, options=args.options, gpus=args.gpus, cuda=args.cuda)  # fmt: skip


def stage_main(argv: list[str] | None = None) -> int:
    """`toolcall-repro stage NAME ...`: run one stage by hand, through the function its rule runs."""
    import inspect

    argv = list(sys.argv[1:] if argv is None else argv)
    args = stage_parser().parse_args(argv)
    try:
        if args.describe:
            if args.stage not in STAGES:
                raise JobError(f"stage {args.stage!r} is not one of {sorted(STAGES)}")
            print(f"{args.stage} ({STAGES[args.stage]}):\n{inspect.getdoc(stage_function(args.stage))}")
            return 0
        job = _job_from_args(args)
    except (JobError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(job)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) not in (1, 2):
        print("usage: python -m toolcall_repro.job SPEC_JSON [FILES_JSON] (a rule's params.job, params.files)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        job = Job.from_json(*argv)
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(job)


if __name__ == "__main__":
    sys.exit(main())
