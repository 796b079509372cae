"""The train_grpo job picks the engine and passes the same inputs to either; verl's launcher (a bash
script, a process of its own) gets an argv and its exit status is the job's."""

import json
import stat

import pytest

from toolcall_repro.engines import train
from toolcall_repro.job import run
from toolcall_repro.jobspec import Job

RUN = {"n": 8, "batch_size": 4}


def train_job(tmp_path, engine="verl", nodes=1, launcher="workflow/scripts/verl/launch_verl.sh"):
    out = tmp_path / "train" / "multi_turn" / "efficient"
    output = {n.split(".")[0]: str(out / n) for n in ("metrics.jsonl", "curve.jsonl", "summary.json", "final")}
    output["manifest"] = str(tmp_path / "manifests" / "train_grpo" / "multi_turn-efficient.json")
    inputs = {"train": "t.parquet", "heldout": "h.parquet", "base": "m"}
    return Job(
        rule="train_grpo",
        stage="train_grpo",
        input=inputs,
        output=output,
        files={"input": [], "output": list(output.values())},
        config=RUN,
        seeds={"train": 3},
        options={"engine": engine, "threads": 1, "nodes": nodes, "launcher": launcher,
                 "verl": {"nodes": nodes, "gpus_per_node": 8}},  # fmt: skip
        gpus=nodes * 8,
    )


@pytest.mark.parametrize("nodes", [1, 2])
def test_verl_command_runs_the_launcher_with_nodes_and_gpus(tmp_path, nodes):
    cmd = train.job_verl_command(train_job(tmp_path, nodes=nodes))
    assert cmd[:2] == ["bash", "workflow/scripts/verl/launch_verl.sh"]
    assert cmd[cmd.index("--nodes") + 1] == str(nodes)
    assert cmd[cmd.index("--gpus-per-node") + 1] == "8"
    assert json.loads(cmd[cmd.index("--verl-config") + 1])["nodes"] == nodes
    assert json.loads(cmd[cmd.index("--config") + 1]) == RUN and cmd[cmd.index("--seed") + 1] == "3"
    assert cmd[cmd.index("--out") + 1] == str(tmp_path / "train" / "multi_turn" / "efficient")


def fake_launcher(tmp_path, rc):
    """Stands in for launch_verl.sh (which needs GPUs): writes the run's outputs under --out, exits rc."""
    script = tmp_path / "launch.sh"
    script.write_text(
        "#!/usr/bin/env bash\nset -eu\n"
        'while [ $# -gt 0 ]; do [ "$1" = --out ] && OUT=$2; shift 2; done\n'
        'mkdir -p "$OUT/final"; for f in metrics.jsonl curve.jsonl summary.json final/model; do echo "{}" > "$OUT/$f"; done\n'
        f"exit {rc}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_the_verl_job_writes_its_manifest_after_the_launcher_with_its_gpus(tmp_path):
    job = train_job(tmp_path, nodes=2, launcher=fake_launcher(tmp_path, 0))
    assert run(job) == 0
    manifest = json.loads(open(job.manifest).read())
    assert manifest["config"] == RUN and manifest["seeds"] == {"train": 3}
    assert manifest["device_s"] == pytest.approx(manifest["wall_clock_s"] * 16, abs=0.01)


def test_a_failed_launcher_is_the_jobs_exit_status_and_leaves_no_manifest(tmp_path):
    job = train_job(tmp_path, launcher=fake_launcher(tmp_path, 7))
    assert run(job) == 7
    assert not (tmp_path / "manifests").exists()


def test_an_unknown_engine_is_refused(tmp_path):
    with pytest.raises(ValueError, match="engine 'gpu' is not one of"):
        train.train_grpo(train_job(tmp_path, engine="gpu"))
