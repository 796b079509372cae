"""The train_grpo rule's entry point picks the engine and passes the same inputs to either."""

import argparse
import json

import pytest

from toolcall_repro.engines import train


def parse(*extra):
    argv = ["--train", "t.parquet", "--heldout", "h.parquet", "--base", "m", "--config", '{"n": 8}',
            "--out", "o", "--seed", "3", *extra]  # fmt: skip
    p = argparse.ArgumentParser()
    for flag in [
        "--engine",
        "--train",
        "--heldout",
        "--base",
        "--config",
        "--out",
        "--verl",
        "--verl-launcher",
    ]:
        p.add_argument(flag)
    for flag in ["--seed", "--threads", "--nodes"]:
        p.add_argument(flag, type=int, default=1)
    return p.parse_args(argv)


def test_local_command_resumes_from_checkpoints():
    cmd = train.local_command(parse("--threads", "1"))
    assert cmd[cmd.index("--config") + 1] == '{"n": 8}'
    assert cmd[-1] == "--resume" and cmd[cmd.index("--seed") + 1] == "3"


@pytest.mark.parametrize("nodes", [1, 2])
def test_verl_command_runs_the_launcher_with_nodes_and_gpus(nodes):
    verl = json.dumps({"nodes": nodes, "gpus_per_node": 8})
    args = parse(
        "--nodes", str(nodes), "--verl", verl, "--verl-launcher", "workflow/scripts/verl/launch_verl.sh"
    )
    cmd = train.verl_command(args)
    assert cmd[:2] == ["bash", "workflow/scripts/verl/launch_verl.sh"]
    assert cmd[cmd.index("--nodes") + 1] == str(nodes)
    assert cmd[cmd.index("--gpus-per-node") + 1] == "8"
    assert json.loads(cmd[cmd.index("--verl-config") + 1])["nodes"] == nodes
