"""The paper DAG as the SLURM profile would submit it: offline compute nodes, and the plan it costs."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from toolcall_repro.plan import parse_dryrun
from toolcall_repro.sheet import JobSheet

sys.path.insert(0, str(Path(__file__).parent))
from _workflow_helpers import UNPINNED, make_workdir, snakemake, write_config, write_fake_cluster  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DOWNLOAD_RULES = {"download_source", "download_model", "download_lm_eval_data", "download_acebench"}


@pytest.fixture(scope="module")
def paper_workdir(tmp_path_factory):
    """One working directory of this module's own (never the work tree: see _workflow_helpers)."""
    return make_workdir(tmp_path_factory.mktemp("paper"))


@pytest.fixture(scope="module")
def paper_jobs(paper_workdir, fake_cluster_env):
    res = snakemake(
        "-n", "--nolock", "--profile", "profiles/slurm", "-p", *UNPINNED, cwd=paper_workdir, env=fake_cluster_env
    )  # fmt: skip
    assert res.returncode == 0, res.stderr + res.stdout
    return parse_dryrun(res.stdout)


def local_rules() -> set[str]:
    names = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        for block in re.findall(r"localrules:\n((?:\s+\w+,\n)+)", smk.read_text()):
            names |= set(re.findall(r"(\w+),", block))
    return names


def producers(jobs):
    return {out: job for job in jobs for out in job.outputs}


def upstream(job, by_output, seen=None):
    """Every job whose outputs `job` reads, transitively (directory outputs count for paths below them)."""
    seen = [] if seen is None else seen
    for path in job.inputs:
        src = by_output.get(path) or next(
            (j for out, j in by_output.items() if path.startswith(out.rstrip("/") + "/")), None
        )
        if src is not None and src not in seen:
            seen.append(src)
            upstream(src, by_output, seen)
    return seen


def test_every_gpu_job_reads_only_what_local_download_rules_fetched(paper_jobs):
    """Compute nodes may be offline: models, datasets and lm-eval task data come from submit-host rules.

    BFCL's data ships inside bfcl-eval (installed with the env), so it has no download rule; ACEBench's
    data comes from download_acebench at the pinned commit, upstream of every ACEBench scoring job.
    """
    by_output = producers(paper_jobs)
    assert DOWNLOAD_RULES <= local_rules()
    gpu_jobs = [j for j in paper_jobs if j.gpus > 0]
    assert {j.rule for j in gpu_jobs} >= {"train_grpo", "filter_single_turn", "filter_multi_turn",
                                          "generate_bfcl", "check_general_capability"}  # fmt: skip
    assert "score_bfcl" in local_rules() and not any(j.rule == "score_bfcl" for j in gpu_jobs)  # checkers only
    for job in paper_jobs:
        for path in job.inputs:  # a fresh run: every input is a job's output or a file of this checkout
            made = path in by_output or any(path.startswith(o.rstrip("/") + "/") for o in by_output)
            full = (REPO / path).resolve()
            shipped = full.is_relative_to(REPO) and not path.startswith("results/") and full.exists()
            assert made or shipped, f"{job.rule} {job.name} reads {path}, which no rule of the DAG produces"
        if not upstream(job, by_output):
            assert job.rule in DOWNLOAD_RULES | {"locate_vllm"}, f"{job.rule} starts the DAG but fetches nothing"
    for job in gpu_jobs:
        assert job.rule not in DOWNLOAD_RULES
        fetched = {j.rule for j in upstream(job, by_output)} & DOWNLOAD_RULES
        assert "download_model" in fetched, (job.rule, job.name)
        if job.rule == "check_general_capability":
            assert "download_lm_eval_data" in fetched  # MMLU, HellaSwag, TruthfulQA, Winogrande
        if job.rule == "score_acebench":
            assert "download_acebench" in fetched, job.name
    assert any(j.rule == "score_acebench" for j in gpu_jobs)  # ACEBench is in the paper DAG
    (ace,) = [j for j in paper_jobs if j.rule == "download_acebench"]
    assert re.search(r"\b[0-9a-f]{40}\b", ace.shell), ace.shell  # at a pinned commit
    for job in (j for j in paper_jobs if j.rule == "download_model"):
        assert job.spec["config"]["revision"], job.shell  # every hub model at the revision config pins
    lm_eval = [j for j in paper_jobs if j.rule == "download_lm_eval_data"]
    assert len(lm_eval) == 1
    assert "mmlu,hellaswag,truthfulqa_mc2,winogrande" in lm_eval[0].shell
    assert '"cais/mmlu":' in lm_eval[0].shell  # each dataset at the revision config pins


