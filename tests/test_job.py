"""The job entry: a spec in, the stage run, every output checked, the manifest written from the same spec."""

import json
import os

import pytest

from toolcall_repro import job, jobspec, provenance, sheet, stage
from toolcall_repro.data.schema import read_samples


def spec(tmp_path, **over):
    raw, manifest = tmp_path / "raw" / "xlam.jsonl", tmp_path / "manifests" / "synthesize_source" / "xlam.json"
    base = {
        "rule": "synthesize_source",
        "stage": "synthesize_source",
        "input": {},
        "output": {"raw": str(raw), "manifest": str(manifest)},
        "files": {"input": [], "output": [str(raw), str(manifest)]},
        "config": {"rows": 12, "malformed": 2},
        "seeds": {"data": 5},
        "options": {"source": "xlam"},
        "gpus": 0,
    }
    base.update(over)
    return base


def test_a_job_runs_its_stage_and_records_what_the_spec_says(tmp_path):
    s = spec(tmp_path)
    assert job.main([json.dumps(s)]) == 0
    raw = tmp_path / "raw" / "xlam.jsonl"
    assert len(raw.read_text().splitlines()) == 14  # 12 rows + 2 malformed on purpose
    m = json.loads((tmp_path / "manifests" / "synthesize_source" / "xlam.json").read_text())
    assert m["rule"] == "synthesize_source" and m["config"] == {"rows": 12, "malformed": 2}
    assert m["config_sha256"] == provenance.config_hash(s["config"]) and m["seeds"] == {"data": 5}
    assert m["options"] == {"source": "xlam"}
    # the manifest checksums the outputs, not itself
    assert m["outputs"] == {str(raw): provenance.sha256_file(raw)}
    assert m["cpu_s"] > 0 and m["device_s"] == m["cpu_s"] and m["wall_clock_s"] >= 0


def test_the_same_spec_gives_the_same_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        assert job.main([json.dumps(spec(d))]) == 0
    assert (a / "raw" / "xlam.jsonl").read_bytes() == (b / "raw" / "xlam.jsonl").read_bytes()


def test_a_stage_reads_named_inputs_and_lists(tmp_path):
    assert job.main([json.dumps(spec(tmp_path))]) == 0
    raw = str(tmp_path / "raw" / "xlam.jsonl")
    out = {n: str(tmp_path / "norm" / f"xlam.{n}") for n in ("parquet", "rejects.jsonl", "report.json")}
    manifest = str(tmp_path / "manifests" / "normalise_source" / "xlam.json")
    outputs = {"samples": out["parquet"], "rejects": out["rejects.jsonl"], "report": out["report.json"]}
    s = {
        "rule": "normalise_source",
        "stage": "normalise_source",
        "input": {"raw": raw},
        "output": {**outputs, "manifest": manifest},
        "files": {"input": [raw], "output": [*outputs.values(), manifest]},
        "config": {"source": "xlam"},
    }
    assert job.main([json.dumps(s)]) == 0
    report = json.loads((tmp_path / "norm" / "xlam.report.json").read_text())
    assert report["rows_rejected"] == 2 and len(read_samples(out["parquet"])) == report["samples"] > 0
    m = json.loads((tmp_path / "manifests" / "normalise_source" / "xlam.json").read_text())
    assert m["inputs"] == {raw: provenance.sha256_file(raw)}


def test_a_failing_stage_writes_no_manifest(tmp_path):
    s = spec(tmp_path, options={"source": "no-such-source"})
    with pytest.raises(ValueError):
        job.main([json.dumps(s)])
    assert not (tmp_path / "manifests").exists()


def test_a_declared_output_the_stage_did_not_write_fails_the_job(tmp_path):
    never = str(tmp_path / "never.json")
    s = spec(tmp_path)
    s["files"]["output"].append(never)
    assert job.main([json.dumps(s)]) == 3
    assert not (tmp_path / "manifests" / "synthesize_source" / "xlam.json").exists()


