"""Science digests: timing is ignored, anything else that moves is caught, and a mismatch names the first
stage in DAG order with what its records say differs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from toolcall_repro import cli, digests


def write_job(run: Path, rule: str, key: str, inputs: dict, outputs: dict, machine: dict | None = None) -> None:
    """A job as the job entry leaves it: its outputs on disk and its manifest."""
    for rel, text in outputs.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text(text)
    manifest = {
        "rule": rule,
        "config_sha256": "c" * 64,
        "git": {"commit": "a" * 40},
        "machine": machine or {"torch_capability": "avx2", "kernel_env": {"ATEN_CPU_CAPABILITY": "avx2"}},
        "inputs": {f"results/{run.name}/{i}": "x" for i in inputs},
        "outputs": {f"results/{run.name}/{o}": "x" for o in outputs},
        "wall_clock_s": 1.0,
    }
    path = run / "manifests" / rule / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))


def make_run(root: Path, weights: str = "w1", table_acc: str = "0.5", wall: str = "3.1", machine=None) -> Path:
    run = root / "ci-smoke"
    write_job(run, "normalise_source", "xlam", [], {"data/xlam.jsonl": '{"id": 1, "q": "a"}\n'})
    write_job(run, "warmstart_base_model", "all", ["data/xlam.jsonl"], {"models/base/model.safetensors": weights,
                                                                          "models/base/log.log": wall}, machine)
    write_job(
        run,
        "make_tables",
        "all",
        ["models/base/model.safetensors"],
        {"tables/csv/t.csv": f"model,accuracy,wall_clock_s\nbase,{table_acc},{wall}\n",
         "tables/summary.json": json.dumps({"accuracy": table_acc, "timing": {"gen": wall}, "cpu_s": wall})},
    )
    return run


def test_timing_keys_and_columns_are_left_out_and_results_are_not():
    for key in ("wall_clock_s", "cpu_s", "finished_at", "timing_s/gen", "time_to_target", "speedup", "update_time",
                "throughput", "latency", "update_share", "gpu_hours", "cost_ratio", "step_costs", "predicted_step_ratio"):
        assert digests.is_timing(key), key
    for key in ("accuracy", "steps", "keep_ratio", "rollouts", "n_groups", "seeds", "reward_std", "heldout_size"):
        assert not digests.is_timing(key), key


def test_a_change_of_timing_alone_keeps_every_digest(tmp_path):
    a = digests.digest_run(make_run(tmp_path / "a", wall="3.1"))
    b = digests.digest_run(make_run(tmp_path / "b", wall="97.0"))
    ok, lines = digests.check_run(b, a)
    assert ok, lines
    assert list(a["jobs"]) == ["normalise_source/xlam", "warmstart_base_model/all", "make_tables/all"]
    assert "models/base/log.log" not in a["jobs"]["warmstart_base_model/all"]["outputs"]


def test_a_mismatch_names_the_first_stage_in_dag_order_and_why(tmp_path):
    ref = digests.digest_run(make_run(tmp_path / "a"))
    other_kernels = {"torch_capability": "avx512", "kernel_env": {"ATEN_CPU_CAPABILITY": "avx512"}}
    run = digests.digest_run(make_run(tmp_path / "b", weights="w2", table_acc="0.6", machine=other_kernels))
    ok, lines = digests.check_run(run, ref)
    text = "\n".join(lines)
    assert not ok and lines[0].startswith("MISMATCH")
    assert "first stage whose output differs, in DAG order: warmstart_base_model/all" in text
    assert "differs: models/base/model.safetensors" in text
    assert "machine: torch_capability: 'avx2' -> 'avx512'" in text
    assert "kernel_env.ATEN_CPU_CAPABILITY" in text
    assert "1 later job(s) differ too" in text and "make_tables/all" in text


def test_a_table_cell_that_moves_is_caught(tmp_path):
    ref = digests.digest_run(make_run(tmp_path / "a"))
    ok, lines = digests.check_run(digests.digest_run(make_run(tmp_path / "b", table_acc="0.51")), ref)
    assert not ok
    assert "first stage whose output differs, in DAG order: make_tables/all" in "\n".join(lines)


def test_parquet_digests_ignore_timing_columns_and_see_values(tmp_path):
    def parquet(name, frame):
        frame.to_parquet(tmp_path / name)
        return digests.science_digest(tmp_path / name)

    base = parquet("a.parquet", pd.DataFrame({"id": [1, 2], "reward": [0.5, 1.0], "gen_time": [1.0, 2.0]}))
    assert base == parquet("b.parquet", pd.DataFrame({"id": [1, 2], "reward": [0.5, 1.0], "gen_time": [9.0, 9.0]}))
    assert base != parquet("c.parquet", pd.DataFrame({"id": [1, 2], "reward": [0.5, 1.0 + 1e-12], "gen_time": [1.0, 2.0]}))


def test_bfcls_result_files_json_lines_under_a_json_name_drop_each_entrys_latency(tmp_path):
    def result(name, latency, text="<tool_call>"):
        lines = [{"id": f"simple_python_{i}", "result": text, "input_token_count": 9, "latency": latency * i}
                 for i in range(2)]  # fmt: skip
        (tmp_path / name).write_text("".join(json.dumps(x) + "\n" for x in lines))
        return digests.science_digest(tmp_path / name)

    base = result("a_result.json", 0.1)
    assert base == result("b_result.json", 7.3)  # another machine's latency
    assert base != result("c_result.json", 0.1, text="[f()]")  # another output
    (tmp_path / "d.json").write_text("{not json\n")
    assert digests.science_digest(tmp_path / "d.json") == hashlib.sha256(b"{not json\n").hexdigest()
    lines = (tmp_path / "a_result.json").read_bytes()  # JSON lines that are not bfcl's results: their bytes
    (tmp_path / "rows.json").write_bytes(lines)
    assert digests.science_digest(tmp_path / "rows.json") == hashlib.sha256(lines).hexdigest()


def test_cli_writes_a_reference_and_fails_on_a_mismatch(tmp_path, capsys):
    ref = tmp_path / "expected.json"
    assert cli.main(["digests", str(make_run(tmp_path / "a")), "--write", str(ref)]) == 0
    assert cli.main(["digests", str(make_run(tmp_path / "a")), "--check", str(ref)]) == 0
    assert cli.main(["digests", str(make_run(tmp_path / "b", weights="w2")), "--check", str(ref)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "warmstart_base_model/all" in out


@pytest.mark.parametrize("rel", ["logs/x.log", "figures/a.png", "train/s/v/checkpoints/step3/optim.pt", "manifests/r/k.json", "provenance.json"])
def test_renderings_logs_and_resume_state_are_not_digested(rel):
    assert digests.skip_reason(rel)


def test_the_claims_scorecard_is_not_digested():
    # a reading of digested tables whose rows mix timing (speedups) with results: digested where it came from
    assert "scorecard" in digests.skip_reason("tables/claims.csv")
    assert digests.skip_reason("tables/csv/claims_like.csv") is None


INTEL = {"cpu_vendor": "GenuineIntel", "kernel_env": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}}
AMD = {"cpu_vendor": "AuthenticAMD", "kernel_env": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}}


def on_machine(run: Path, facts: dict) -> Path:
    """The run as if every job had run on that machine."""
    for path in (run / "manifests").rglob("*.json"):
        manifest = json.loads(path.read_text())
        path.write_text(json.dumps({**manifest, "machine": facts}))
    return run


def test_a_folder_of_references_holds_each_run_against_its_mkl_branch(tmp_path, capsys):
    """At `avx2` MKL runs its AVX2 branch on Intel and AUTO elsewhere: a folder holds one reference per
    branch (mkl-<branch>.json), a run is checked against its own, and a missing one says so."""
    refs = tmp_path / "refs"
    refs.mkdir()
    intel = on_machine(make_run(tmp_path / "intel", weights="w-intel"), INTEL)
    amd = on_machine(make_run(tmp_path / "amd", weights="w-amd"), AMD)
    assert cli.main(["digests", str(intel), "--write", str(refs)]) == 0
    assert sorted(p.name for p in refs.iterdir()) == ["mkl-avx2.json"]
    assert cli.main(["digests", str(amd), "--check", str(refs)]) == 1
    out = capsys.readouterr().out
    assert "no reference" in out and "'auto' branch" in out and "mkl-avx2.json" in out
    assert cli.main(["digests", str(amd), "--write", str(refs)]) == 0
    assert sorted(p.name for p in refs.iterdir()) == ["mkl-auto.json", "mkl-avx2.json"]
    capsys.readouterr()
    assert cli.main(["digests", str(intel), "--check", str(refs)]) == 0
    assert "mkl-avx2.json (MKL branch 'avx2')" in capsys.readouterr().out
    assert cli.main(["digests", str(amd), "--check", str(refs)]) == 0
    other = on_machine(make_run(tmp_path / "other", weights="w-other"), AMD)
    assert cli.main(["digests", str(other), "--check", str(refs)]) == 1
    assert "warmstart_base_model/all" in capsys.readouterr().out


def test_a_run_of_two_mkl_branches_has_no_reference(tmp_path):
    run = make_run(tmp_path, machine=INTEL)  # the warm start on Intel, the other jobs unpinned
    ok, lines = digests.check_reference(run, tmp_path)
    assert not ok and "MKL branches ['avx2', 'native']" in lines[0]
