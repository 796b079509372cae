"""The venv deployment of the slurm profile, executed: `make cluster-envs PREFIX=...`
(scripts/install-cluster-envs.sh), `. PREFIX/env.sh` and `snakemake --profile profiles/slurm-venv`, where
Snakemake deploys no env and PREFIX/bin/python (scripts/cluster-envs-python.sh) sends each job to the venv
of its rule: PREFIX/verl for the rules whose conda env is train-verl.yaml or eval-vllm.yaml, PREFIX/main
for the others.

(a) the dispatcher's rule list is the workflow's: every rule of the paper DAG goes to the venv that holds
    its conda env's lock (Snakemake's own reading of the rules, config/paper.yaml); (b) the overlay profile
    is profiles/slurm's every key but the conda ones; (c) on the local SLURM (scripts/local_slurm.sh), the
    toy paper config's first job runs through sbatch in PREFIX/main and locate_vllm (a local rule) in
    PREFIX/verl, with no conda anywhere. The venvs are this checkout's .venv and .venv-verl, linked
    (`install-cluster-envs.sh PREFIX --link`): building them is the install scripts' own, tested path.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yte

sys.path.insert(0, str(Path(__file__).parent))  # the helpers of test_local_slurm.py beside this file
from _workflow_helpers import UNPINNED, make_workdir  # noqa: E402
from test_local_slurm import job_ids  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "install-cluster-envs.sh"
DISPATCH = REPO / "scripts" / "cluster-envs-python.sh"
OVERLAY = REPO / "profiles" / "slurm-venv"
cluster = pytest.mark.workflow
VERL_ENVS = {"train-verl.yaml", "eval-vllm.yaml"}  # the envs PREFIX/verl stands for; cpu, eval-bfcl: main

RULE_ENVS = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, ResourceSettings
with SnakemakeApi() as api:
    w = api.workflow(snakefile=Path("workflow/Snakefile"), resource_settings=ResourceSettings(),
                     config_settings=ConfigSettings(configfiles=[Path("config/paper.yaml")],
                                                    config={"allow_unpinned_revisions": True}))
    print(json.dumps({r.name: r.conda_env for r in w._workflow.rules if r.conda_env}))
"""


def stand_in_prefix(tmp_path: Path) -> Path:
    """PREFIX with the real dispatcher and stand-in venvs that say which one ran (main's asks the job sheet
    with a real Python, as the dispatcher asks it to)."""
    prefix = tmp_path / "envs"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text(DISPATCH.read_text())
    for name in ("main", "verl"):
        py = prefix / name / "bin" / "python"
        py.parent.mkdir(parents=True)
        real = f'[ "$2" = toolcall_repro.sheet ] && exec {sys.executable} "$@"\n' if name == "main" else ""
        py.write_text(f"#!/usr/bin/env bash\n{real}echo {name}\n")
        py.chmod(0o755)
    (prefix / "bin" / "python").chmod(0o755)
    return prefix


