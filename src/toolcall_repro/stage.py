"""`toolcall-repro stage NAME ...`: one stage run by hand, outside the workflow, as its rule runs it: the
same function (job.py's entry), the same named inputs, outputs, config, seeds and options."""

from __future__ import annotations

import json
import sys

from toolcall_repro.job import run, stage_function
from toolcall_repro.jobspec import Job, JobError
from toolcall_repro.sheet import STAGES


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