def test_generate_bfcl_serves_with_the_vllm_that_locate_vllm_finds_in_the_vllm_env(paper_jobs):
    """BFCL's env cannot hold vLLM (numpy): every generate_bfcl job reads the record of a local job that runs in
    eval-vllm.yaml, so plain `--sdm conda` finds the `vllm` to serve with (no VLLM_BIN or VERL_PYTHON)."""
    by_output = producers(paper_jobs)
    bfcl = [j for j in paper_jobs if j.rule == "generate_bfcl"]
    (locate,) = [j for j in paper_jobs if j.rule == "locate_vllm"]
    assert bfcl and all(set(locate.outputs) & set(j.inputs) for j in bfcl)
    assert "locate_vllm" in local_rules() and not upstream(locate, by_output)  # first, on the submit host
    # eval-vllm.yaml at both scales, or its CUDA 12 twin (engines.cuda; tests/workflow/test_cuda_envs.py reads
    # both): the job sheet's row, which the rule reads (tests/test_sheet.py holds every rule's env to it)
    for name in ("config.yaml", "paper.yaml"):
        config = yaml.safe_load((REPO / "config" / name).read_text())
        assert JobSheet(config).env("locate_vllm") == "../envs/eval-vllm.yaml", name
    # and a hung `vllm serve` fails the job after evaluate.bfcl.server_timeout_s instead of holding the GPU
    assert {j.run_config["bfcl"]["server_timeout_s"] for j in bfcl} == {1800}


def test_every_generation_gets_its_models_thinking_switch(paper_jobs):
    """model.enable_thinking reaches training (run config -> verl's chat template kwargs), filtering and
    evaluation alike: Qwen3 thinks, Qwen2.5 does not, and each job says which it passes."""
    runs = {j.name: j.run_config for j in paper_jobs if j.rule == "train_grpo"}
    assert {name: run["enable_thinking"] for name, run in runs.items()} == {
        name: not name.startswith(("single_turn/", "tooln1/")) for name in runs
    }
    (multi,) = [j for j in paper_jobs if j.rule == "filter_multi_turn"]
    (single,) = [j for j in paper_jobs if j.rule == "filter_single_turn"]
    assert multi.run_config["enable_thinking"] is True and single.run_config["enable_thinking"] is False
    scored = [j for j in paper_jobs if j.rule in ("generate_bfcl", "score_acebench")]
    # Qwen3 (base: Qwen3-4B; rl-multi and the format study's models trained from it; qwen3-8b) thinks;
    # Qwen2.5 and Llama have no switch (false)
    thinks = {"base", "rl-multi", "fmt-single", "fmt-multi", "qwen3-8b"}
    assert scored and all(
        j.run_config["protocol"]["enable_thinking"] is (j.wildcards["model"] in thinks) for j in scored
    )
    assert {"base", "qwen3-8b", "qwen25-7b", "llama31-8b"} <= {j.wildcards["model"] for j in scored}


