"""write_provenance and archive_results through the job entry (toolcall_repro.job): the record's
config is the whole config, the archive packs the run and its config files; neither has a manifest."""

import json

from toolcall_repro import archive
from toolcall_repro.job import run
from toolcall_repro.jobspec import Job


def make_run(tmp_path):
    run_dir = tmp_path / "results" / "demo"
    (run_dir / "tables").mkdir(parents=True)
    (run_dir / "tables" / "index.md").write_text("# tables\n")
    for rule, wall in (("rule_a", 1.5), ("rule_b", 2.0)):
        (run_dir / "manifests" / rule).mkdir(parents=True)
        (run_dir / "manifests" / rule / "x.json").write_text(
            json.dumps({"rule": rule, "wall_clock_s": wall, "cpu_s": 1.0, "device_s": 0.5})
        )
    return run_dir


def test_the_record_job_sums_the_manifests_under_the_whole_config(tmp_path):
    run_dir = make_run(tmp_path)
    config = {"run_id": "demo", "train": {"seed": 0}}
    out = str(run_dir / "provenance.json")
    job = Job(rule="write_provenance", stage="write_provenance", input={"tables": str(run_dir / "tables" / "index.md")},
              output={"record": out}, files={"input": [], "output": [out]}, config=config,
              options={"run_dir": str(run_dir)})  # fmt: skip
    assert run(job) == 0
    record = json.loads(open(out).read())
    assert record["config"] == config and record["jobs"] == 2
    assert record["wall_clock_s"] == 3.5 and set(record["per_rule"]) == {"rule_a", "rule_b"}
    assert not (run_dir / "manifests" / "write_provenance").exists()


def test_the_archive_job_packs_the_run_and_its_config_files(tmp_path, capsys):
    run_dir = make_run(tmp_path)
    extra = tmp_path / "config.yaml"
    extra.write_text("run_id: demo\n")
    out = str(tmp_path / "archives" / "demo-x-y.tar.gz")
    job = Job(rule="archive_results", stage="archive_results",
              input={"record": str(run_dir / "provenance.json"), "config": [str(extra)]},
              output={"archive": out}, files={"input": [], "output": [out]},
              options={"run_dir": str(run_dir), "weights": "final"})  # fmt: skip
    assert run(job) == 0
    assert archive.verify_archive(out) == []
    names = {name for name, _ in archive.iter_members(out, lambda n: True)}
    assert "tables/index.md" in names and "manifests/rule_b/x.json" in names
    assert any(n.startswith("extra/") and n.endswith("/config.yaml") for n in names)
    assert "config files" in capsys.readouterr().out  # the size by part, for the log and the terminal
