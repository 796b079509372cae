"""The train_grpo job through the job entry (toolcall_repro.job) on the local engine: the typed run
config reaches the trainer in-process, the outputs and the manifest are written, a rerun resumes."""

import json

from toolcall_repro.job import run
from toolcall_repro.jobspec import Job


def train_job(files, base, out, cfg, seed=3):
    names = ("metrics.jsonl", "curve.jsonl", "summary.json", "final")
    output = {n.split(".")[0]: str(out / n) for n in names}
    output["manifest"] = str(out / "manifests" / "train_grpo" / "single_turn-vanilla.json")
    inputs = {"train": str(files["single_turn"]), "heldout": str(files["heldout_single_turn"]), "base": str(base)}
    return Job(
        rule="train_grpo",
        stage="train_grpo",
        input=inputs,
        output=output,
        files={"input": list(inputs.values()), "output": list(output.values())},
        config=cfg,
        seeds={"train": seed},
        options={"engine": "local", "threads": 1, "nodes": 1, "verl": {"nodes": 1, "gpus_per_node": 0}},
    )


def test_local_train_job_writes_outputs_and_manifest_and_resumes(
    sample_files, base_model, tmp_path, make_config, capsys
):
    cfg = make_config(setting="single_turn", variant="vanilla", max_steps=2)
    job = train_job(sample_files, base_model, tmp_path, cfg)
    assert run(job) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["seed"] == 3 and summary["variant"] == "vanilla"
    assert summary["config"]["max_steps"] == 2 and summary["torch_threads"] == 1
    assert (tmp_path / "final" / "config.json").exists()
    manifest = json.loads(open(job.manifest).read())
    assert manifest["rule"] == "train_grpo" and manifest["config"] == cfg
    assert manifest["seeds"] == {"train": 3} and manifest["options"]["engine"] == "local"
    assert str(tmp_path / "summary.json") in manifest["outputs"]
    assert any(k.startswith(str(tmp_path / "final")) for k in manifest["outputs"])
    # a rerun of the same job continues from its own newest checkpoint (the local job always resumes)
    capsys.readouterr()
    assert run(job) == 0
    assert "resumed from" in capsys.readouterr().out
    assert json.loads((tmp_path / "summary.json").read_text())["resumed_from"] == [2]


def test_a_bad_run_config_fails_before_training_and_writes_no_manifest(
    sample_files, base_model, tmp_path, make_config
):
    import pytest

    cfg = make_config(setting="single_turn", variant="vanilla", loss_agg="seq-mean-token-sum")
    job = train_job(sample_files, base_model, tmp_path, cfg)
    with pytest.raises(ValueError, match="loss_agg"):
        run(job)
    assert not (tmp_path / "manifests").exists() and not (tmp_path / "summary.json").exists()