@cluster
def test_every_rule_goes_to_the_venv_of_its_conda_env(tmp_path):
    work = make_workdir(tmp_path / "tree")
    res = subprocess.run(
        [sys.executable, "-c", RULE_ENVS], cwd=work, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    envs = json.loads(res.stdout.strip().splitlines()[-1])
    assert {"train_grpo", "generate_bfcl", "locate_vllm", "synthesize_source"} <= set(envs), envs
    prefix = stand_in_prefix(tmp_path)
    for rule, env_file in sorted(envs.items()):
        spec = {"stage": rule} if rule != "train_grpo_seed" else {"stage": "train_grpo", "rule": rule}
        out = subprocess.run([str(prefix / "bin" / "python"), "-m", "toolcall_repro.job", json.dumps(spec), "{}"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        want = "verl" if Path(env_file).name in VERL_ENVS else "main"
        assert out.stdout.strip() == want, (rule, env_file, out.stdout, out.stderr)
    # a plug-in benchmark's score job (score_benchmark, whose env is eval-vllm at paper scale): verl's
    plugin = {"stage": "score_toy", "options": {"module": "toy_benchmark"}}
    out = subprocess.run([str(prefix / "bin" / "python"), "-m", "toolcall_repro.job", json.dumps(plugin), "{}"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.stdout.strip() == "verl", out.stderr
    # not a job: main's
    out = subprocess.run([str(prefix / "bin" / "python"), "-V"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "main"


def test_the_overlay_is_the_slurm_profile_without_conda():
    base = yte.process_yaml((REPO / "profiles" / "slurm" / "config.yaml").read_text(), require_use_yte=True)
    overlay = yte.process_yaml((OVERLAY / "config.yaml").read_text(), require_use_yte=True)
    assert base["software-deployment-method"] == "conda"
    assert overlay == {
        k: v for k, v in base.items() if k not in ("software-deployment-method", "conda-prefix")
    }
    assert overlay["set-resources"]["train_grpo"]["gpu_model"] == "'a100'"  # the site block came along


def sourced(env_sh: Path, env: dict) -> dict:
    """env after `. env_sh`."""
    out = subprocess.run(["bash", "-c", f". {env_sh} && env -0"], env=env, capture_output=True, timeout=30)
    return dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)


@cluster
def test_a_rule_job_runs_through_sbatch_in_the_locked_venvs(local_slurm, tmp_path):
    main, verl = REPO / ".venv", REPO / ".venv-verl"
    if not ((main / "bin" / "snakemake").exists() and (verl / "bin" / "vllm").exists()):
        pytest.skip("the venvs are not built here (make install install-verl)")
    prefix = tmp_path / "envs"
    res = subprocess.run(["bash", str(INSTALL), str(prefix), "--link", str(main), str(verl)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    env = sourced(prefix / "env.sh", {**local_slurm.env, "PATH": "/usr/local/bin:/usr/bin:/bin"})
    assert env["TOOLCALL_ENVS"] == str(prefix) and env["VERL_PYTHON"] == str(
        prefix / "verl" / "bin" / "python"
    )
    assert subprocess.run(["bash", "-c", "command -v conda"], env=env).returncode != 0  # no conda at all
    work = make_workdir(tmp_path / "tree")
    run = "results/paper-cpu"
    targets = [f"{run}/data/raw/xlam.jsonl", f"{run}/eval/bfcl/vllm.json"]
    cmd = ["timeout", "-k", "10", "300", "snakemake", "--profile", str(OVERLAY), "--configfile",
           "config/paper.yaml", ".test/paper-cpu.yaml", *UNPINNED, "--slurm-init-seconds-before-status-checks",
           "3", "--latency-wait", "5", "--", *targets]  # fmt: skip
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=330)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-5000:]
    assert "Conda environments: ignored" in log and "Creating conda environment" not in log, log[-3000:]
    (job,) = job_ids(log)  # synthesize_source through sbatch; locate_vllm is a local rule
    assert re.search(rf"SLURM jobid {job} \(log: \S*/rule_synthesize_source/", log), log[-3000:]
    assert "localrule locate_vllm:" in log, log[-3000:]
    state = local_slurm.wait_sacct(job, "State,Partition,Account")
    assert state == f"COMPLETED|{env['TOOLCALL_SLURM_PARTITION']}|{env['TOOLCALL_SLURM_ACCOUNT']}", state
    manifests = work / run / "manifests"
    synth = json.loads((manifests / "synthesize_source" / "xlam.json").read_text())
    locate = json.loads((manifests / "locate_vllm" / "all.json").read_text())
    assert synth["machine"]["lock"]["env"] == "main", synth["machine"]  # PREFIX/main: requirements/main.lock
    verl_lock = json.loads((verl / "toolcall-repro-lock.json").read_text())["env"]
    assert locate["machine"]["lock"]["env"] == verl_lock, locate["machine"]  # PREFIX/verl
    vllm = json.loads((work / run / "eval" / "bfcl" / "vllm.json").read_text())
    assert vllm["vllm"] == str(prefix / "verl" / "bin" / "vllm"), vllm  # VLLM_BIN of env.sh
    print(f"venv deployment, one sbatch job and one local job: {time.monotonic() - t0:.1f} s")
    print(textwrap.indent(state, "  sacct: "))
