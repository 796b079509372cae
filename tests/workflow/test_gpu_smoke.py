"""scripts/gpu_smoke.sh on a CPU: syntax, the commands its --dry-run prints, and the parts a CPU can run.

The GPU parts (verl training, `vllm serve`, lm-eval on vLLM) run only on a user's GPU; here the script's
data steps run for real, its BFCL command is parsed by the real CLI, and its training arguments go
through the project's own `prepare` (verl's config validation, in .venv-verl) with a tiny model.
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


def test_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_dry_run_prints_the_paper_path_in_order(tmp_path):
    out = dry_run("--model", "Qwen/Qwen2.5-0.5B-Instruct", "--out", str(tmp_path / "smoke"),
                  env={"VERL_PYTHON": "/envs/verl/bin/python", "MAIN_PYTHON": "/envs/main/bin/python"})  # fmt: skip
    cmds = commands(out)
    download = find(cmds, "toolcall_repro.data.download", "model")
    assert arg(download, "--hub-id") == "Qwen/Qwen2.5-0.5B-Instruct"
    train, resume = [c for c in cmds if "workflow/scripts/verl/launch_verl.sh" in c]
    run = json.loads(arg(train, "--config"))
    assert (run["n"], run["downsample"]["m"], run["epochs"]) == (4, 2, 2) and run["filter"]["k"] == 1
    # 1b: the same run, checkpointed every step, in a folder of its own (killed at step 2, then resumed)
    assert json.loads(arg(resume, "--config")) == {**run, "checkpoint_every": 1}
    assert arg(resume, "--out").endswith("train_resume") and arg(resume, "--out") != arg(train, "--out")
    verl = json.loads(arg(train, "--verl-config"))
    assert verl["gpus_per_node"] == int(arg(train, "--gpus-per-node")) == 1
    assert "dataloader" not in out and "extra_overrides" not in verl  # verl's default workers, untouched
    bfcl = find(cmds, "toolcall_repro.eval.bfcl", "run")
    assert bfcl[0] == "/envs/main/bin/python"
    assert (arg(bfcl, "--limit"), arg(bfcl, "--backend"), arg(bfcl, "--vllm-bin")) == ("5", "vllm", "/envs/verl/bin/vllm")
    assert arg(bfcl, "--model-dir") == arg(train, "--out") + "/final"  # the trained checkpoint is served
    general = find(cmds, "toolcall_repro.eval.general")
    assert general[0] == "/envs/verl/bin/python"
    assert (arg(general, "--limit"), arg(general, "--backend"), arg(general, "--tasks")) == ("50", "vllm", "hellaswag")
    order = [cmds.index(c) for c in (download, train, bfcl, general)]
    assert order == sorted(order)
    for check in ("filter epoch == verl epoch", "update rows = m per group", "final checkpoint loads",
                  "zero inference errors", "50 documents"):  # fmt: skip
        assert check in out


def test_bfcl_arguments_parse_with_the_real_cli(tmp_path):
    from toolcall_repro.eval.bfcl.__main__ import build_parser, parse_protocol

    bfcl = find(commands(dry_run("--out", str(tmp_path))), "toolcall_repro.eval.bfcl", "run")
    args = build_parser().parse_args(bfcl[3:])
    assert args.limit == 5 and args.categories == ["simple_python"]
    protocol_id, protocol = parse_protocol(args.protocol, args.seed, args.backend)
    assert protocol_id == "stronger" and protocol.backend == "vllm"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, tiny_model_dir):
    """The script's data steps run for real, then its training arguments through the project's `prepare`."""
    tmp = tmp_path_factory.mktemp("smoke")
    cmds = commands(dry_run("--model", str(tiny_model_dir), "--out", str(tmp / "smoke")))
    data = [c for c in cmds if "-m" in c and c[c.index("-m") + 1].startswith("toolcall_repro.data.")]
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