def test_the_studies_evaluate_the_papers_models(paper_jobs):
    """The seed study's five models at 10 seeds and the template study's three, each evaluated as published
    (evaluate.models.<tag>.source: hub): its snapshot downloaded on the submit host at its revision, its
    card naming the model."""
    variance = {j.wildcards["model"] for j in paper_jobs if j.rule == "summarise_bfcl_variance"}
    assert variance == {"base", "qwen3-8b", "qwen25-7b", "llama31-8b", "llama32-3b"}
    for model in variance:
        seeds = {j.wildcards["seed"] for j in paper_jobs if j.rule == "generate_bfcl"
                 and j.wildcards["model"] == model and j.wildcards["protocol"] == "default"}  # fmt: skip
        assert seeds == {str(s) for s in range(10)}, (model, seeds)
    context = {j.wildcards["model"] for j in paper_jobs if j.rule == "summarise_bfcl" and j.wildcards["protocol"] == "context"}
    assert context == {"base", "qwen3-8b", "qwen25-7b"}
    downloads = {j.wildcards["slug"] for j in paper_jobs if j.rule == "download_model"}
    assert {"meta-llama--Llama-3.1-8B-Instruct", "meta-llama--Llama-3.2-3B-Instruct", "Qwen--Qwen2.5-7B-Instruct"} <= downloads
    (llama,) = [j for j in paper_jobs if j.rule == "generate_bfcl" and j.wildcards == {"model": "llama32-3b", "protocol": "default", "seed": "0"}]
    assert llama.run_config["model"] == {"tag": "llama32-3b", "source": "hub", "model": "meta-llama/Llama-3.2-3B-Instruct"}
    assert "models/hub/meta-llama--Llama-3.2-3B-Instruct" in " ".join(llama.inputs)


def test_efficient_run_raises_n_in_multi_turn_only(paper_jobs):
    """The paper's efficient multi-turn run uses n = 16; single-turn keeps n = 8 (and down-samples to 4)."""
    runs = {j.name: j.run_config for j in paper_jobs if j.rule == "train_grpo"}
    assert runs["multi_turn/efficient"]["n"] == 16 and runs["multi_turn/efficient"]["downsample"]["m"] == 8
    assert runs["single_turn/efficient"]["n"] == 8 and runs["single_turn/efficient"]["downsample"]["m"] == 4
    assert runs["single_turn/vanilla"]["n"] == runs["multi_turn/vanilla"]["n"] == 8


