"""`toolcall-repro plan`: what a paper run will ask of the cluster, before the first job is submitted.

    toolcall-repro plan --configfile config/paper.yaml --profile profiles/slurm [--json]

Runs Snakemake's own dry-run with the profile (the real DAG, the profile's and the rules' resources, the
exact command of every job) but without its software deployment (a plan builds no env, so it runs where
conda is absent, e.g. a login node), keeps the GPU jobs (their resources as Snakemake gives them), and for
each training job computes steps, rollouts and rows per step from the experiment's own run config of the
job's (dataset, variant) (the one the rule passes; the job sheet says which rules train) and the
training-set sizes: the filter chains' targets from config (the paper's 2.3k single-turn, 2.6k multi-turn, 0.7k format study), or the row counts
of the training parquets once they exist (the experiment's training sets: toolcall_repro.experiment).
Filtered epochs shrink, so steps and rollouts are upper bounds.
A job that asks for more time than the profile's site settings allow (`max_runtime`) is warned about: SLURM
would leave it pending forever.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from toolcall_repro import gpu_driver
from toolcall_repro.configarg import merged_config
from toolcall_repro.eval.bfcl.locate import VLLMNotFound, find_vllm
from toolcall_repro.experiment import TRAIN_DATASETS, Experiment
from toolcall_repro.hub_lock import gated_without_token
from toolcall_repro.runconfig import effective_m
from toolcall_repro.sheet import KINDS

RULE_RE = re.compile(r"^(?:local)?rule (\w+):$")
# Profile keys that deploy software (conda, apptainer, env modules): a dry-run with them asks conda.
METHOD_KEYS = {"software-deployment-method", "deployment-method", "deployment", "sdm"}
SOFTWARE_KEYS = METHOD_KEYS | {"use-conda", "use-apptainer", "use-singularity", "use-envmodules"}
ERROR_RE = re.compile(r"^\w*(?:Error|Exception)\b[^:]*:\s*(.*)$")


class PlanError(RuntimeError):
    """What the plan cannot resolve, in one line."""


@dataclass
class PlannedJob:
    """One job of a dry-run, as Snakemake printed it."""

    rule: str
    wildcards: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    resources: dict = field(default_factory=dict)
    shell: str = ""

    @property
    def gpus(self) -> int:
        """GPUs the job holds: `gpu`, or GRES per node x nodes (multi-node training)."""
        gpu = int(self.resources.get("gpu", 0) or 0)
        if gpu:
            return gpu
        gres = re.match(r"gpu(?::[^:]+)?:(\d+)$", str(self.resources.get("gres", "")))
        return int(gres[1]) * int(self.resources.get("nodes", 1) or 1) if gres else 0

    @property
    def spec(self) -> dict | None:
        """The job of the command (`python -m toolcall_repro.job SPEC [FILES]`, both merged, the spec's
        keys first), None for another command: what the tests read of a planned job (the plan itself takes
        a job's config from the experiment)."""
        try:
            argv = shlex.split(self.shell)
        except ValueError:
            return None
        for i, arg in enumerate(argv[:-1]):
            if arg == "toolcall_repro.job" and argv[i - 1 : i] == ["-m"]:
                parts = [a for a in argv[i + 1 : i + 3] if a.startswith("{")]
                merged: dict = {}
                for part in reversed(parts):
                    merged.update(json.loads(part))
                return merged
        return None

    @property
    def run_config(self) -> dict | None:
        """The job's config subtree: its spec's "config" (None for a job without one)."""
        config = (self.spec or {}).get("config")
        return config if isinstance(config, dict) else None

    @property
    def name(self) -> str:
        return "/".join(str(v) for v in self.wildcards.values()) or "-"


def _pairs(text: str) -> dict:
    out = {}
    for part in text.split(", "):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_dryrun(text: str) -> list[PlannedJob]:
    """Every job block of `snakemake -n -p` output (rule, wildcards, input, output, resources, command)."""
    jobs: list[PlannedJob] = []
    job = None
    for line in text.splitlines():
        m = RULE_RE.match(line)
        if m:
            job = PlannedJob(rule=m[1])
            jobs.append(job)
            continue
        if job is None:
            continue
        if not line.strip() or line.startswith("["):
            job = None
            continue
        key, _, value = line.strip().partition(": ")
        if key == "wildcards":
            job.wildcards = _pairs(value)
        elif key == "resources":
            job.resources = _pairs(value)
        elif key == "input":
            job.inputs = value.split(", ")
        elif key == "output":
            job.outputs = value.split(", ")
        elif line.startswith("Shell command:"):
            job.shell = line.partition(":")[2].strip()
    return jobs


def parquet_rows(path: Path) -> int | None:
    if not path.exists():
        return None
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def train_rows(exp: Experiment, root: Path = Path(".")) -> dict[str, tuple[int | None, str]]:
    """Rows of each training set of the experiment (its files under `root`): the parquet's when it exists,
    else the filter chain's target (none for the whole Tool-N1 pool: its run is capped by max_steps)."""
    out = {}
    for dataset in TRAIN_DATASETS:
        rows = parquet_rows(root / exp.layout.train_set(dataset))
        target = exp.train_set_target(dataset)
        out[dataset] = (rows, "data") if rows is not None else (target, "config target")
    return out


def training_plan(run: dict, rows: int | None) -> dict:
    """Steps, rollouts and update rows of one GRPO run (drop_last batches; max_steps caps the plan)."""
    batch, n, epochs = int(run["batch_size"]), int(run["n"]), int(run["epochs"])
    m = effective_m(run)
    per_epoch = rows // batch if rows is not None else None
    planned = per_epoch * epochs if per_epoch is not None else None
    cap = run.get("max_steps")
    steps = min(x for x in (cap, planned) if x is not None) if (cap or planned is not None) else None
    return {
        "train_rows": rows,
        "epochs": epochs,
        "steps_per_epoch": per_epoch,
        "steps": steps,
        "max_steps": cap,
        "prompts_per_step": batch,
        "n": n,
        "m": m,
        "rollouts_per_step": batch * n,
        "update_rows_per_step": batch * m,
        "rollouts_total": steps * batch * n if steps is not None else None,
        "filter": run.get("filter"),
    }


def gpu_jobs_plan(jobs: list[PlannedJob], exp: Experiment, retries: int = 0, root: Path = Path(".")) -> dict:
    """The GPU jobs with their resources, and the training arithmetic, as one JSON-able document."""
    rows = train_rows(exp, root)
    planned = []
    for job in jobs:
        if job.gpus == 0:
            continue
        res = job.resources
        runtime = int(res.get("runtime", 0) or 0)
        entry = {
            "rule": job.rule,
            "job": job.name,
            "gpus": job.gpus,
            "gpu_model": res.get("gpu_model") or res.get("constraint"),
            "nodes": int(res.get("nodes", 1) or 1),
            "cpus_per_task": res.get("cpus_per_task"),
            "mem_mb": res.get("mem_mb"),
            "runtime_min": runtime,
            "max_gpu_hours": job.gpus * runtime / 60 * (1 + retries),
        }
        row = KINDS.get(job.rule)  # the job sheet's: what the rule runs, read from the experiment, not the command
        if row is not None and row.stage == "train_grpo":  # train_grpo and its seed twin
            dataset = job.wildcards["dataset"]
            n_rows, source = rows.get(dataset, (None, "unknown"))
            run = exp.run_config(dataset, job.wildcards["variant"])
            entry["training"] = {**training_plan(run, n_rows), "rows_from": source}
        elif row is not None and row.setting is not None:  # a filter chain's rollouts
            entry["rollouts_per_prompt"] = exp.config["filter"][row.setting]["rollouts"]
        planned.append(entry)
    planned.sort(key=lambda e: (e["rule"] != "train_grpo", e["rule"], e["job"]))
    return {
        "gpu_jobs": planned,
        "gpu_job_count": len(planned),
        "retries": retries,
        "max_gpu_hours": sum(e["max_gpu_hours"] for e in planned),
        "train_rows": {k: {"rows": v[0], "from": v[1]} for k, v in rows.items()},
        # what the GPU nodes' driver must be for the CUDA of the GPU locks engines.cuda chose (gpu_driver),
        # said before the bill
        "gpu_driver": gpu_driver.requirement(exp.jobs.cuda) if planned else None,
    }


def site_settings(profile_cfg: dict) -> dict:
    """The profile's site settings (its YTE `__variables__` block: gpu_model, constraint, max_runtime, ...)."""
    site = profile_cfg.get("__variables__")
    return dict(site) if isinstance(site, dict) else {}


def over_time_limit(jobs: list[PlannedJob], max_runtime: int | None) -> dict[str, tuple[int, int]]:
    """{rule: (jobs, minutes asked)} of the jobs whose runtime exceeds the site's max_runtime."""
    out: dict[str, tuple[int, int]] = {}
    if not max_runtime:
        return out
    for job in jobs:
        runtime = int(job.resources.get("runtime", 0) or 0)
        if runtime > int(max_runtime):
            count, most = out.get(job.rule, (0, 0))
            out[job.rule] = (count + 1, max(most, runtime))
    return out


def time_warnings(over: dict[str, tuple[int, int]], max_runtime: int | None, profile: str) -> list[str]:
    return [
        f"warning: {count} {rule} job(s) ask for {minutes} min, above the site's max_runtime {max_runtime} min "
        f"({profile}/config.yaml): SLURM would leave them pending; lower the rule's runtime in the site "
        "settings (training resumes over retries)"
        for rule, (count, minutes) in sorted(over.items())
    ]


def attention_warning(exp: Experiment) -> str | None:
    """A paper-scale efficiency comparison (a vanilla run beside a run that down-samples) whose actor may
    run on sdpa: without flash-attn's padding removal the update's share of step time grows, and with it the
    down-sampling speedup, so the timing would not be the paper's. None when flash_attention_2 is asked
    for, or nothing is compared."""
    if not exp.paper_scale:
        return None
    impl = (exp.jobs.verl or {}).get("attn_implementation", "auto")
    runs = exp.requested_runs()
    variants = {v for _, v, _ in runs}
    downsampling = {v for d, v, _ in runs if exp.run_config(d, v).get("downsample")}
    if impl == "flash_attention_2" or "vanilla" not in variants or not downsampling:
        return None
    how = "sdpa" if impl == "sdpa" else "flash_attention_2 only where flash-attn imports in the training env, else sdpa"
    return (
        f"warning: train.verl.attn_implementation is {impl} ({how}): on sdpa the actor runs without padding "
        "removal, the update takes a larger share of each step and the down-sampling speedup "
        f"({', '.join(sorted(downsampling))} against vanilla) grows with it; the paper's timings are on "
        "flash-attn. Build it into the training env (FLASH_ATTN=1 scripts/install-verl-env.sh --gpu; "
        "docs/cluster.md) and set flash_attention_2, or read the timings as sdpa's (a run's verl/overrides.txt "
        "names the kernel it ran)"
    )


def format_plan(plan: dict) -> str:
    head = ("rule", "job", "GPUs", "nodes", "runtime", "mem GB", "steps", "prompts/step", "rollouts/step",
            "update rows/step", "rollouts")  # fmt: skip
    rows = []
    for e in plan["gpu_jobs"]:
        t = e.get("training") or {}
        mem = f"{int(e['mem_mb']) / 1000:.0f}" if e.get("mem_mb") else "-"
        rows.append(
            (
                e["rule"],
                e["job"],
                f"{e['gpus']}x{e['gpu_model'] or 'gpu'}",
                str(e["nodes"]),
                f"{e['runtime_min'] / 60:g} h",
                mem,
                *(
                    ("-" if t.get(k) is None else f"{t[k]:,}")
                    for k in ("steps", "prompts_per_step", "rollouts_per_step", "update_rows_per_step",
                              "rollouts_total")  # fmt: skip
                ),
            )
        )
        if "rollouts_per_prompt" in e:
            rows[-1] = (*rows[-1][:8], f"{e['rollouts_per_prompt']}/prompt", *rows[-1][9:])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]]
    sizes = ", ".join(
        f"{k} {v['rows']:,} ({v['from']})" for k, v in plan["train_rows"].items() if v["rows"] is not None
    )
    lines += [
        "",
        f"{plan['gpu_job_count']} GPU jobs; at most {plan['max_gpu_hours']:,.0f} GPU-hours at their runtime "
        f"limits (x{1 + plan['retries']} with retries: {plan['retries']}).",
        f"Training rows: {sizes}; tooln1 (the filter policy) runs max_steps on the whole pool.",
        "Steps and rollouts are upper bounds: the pre-rollout filter shrinks later epochs.",
    ]
    if plan.get("gpu_driver"):
        lines.append(f"Driver: {plan['gpu_driver']}; each GPU job checks its node's first.")
    if plan.get("bfcl_vllm"):
        lines.append(f"generate_bfcl serves with {plan['bfcl_vllm']['vllm']} ({plan['bfcl_vllm']['found_by']}).")
    return "\n".join(lines)