@pytest.mark.parametrize(
    "change, words",
    [
        ({"stage": "synthesise"}, ["stage 'synthesise'", "synthesize_source"]),
        ({"confg": {}}, ["unknown key(s) ['confg']", "config"]),
        ({"rule": ""}, ["'rule' must be a non-empty string"]),
    ],
)
def test_a_bad_spec_is_refused_with_the_key_and_what_is_allowed(tmp_path, capsys, change, words):
    assert job.main([json.dumps(spec(tmp_path, **change))]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert not (tmp_path / "raw").exists()


def test_accessors_name_the_rule_and_what_is_there():
    j = jobspec.Job(rule="r", stage="pool_tooln1", input={"a": "x", "b": ["y", "z"]}, output={"o": "p"})
    assert j.path("a") == "x" and j.paths("a") == ["x"] and j.paths("b") == ["y", "z"] and j.out("o") == "p"
    with pytest.raises(jobspec.JobError, match=r"r: input 'b' is a list of 2"):
        j.path("b")
    with pytest.raises(jobspec.JobError, match=r"r: no input named 'c'; named: \['a', 'b'\]"):
        j.path("c")
    with pytest.raises(jobspec.JobError, match=r"r: seed 'filter' is not set"):
        j.seed("filter")
    assert j.option("threads", 1) == 1


@pytest.mark.parametrize("stage", sorted(sheet.STAGES))
def test_every_stage_names_a_function_that_exists(stage):
    assert callable(job.stage_function(stage))


def test_the_rule_files_come_apart_from_the_spec_and_the_spec_wins(tmp_path):
    """params.job (what runs, recorded by Snakemake's rerun trigger) and params.files (the paths); a
    spec without a rule is the rule of its stage's name."""
    s = spec(tmp_path)
    files = {k: s.pop(k) for k in ("input", "output", "files", "rule")}
    files["gpus"] = 4
    s["gpus"] = 0  # the spec's own gpus (e.g. a multi-node run's) win over resources.gpu
    assert job.main([json.dumps(s), json.dumps(files)]) == 0
    m = json.loads((tmp_path / "manifests" / "synthesize_source" / "xlam.json").read_text())
    assert m["rule"] == "synthesize_source" and m["device_s"] == m["cpu_s"]


def test_a_twin_rule_names_itself_and_runs_its_stage(tmp_path):
    assert job.main([json.dumps(spec(tmp_path, rule="synthesize_twin"))]) == 0
    m = json.loads((tmp_path / "manifests" / "synthesize_source" / "xlam.json").read_text())
    assert m["rule"] == "synthesize_twin" and (tmp_path / "raw" / "xlam.jsonl").exists()


def test_a_stage_runs_by_hand_through_the_function_its_rule_runs(tmp_path, capsys):
    """`toolcall-repro stage NAME`: the same function, named inputs/outputs, config, seeds, options."""
    from toolcall_repro.cli import main

    raw, manifest = tmp_path / "raw.jsonl", tmp_path / "m.json"
    argv = ["stage", "synthesize_source", "--out", f"raw={raw}", "--out", f"manifest={manifest}",
            "--config", '{"rows": 12, "malformed": 2}', "--seed", "data=5", "--option", "source=xlam"]  # fmt: skip
    assert main(argv) == 0
    assert len(raw.read_text().splitlines()) == 14
    m = json.loads(manifest.read_text())
    assert m["rule"] == "synthesize_source" and m["seeds"] == {"data": 5} and m["options"] == {"source": "xlam"}
    # the same bytes as the rule's own job
    assert job.main([json.dumps(spec(tmp_path))]) == 0
    assert raw.read_bytes() == (tmp_path / "raw" / "xlam.jsonl").read_bytes()


def test_hand_jobs_list_repeated_names_and_parse_option_values():
    j = stage.hand_job("report_filter", inputs=["steps=a.json", "steps=b.json", "rejects=r.jsonl"],
                     outputs=["json=o.json"], options=["threads=2", "backend=vllm", "verl={\"nodes\": 1}"])  # fmt: skip
    assert j.paths("steps") == ["a.json", "b.json"] and j.path("rejects") == "r.jsonl"
    assert j.files == {"input": ["a.json", "b.json", "r.jsonl"], "output": ["o.json"]} and j.manifest is None
    assert j.options == {"threads": 2, "backend": "vllm", "verl": {"nodes": 1}}


@pytest.mark.parametrize(
    "argv, words",
    [
        (["stage", "synthesise"], ["stage 'synthesise' is not one of", "synthesize_source"]),
        (["stage", "synthesize_source", "--in", "raw"], ["--in 'raw': expected NAME=VALUE"]),
        (["stage", "synthesize_source", "--seed", "data=x"], ["--seed data='x': a seed is an integer"]),
        (["stage", "synthesize_source", "--config", "nowhere.yaml"], ["neither inline JSON nor an existing file"]),
    ],
)
def test_a_bad_hand_job_is_refused_naming_what_is_wrong(argv, words, capsys):
    from toolcall_repro.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


def test_describe_prints_what_the_stage_reads(capsys):
    from toolcall_repro.cli import main

    assert main(["stage", "score_bfcl", "--describe"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("score_bfcl (toolcall_repro.eval.bfcl.jobs):") and "input.results" in out


def nvidia_smi(tmp_path, monkeypatch, version):
    """A stand-in nvidia-smi on PATH that reports one GPU with this driver version."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"#!/usr/bin/env bash\necho {version}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_a_gpu_job_on_a_node_with_an_old_driver_stops_before_its_stage(tmp_path, monkeypatch, capsys):
    nvidia_smi(tmp_path, monkeypatch, "535.104.05")
    assert job.main([json.dumps(spec(tmp_path, gpus=1))]) == 5
    err = capsys.readouterr().err
    assert "synthesize_source: gpu driver: found 535.104.05" in err and "driver >= 580" in err
    assert not (tmp_path / "raw").exists() and not (tmp_path / "manifests").exists()


def test_a_gpu_job_runs_on_a_new_driver_and_a_cpu_job_never_asks(tmp_path, monkeypatch, capsys):
    nvidia_smi(tmp_path, monkeypatch, "580.82.07")
    assert job.main([json.dumps(spec(tmp_path / "gpu", gpus=1))]) == 0
    assert "gpu driver: found 580.82.07" in capsys.readouterr().out
    # a CPU job (gpus 0) does not ask, whatever the driver
    (tmp_path / "bin" / "nvidia-smi").write_text("#!/usr/bin/env bash\necho 470.57.02\n")
    assert job.main([json.dumps(spec(tmp_path / "cpu"))]) == 0
    assert "gpu driver" not in capsys.readouterr().out


def test_a_gpu_job_without_nvidia_smi_runs_unchecked(tmp_path, monkeypatch):
    """The paper path on a CPU (train.verl.device: cpu) holds a logical GPU and has no driver to ask."""
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None if name == "nvidia-smi" else "/bin/" + name)
    assert job.main([json.dumps(spec(tmp_path, gpus=1))]) == 0