def test_plan_prints_the_gpu_jobs_with_their_cost(paper_workdir, fake_cluster_env):
    env = {**os.environ, **fake_cluster_env, "PYTHONPATH": str(REPO / "src")}
    res = subprocess.run(
        [sys.executable, "-m", "toolcall_repro.cli", "plan", "--configfile", "config/paper.yaml", "--json", *UNPINNED],
        cwd=paper_workdir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    train = {e["job"]: e for e in plan["gpu_jobs"] if e["rule"] == "train_grpo"}
    assert all(e["gpus"] == 8 and e["runtime_min"] == 2880 for e in train.values())
    assert train["tooln1/vanilla"]["training"]["steps"] == 80  # the filter policy: max_steps
    single = train["single_turn/efficient"]["training"]
    assert single["train_rows"] == 2300 and single["steps"] == 2300 // 128 * 10
    assert (single["rollouts_per_step"], single["update_rows_per_step"]) == (128 * 8, 128 * 4)
    multi = train["multi_turn/efficient"]["training"]
    assert multi["train_rows"] == 2600 and multi["steps"] == 2600 // 256 * 4
    assert (multi["rollouts_per_step"], multi["update_rows_per_step"]) == (256 * 16, 256 * 8)
    assert plan["gpu_job_count"] == len(plan["gpu_jobs"]) > len(train)
    assert plan["max_gpu_hours"] == pytest.approx(sum(e["max_gpu_hours"] for e in plan["gpu_jobs"]))
    assert plan["retries"] == 1


def run_plan(cwd, env, *args):
    cmd = [sys.executable, "-m", "toolcall_repro.cli", "plan", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_plan_needs_no_conda_and_says_in_one_line_what_it_cannot_resolve(paper_workdir, tmp_path):
    """The plan deploys no software: it runs where conda is absent (a login node, this machine), though the
    slurm profile's runs deploy conda envs; a dry-run that fails is one line, not a traceback."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_fake_cluster(bin_dir, tmp_path, skip=("conda",))
    path = os.pathsep.join([str(Path(sys.executable).parent), str(bin_dir), "/usr/bin", "/bin"])
    assert shutil.which("conda", path=path) is None
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(REPO / "src"), "FAKE_SLURM_DIR": str(tmp_path),
           "TOOLCALL_SLURM_PARTITION": "gpu-a100", "TOOLCALL_SLURM_ACCOUNT": "proj123"}  # fmt: skip
    res = run_plan(paper_workdir, env, "--configfile", "config/paper.yaml", "--json", *UNPINNED)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["gpu_job_count"] > 0 and any(e["rule"] == "generate_bfcl" for e in plan["gpu_jobs"])
    assert plan["bfcl_vllm"]["vllm"] == "the vllm of workflow/envs/eval-vllm.yaml"  # --sdm conda's env
    import yaml

    cfg = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    del cfg["evaluate"]["general"]["revisions"]
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(cfg))
    res = run_plan(paper_workdir, env, "--configfile", str(tmp_path / "paper.yaml"), *UNPINNED)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("toolcall-repro plan: ") and "evaluate.general.revisions" in line


def test_plan_without_conda_deployment_names_the_vllm_bfcl_will_serve_with_or_that_there_is_none(
    paper_workdir, tmp_path, fake_cluster_env
):
    """A profile that deploys no env runs locate_vllm in this host's env: the plan names what it will find
    there, or says in one line that it finds none (before 67 GPU jobs fail on it)."""
    import yaml

    profile = tmp_path / "venvs"
    profile.mkdir()
    cfg = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    del cfg["software-deployment-method"]
    (profile / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, **fake_cluster_env, "PYTHONPATH": str(REPO / "src")}
    for name in ("VLLM_BIN", "VERL_PYTHON"):
        env.pop(name, None)
    args = ("--configfile", "config/paper.yaml", "--profile", str(profile), *UNPINNED)
    res = run_plan(paper_workdir, env, *args)
    assert res.returncode == 1 and "generate_bfcl" in res.stdout  # the plan, then what stops the run
    assert res.stderr.strip().splitlines()[-1].startswith("toolcall-repro plan: generate_bfcl will find no `vllm`")
    assert "export VLLM_BIN" in res.stderr
    vllm = tmp_path / "verl" / "bin" / "vllm"
    vllm.parent.mkdir(parents=True)
    vllm.write_text("#!/bin/sh\n")
    vllm.chmod(0o755)
    res = run_plan(paper_workdir, {**env, "VLLM_BIN": str(vllm)}, *args)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == f"generate_bfcl serves with {vllm} (found by VLLM_BIN; the profile deploys no env)."


def test_lm_eval_tasks_without_pinned_revisions_fail_before_any_job(tmp_path, smk):
    import yaml

    cfg = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    del cfg["evaluate"]["general"]["revisions"]
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = smk("-n", "--nolock", "--configfile", str(path), *UNPINNED)
    assert res.returncode != 0
    assert "evaluate.general.revisions: lm-eval tasks read the Hub" in res.stdout + res.stderr


def site_profile(tmp_path, **site):
    """A copy of profiles/slurm whose site settings (its one `__variables__` block) are changed."""
    import yaml

    text = (REPO / "profiles" / "slurm" / "config.yaml").read_text()
    for key, value in site.items():
        text, n = re.subn(rf"^(  {key}: )\S+", rf"\g<1>{yaml.safe_dump(value).split(chr(10))[0]}", text, flags=re.M)
        assert n == 1, key
    profile = tmp_path / "site"
    profile.mkdir()
    (profile / "config.yaml").write_text(text)
    return profile


def test_the_sites_gpu_type_constraint_and_time_are_set_in_one_place(paper_workdir, fake_cluster_env, tmp_path):
    """Every GPU job takes the GPU type, the node constraint and its runtime from the profile's site block;
    multi-node training asks for its total GPUs of that type over its nodes."""
    profile = site_profile(tmp_path, gpu_model="h100", constraint=None, train_runtime=1440, gpu_runtime=240)
    two_nodes = write_config(tmp_path, "config/paper.yaml", {"train": {"verl": {"nodes": 2}}, "allow_unpinned_revisions": True})
    res = snakemake("-n", "--nolock", "-p", "--profile", str(profile), "--sdm", "env-modules",
                    "--configfile", str(two_nodes), cwd=paper_workdir, env=fake_cluster_env)  # fmt: skip
    assert res.returncode == 0, res.stderr + res.stdout
    gpu_jobs = [j for j in parse_dryrun(res.stdout) if j.gpus > 0]
    assert {j.rule for j in gpu_jobs} >= {"train_grpo", "generate_bfcl", "score_acebench", "filter_multi_turn"}
    for job in gpu_jobs:
        assert job.resources["gpu_model"] == "h100" and "constraint" not in job.resources, job.rule
        assert job.resources["runtime"] == ("1440" if job.rule == "train_grpo" else "240"), job.rule
    train = [j for j in gpu_jobs if j.rule == "train_grpo"]
    assert all((j.resources["gpu"], j.resources["nodes"], j.resources["tasks"]) == ("16", "2", "2") for j in train)


def test_plan_warns_when_a_job_asks_for_more_time_than_the_site_allows(paper_workdir, fake_cluster_env, tmp_path):
    env = {**os.environ, **fake_cluster_env, "PYTHONPATH": str(REPO / "src")}
    res = run_plan(paper_workdir, env, "--json", *UNPINNED)
    assert res.returncode == 0 and "max_runtime" not in res.stderr, res.stderr  # the shipped site: 2880 allowed
    assert json.loads(res.stdout)["over_time_limit"] == {}
    # the shipped config's attention is auto: the efficiency comparison may run on sdpa, said once
    (attention,) = [line for line in res.stderr.splitlines() if "warning" in line]
    assert "attn_implementation is auto" in attention and "efficient" in attention
    profile = site_profile(tmp_path, max_runtime=1440)
    res = run_plan(paper_workdir, env, "--profile", str(profile), "--json", *UNPINNED)
    assert res.returncode == 0, res.stderr
    (line,) = [line for line in res.stderr.strip().splitlines() if "max_runtime" in line]
    assert line.startswith("toolcall-repro plan: warning: 9 train_grpo job(s) ask for 2880 min, above the "
                           "site's max_runtime 1440 min")  # fmt: skip
    assert json.loads(res.stdout)["over_time_limit"] == {"train_grpo": {"jobs": 9, "runtime_min": 2880}}


def test_plan_names_a_gated_repository_when_no_token_is_set(paper_workdir, tmp_path, fake_cluster_env):
    """With the hub lock (toolcall-repro lock-hub; here from a stand-in of the hub) recording xLAM as gated,
    the plan stops in one line per gated repository before any job when the submit host has no token."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_hub_lock import stand_in
    from toolcall_repro import hub_lock
    from toolcall_repro.configarg import merged_config

    config = merged_config([REPO / "config" / "paper.yaml"], REPO / "config" / "config.yaml")
    pins, _ = hub_lock.resolve(stand_in(), hub_lock.entries(config))
    lock = hub_lock.write_lock(tmp_path / "paper.hub-lock.yaml", pins, "config/paper.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(fake_cluster_env, PYTHONPATH=str(REPO / "src"), HF_HOME=str(tmp_path / "hf-home"))
    res = run_plan(paper_workdir, env, "--configfile", "config/paper.yaml", str(lock))
    assert res.returncode == 1, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if "gated" in ln]
    assert line.startswith("toolcall-repro plan: data.sources.xlam.revision: dataset Salesforce/xlam-function")
    assert "https://huggingface.co/datasets/Salesforce/xlam-function-calling-60k" in line
    ok = run_plan(paper_workdir, {**env, "HF_TOKEN": "hf_stand_in"}, "--configfile", "config/paper.yaml", str(lock))
    assert ok.returncode == 0, ok.stderr
