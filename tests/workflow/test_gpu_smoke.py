"""scripts/gpu_smoke.sh on a CPU: syntax, the commands its --dry-run prints, and the parts a CPU can run.

The GPU parts (verl training, `vllm serve`, lm-eval on vLLM) run only on a user's GPU; here the script's
data steps run for real, its BFCL and lm-eval steps are parsed into the jobs the real stage CLI would run
(`toolcall-repro stage`), and its training arguments go through the project's own `prepare` (verl's
config validation, in .venv-verl) with a tiny model.
"""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_smoke.sh"
VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"


def dry_run(*args, env=None):
    res = subprocess.run(["bash", str(SCRIPT), "--dry-run", *args], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout


def commands(stdout: str) -> list[list[str]]:
    return [shlex.split(line[2:]) for line in stdout.splitlines() if line.startswith("+ ") and "check:" not in line]


def find(cmds, *needle):
    hits = [c for c in cmds if all(n in c for n in needle)]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def arg(cmd, flag):
    return cmd[cmd.index(flag) + 1]


def stage_job(cmd):
    """The job the stage command would run, built by the real CLI's parser (`toolcall-repro stage`)."""
    from toolcall_repro.stage import job_from_argv

    at = cmd.index("toolcall_repro.cli")
    assert cmd[at + 1] == "stage", cmd
    return job_from_argv(cmd[at + 2 :])


def test_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_dry_run_prints_the_paper_path_in_order(tmp_path):
    out = dry_run("--model", "Qwen/Qwen2.5-0.5B-Instruct", "--out", str(tmp_path / "smoke"),
                  env={"VERL_PYTHON": "/envs/verl/bin/python", "MAIN_PYTHON": "/envs/main/bin/python"})  # fmt: skip
    cmds = commands(out)
    download = find(cmds, "download_model")
    assert stage_job(download).config == {"hub_id": "Qwen/Qwen2.5-0.5B-Instruct"}
    train, resume = [c for c in cmds if "workflow/scripts/verl/launch_verl.sh" in c]
    run = json.loads(arg(train, "--config"))
    assert (run["n"], run["downsample"]["m"], run["epochs"]) == (4, 2, 2) and run["filter"]["k"] == 1
    # 1b: the same run, checkpointed every step, in a folder of its own (killed at step 2, then resumed)
    assert json.loads(arg(resume, "--config")) == {**run, "checkpoint_every": 1}
    assert arg(resume, "--out").endswith("train_resume") and arg(resume, "--out") != arg(train, "--out")
    verl = json.loads(arg(train, "--verl-config"))
    assert verl["gpus_per_node"] == int(arg(train, "--gpus-per-node")) == 1
    assert "dataloader" not in out and "extra_overrides" not in verl  # verl's default workers, untouched
    # BFCL as the workflow runs it: locate_vllm in the verl env, generate_bfcl serving its record, score_bfcl
    locate, bfcl, score = find(cmds, "locate_vllm"), stage_job(find(cmds, "generate_bfcl")), find(cmds, "score_bfcl")
    assert locate[0] == "/envs/verl/bin/python" and find(cmds, "generate_bfcl")[0] == "/envs/main/bin/python"
    assert bfcl.path("vllm") == stage_job(locate).out("vllm")
    assert bfcl.config["bfcl"] == {"categories": ["simple_python"], "limit": 5}
    assert bfcl.config["protocol"]["backend"] == "vllm" and bfcl.seed("eval") == 0 and bfcl.gpus == 1
    assert bfcl.path("model") == arg(train, "--out") + "/final"  # the trained checkpoint is served
    assert stage_job(score).path("results") == bfcl.out("results")
    assert stage_job(score).config["protocol"] == bfcl.config["protocol"]
    general = find(cmds, "check_general_capability")
    assert general[0] == "/envs/verl/bin/python"
    job = stage_job(general)
    assert job.config["general"] == {"tasks": "hellaswag", "num_fewshot": 0, "limit": 50}
    assert job.option("backend") == "vllm" and job.path("model") == bfcl.path("model")
    order = [cmds.index(c) for c in (download, train, locate, find(cmds, "generate_bfcl"), score, general)]
    assert order == sorted(order)
    for check in ("filter epoch == verl epoch", "update rows = m per group", "final checkpoint loads",
                  "zero inference errors", "50 documents"):  # fmt: skip
        assert check in out


def test_bfcl_arguments_parse_with_the_real_cli(tmp_path):
    """The generate_bfcl job the script runs reads what the stage reads: its protocol parses, its limit is
    what generate takes."""
    from toolcall_repro.eval.bfcl.jobs import config_limit, parse_protocol

    job = stage_job(find(commands(dry_run("--out", str(tmp_path))), "generate_bfcl"))
    assert config_limit(job.config["bfcl"]["limit"]) == 5 and job.config["bfcl"]["categories"] == ["simple_python"]
    protocol_id, protocol = parse_protocol(job.config["protocol"], job.seed("eval"), job.config["protocol"]["backend"])
    assert protocol_id == "stronger" and protocol.backend == "vllm"
    assert float(job.option("gpu_memory_utilization")) == 0.8 and int(job.option("threads")) == 1


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, tiny_model_dir):
    """The script's data steps run for real, then its training arguments through the project's `prepare`."""
    tmp = tmp_path_factory.mktemp("smoke")
    cmds = commands(dry_run("--model", str(tiny_model_dir), "--out", str(tmp / "smoke")))
    data_stages = ("download_model", "synthesize_source", "normalise_source", "pool_tooln1")
    data = [c for c in cmds if "toolcall_repro.cli" in c and c[c.index("toolcall_repro.cli") + 2] in data_stages]
    assert len(data) == 3  # synthetic -> normalise -> train/held-out split; no download for a local model
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for c in data:
        res = subprocess.run([sys.executable, *c[1:]], cwd=REPO, env=env, capture_output=True, text=True)
        assert res.returncode == 0, (c, res.stderr[-2000:])
    train = next(c for c in cmds if "workflow/scripts/verl/launch_verl.sh" in c)  # the first run (not 1b)
    if not VERL_PYTHON.exists():
        pytest.skip("no .venv-verl (scripts/install-verl-env.sh): verl's validation of the smoke run not checked")
    prepare = [str(VERL_PYTHON), "-m", "toolcall_repro.engines.verl", "prepare", *train[2:]]
    res = subprocess.run(prepare, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return res, Path(arg(train, "--out")) / "verl", env


def test_training_arguments_pass_verl_validation(prepared):
    res, work, _ = prepared
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert (work / "overrides.txt").exists() and (work / "train.parquet").exists()


COMPOSED_ATTENTION = """
import importlib.util, json, sys
from toolcall_repro.engines.verl import hydra
from toolcall_repro.engines.verl.main import compose_config
cfg = compose_config(hydra.read_overrides(open(sys.argv[1]).read()))
override = cfg.actor_rollout_ref.model.get("override_config") or {}
print(json.dumps({"attn": override.get("attn_implementation", "flash_attention_2 (verl default)"),
                  "flash_attn": importlib.util.find_spec("flash_attn") is not None}))
"""


def test_composed_config_uses_an_attention_implementation_its_env_has(prepared):
    """Defect 2: verl's default flash_attention_2 without flash-attn fails in init_workers on the GPU.

    No env file has flash-attn (tests/test_locks.py), so the composed config of a job must name an attention
    implementation the env it runs in has. The composed config is engines/verl's (hydra.py).
    """
    res, work, env = prepared
    assert res.returncode == 0, res.stderr[-3000:]
    out = subprocess.run([str(VERL_PYTHON), "-c", COMPOSED_ATTENTION, str(work / "overrides.txt")], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["flash_attn"] or not found["attn"].startswith("flash_attention"), found