def without_software_deployment(profile: str | Path, into: Path) -> tuple[Path, list[str]]:
    """A copy of the profile folder in `into` whose config.yaml lacks SOFTWARE_KEYS; the keys dropped."""
    copy = into / Path(profile).name
    shutil.copytree(profile, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text()) or {}
    dropped = sorted(k for k in config if k.replace("_", "-") in SOFTWARE_KEYS)
    kept = {k: v for k, v in config.items() if k not in dropped}  # in order: YTE reads __variables__ first
    (copy / "config.yaml").write_text(yaml.safe_dump(kept, sort_keys=False))
    return copy, dropped


def deploys_conda(profile_cfg: dict) -> bool:
    """Whether the profile's runs deploy conda envs (`software-deployment-method: conda`, `use-conda`)."""
    for key, value in profile_cfg.items():
        key = key.replace("_", "-")
        if key == "use-conda" and value is True:
            return True
        if key in METHOD_KEYS and "conda" in (value if isinstance(value, list) else str(value).split()):
            return True
    return False


def bfcl_vllm(jobs: list[PlannedJob], profile_cfg: dict, cuda: int = gpu_driver.CUDA_MAJOR) -> dict | None:
    """Where the `vllm` that generate_bfcl serves with will come from (None when no job serves with vLLM).

    locate_vllm, a local job, finds it: in workflow/envs/eval-vllm.yaml (eval-vllm-cu12.yaml with
    engines.cuda: 12) when the profile deploys conda, else in this host's environment, as here (VLLM_BIN,
    VERL_PYTHON, PATH). Raises VLLMNotFound.
    """
    if not any(j.rule == "locate_vllm" for j in jobs):
        return None
    if deploys_conda(profile_cfg):
        env_file = f"workflow/envs/{gpu_driver.env_name('eval-vllm', cuda)}.yaml"
        return {"vllm": f"the vllm of {env_file}", "found_by": "the profile deploys conda envs"}
    path, source = find_vllm()
    return {"vllm": path, "found_by": f"found by {source}; the profile deploys no env"}


def dryrun_problem(stderr: str) -> str:
    """Why a dry-run failed, in one line: the message of Snakemake's last `...Error:` (the line after it when
    the header ends with a colon), else the last line it wrote."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for i in range(len(lines) - 1, -1, -1):
        match = ERROR_RE.match(lines[i])
        if match:
            return match[1] or (lines[i + 1] if i + 1 < len(lines) else lines[i])
    return lines[-1] if lines else "no output"


def dryrun(configfile: str | list[str], profile: str, extra: list[str] | None = None) -> str:
    """Snakemake's `-n -p` output for the profile, its software deployment left out (configfile: one file, or
    the config and its overlays, e.g. its hub lock)."""
    configfiles = [configfile] if isinstance(configfile, str) else list(configfile)
    if not (Path(profile) / "config.yaml").is_file():
        raise PlanError(f"--profile {profile}: no config.yaml there (a Snakemake profile folder)")
    with tempfile.TemporaryDirectory(prefix="plan_profile_") as tmp:
        planning, _ = without_software_deployment(profile, Path(tmp))
        cmd = [sys.executable, "-m", "snakemake", "-n", "--nolock", "-p", "--profile", str(planning),
               "--configfile", *configfiles, *(extra or [])]  # fmt: skip
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        rerun = f"snakemake -n --profile {profile} --configfile {' '.join(configfiles)}"
        why = dryrun_problem(f"{res.stderr}\n{res.stdout}")  # with a profile, Snakemake's error is on stdout
        raise PlanError(f"the dry-run failed: {why} (all of it: {rerun})")
    return res.stdout


def main(argv: list[str] | None = None) -> int:
    # allow_abbrev off: Snakemake's --config (passed through) must not be read as an abbreviated --configfile
    p = argparse.ArgumentParser(
        prog="toolcall-repro plan", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    p.add_argument("--configfile", nargs="+", default=["config/paper.yaml"],
                   help="the config and its overlays (its hub lock: config/paper.hub-lock.yaml)")  # fmt: skip
    p.add_argument("--profile", default="profiles/slurm")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    a, extra = p.parse_known_args(argv)
    try:
        config = merged_config(a.configfile)
        text = dryrun(a.configfile, a.profile, extra)
        profile_cfg = yaml.safe_load((Path(a.profile) / "config.yaml").read_text()) or {}
    except (PlanError, OSError, yaml.YAMLError) as exc:
        print(f"toolcall-repro plan: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    jobs = parse_dryrun(text)
    exp = Experiment(config)
    plan = gpu_jobs_plan(jobs, exp, retries=int(profile_cfg.get("retries", 0)))
    max_runtime = site_settings(profile_cfg).get("max_runtime")
    over = over_time_limit(jobs, max_runtime)
    plan["site_max_runtime_min"] = max_runtime
    plan["over_time_limit"] = {rule: {"jobs": n, "runtime_min": m} for rule, (n, m) in sorted(over.items())}
    problem = None
    try:
        plan["bfcl_vllm"] = bfcl_vllm(jobs, profile_cfg, exp.jobs.cuda)
    except VLLMNotFound as exc:
        problem = f"generate_bfcl will find no `vllm` to serve with: {exc}"
    print(json.dumps(plan, indent=2) if a.json else format_plan(plan))
    for warning in [*time_warnings(over, max_runtime, a.profile), attention_warning(exp)]:
        if warning:
            print(f"toolcall-repro plan: {warning}", file=sys.stderr)
    if problem:
        print(f"toolcall-repro plan: {problem}", file=sys.stderr)
        return 1
    gated = gated_without_token(config)  # before the bill: the download rules would fail with a 401
    for line in gated:
        print(f"toolcall-repro plan: {line}", file=sys.stderr)
    return 1 if gated else 0


if __name__ == "__main__":
    sys.exit(main())
