"""A real end-to-end run of the CI smoke config (.test/config.yaml), then what a user does with it:
rerun after one knob changes, verify the archive, build the report.

The run happens in a working directory of its own. On CI, `.ci/run` has already run this config with
`make run RUN_CONFIG=.test/config.yaml` in the clone (the README's order: run, then test) and names that
clone in TOOLCALL_SMOKE_RUN: the tests check a copy of that run (results and Snakemake's metadata)
instead of running the workflow a second time, and write nothing into the clone.
"""

import functools
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from _workflow_helpers import REPO, copy_run, make_workdir, snakemake

CONFIG = ".test/config.yaml"
RUN_ID = yaml.safe_load((REPO / CONFIG).read_text())["run_id"]
GIVEN_RUN = "TOOLCALL_SMOKE_RUN"

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The smoke run's working directory."""
    return make_workdir(tmp_path_factory.mktemp("smoke"))


@pytest.fixture(scope="module")
def smk(work):
    return functools.partial(snakemake, cwd=work)


@pytest.fixture(scope="module")
def run_dir(work):
    return work / "results" / RUN_ID


@pytest.fixture(scope="module")
def smoke_run(work, smk, run_dir):
    given = os.environ.get(GIVEN_RUN)
    if given:
        src = Path(given) / "results" / RUN_ID
        assert (src / "provenance.json").is_file(), f"{GIVEN_RUN}={given} holds no completed {RUN_ID} run"
        copy_run(Path(given), RUN_ID, work)
        return
    res = smk("--cores", "2", "--configfile", CONFIG, timeout=1800)
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-5000:]


def test_every_stage_wrote_its_outputs(smoke_run, work, run_dir):
    for rel in [
        "data/filter_report.json", "data/filter_report.md", "models/base/config.json",
        "data/train/single_turn.parquet", "data/train/multi_turn.parquet",
        "train/single_turn/vanilla/metrics.jsonl", "train/multi_turn/efficient/curve.jsonl",
        "eval/bfcl/base/default/summary.json", "tables/index.md", "figures/index.md",
        "provenance.json",
    ]:  # fmt: skip
        assert (run_dir / rel).exists(), rel
    assert smoke_archive(work).exists()
    record = json.loads((run_dir / "provenance.json").read_text())
    manifests = list((run_dir / "manifests").rglob("*.json"))
    assert record["jobs"] == len(manifests) > 20
    m = json.loads((run_dir / "manifests" / "train_grpo" / "multi_turn-efficient.json").read_text())
    assert m["config"]["variant"] == "efficient" and m["config"]["downsample"]["m"] >= 1
    assert m["inputs"] and m["outputs"] and m["cpu_s"] > 0 and m["git"]["commit"]


def test_the_run_says_where_its_time_went(smoke_run, run_dir):
    """The finished run printed and kept its per-rule time table (Snakefile `onsuccess`): every rule with
    manifests is a row with as many jobs, and the rows' CPU seconds add up to the total."""
    import pandas as pd

    table = pd.read_csv(run_dir / "timing.csv").set_index("rule")
    for rule_dir in (run_dir / "manifests").iterdir():
        assert table.loc[rule_dir.name, "jobs"] == len(list(rule_dir.glob("*.json"))), rule_dir.name
    assert table.drop("total")["cpu_s"].sum() == pytest.approx(table.loc["total", "cpu_s"], abs=0.1)
    assert table.loc["total", "cpu_s"] > 0
    assert "| total |" in (run_dir / "timing.md").read_text()


def test_every_benchmark_card_names_the_model_by_the_same_checksum(smoke_run, run_dir):
    """BFCL, ACEBench, held-out and general cards of the base model carry one checksum, the folder's."""
    from toolcall_repro.provenance import model_sha256

    def card(rel):
        return json.loads((run_dir / "eval" / rel).read_text())["card"]

    want = model_sha256(run_dir / "models" / "base")
    assert card("bfcl/base/default/seed0.json")["model"]["checkpoint_sha256"] == want
    assert card("acebench/base/stronger/summary.json")["model"]["sha256"] == want
    assert card("heldout/base/default/summary.json")["model"]["sha256"] == want
    assert card("general/base/summary.json")["model_sha256"] == want


def test_the_run_computes_what_the_committed_reference_says(smoke_run, run_dir):
    """The CI-size run's science digests (timing left out) against the committed reference of its MKL
    branch (.test/expected/digests/mkl-<branch>.json): same config, code and lock give the same bytes on
    any machine that runs that branch (engines.cpu_capability pins the kernels; MKL takes the AVX2 branch
    on Intel CPUs only). On a mismatch the message names the first stage in DAG order whose outputs
    differ, and why."""
    from toolcall_repro import digests

    ok, lines = digests.check_reference(run_dir, REPO / ".test" / "expected" / "digests")
    assert ok, "\n".join(lines) + "\n(a deliberate change of numbers: `make reference`, committed with it)"


def test_every_manifest_names_the_machine_and_environment(smoke_run, run_dir):
    for path in sorted((run_dir / "manifests").rglob("*.json")):
        facts = json.loads(path.read_text())["machine"]
        assert facts["cpu_capability"] == "avx2", path
        assert facts["kernel_env"]["ATEN_CPU_CAPABILITY"] == "avx2", path
        assert facts["cpu_model"] and facts["python"] and len(facts["distributions_sha256"]) == 64, path
        if facts.get("torch"):
            assert facts["torch_capability"] == "avx2" and facts["torch"]["version"], path
    record = json.loads((run_dir / "provenance.json").read_text())
    assert record["machines"] and any(d.startswith("torch==") for d in record["distributions"])


def test_same_config_has_nothing_left_to_do(smoke_run, smk):
    res = smk("-n", "--configfile", CONFIG)
    assert res.returncode == 0
    assert "Nothing to be done" in res.stdout + res.stderr


def test_one_training_knob_reruns_only_that_training_and_what_follows(smoke_run, smk, tmp_path):
    cfg = yaml.safe_load((REPO / CONFIG).read_text())
    cfg["train"]["variants"]["efficient"]["downsample"]["m"] += 1
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(cfg))
    res = smk("-n", "-p", "--configfile", str(changed))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    stats = out.split("Job stats:")[1].split("total")[0]
    rerun = {line.split()[0] for line in stats.strip().splitlines()[2:]}
    assert "train_grpo" in rerun
    for upstream in ["synthesize_source", "normalise_source", "warmstart_base_model",
                     "filter_single_turn", "filter_multi_turn", "subset_format_study"]:  # fmt: skip
        assert upstream not in rerun, upstream
    trained = sorted(output_line(b) for b in job_blocks(out, "train_grpo"))
    assert len(trained) == 2
    assert "train/multi_turn/efficient/" in trained[0] and "train/single_turn/efficient/" in trained[1]
    scored = [output_line(b) for b in job_blocks(out, "score_bfcl")]
    assert scored and all("/eval/bfcl/base/" not in line for line in scored)


def job_blocks(dry_run_stdout: str, rule: str) -> list[str]:
    return [b for b in dry_run_stdout.split("\n\n") if f"rule {rule}:" in b]


def output_line(block: str) -> str:
    return next(line for line in block.splitlines() if line.strip().startswith("output:"))


def smoke_archive(work: Path) -> Path:
    """The run's one archive: <run_id>-<commit>-<config sha>.tar.gz in archive.dir's default,
    results/archives, outside the tree a rerun rewrites (toolcall_repro.archive)."""
    found = sorted((work / "results" / "archives").glob(f"{RUN_ID}-*.tar.gz"))
    assert len(found) == 1, found
    return found[0]


def test_archive_round_trips_and_names_a_flipped_byte(smoke_run, work, tmp_path):
    archive = smoke_archive(work)
    cli = [sys.executable, "-m", "toolcall_repro.cli", "verify"]
    ok = subprocess.run([*cli, str(archive)], capture_output=True, text=True)
    assert ok.returncode == 0 and "OK" in ok.stdout
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        assert any(n.endswith("tables/index.md") for n in names)
        assert any(n.endswith("provenance.json") for n in names)
        assert any("/manifests/" in n for n in names) and any("/logs/" in n for n in names)
        assert any(n.endswith("/ARCHIVE.json") for n in names)
        assert not any("/checkpoints/" in n for n in names)  # resume state is never archived
        target = next(n for n in names if n.endswith("provenance.json"))
        tampered = tmp_path / "tampered.tar.gz"
        with tarfile.open(tampered, "w:gz") as out:
            for member in tar.getmembers():
                data = tar.extractfile(member).read() if member.isfile() else None
                if member.name == target:
                    data = data.replace(b"{", b"[", 1)
                out.addfile(member, io.BytesIO(data) if data is not None else None)
    bad = subprocess.run([*cli, str(tampered)], capture_output=True, text=True)
    assert bad.returncode == 1 and target in bad.stdout


def test_html_report_builds(smoke_run, smk, work, run_dir):
    report = run_dir / "report.html"
    res = smk("--configfile", CONFIG, "--report", str(report.relative_to(work)))
    assert res.returncode == 0, res.stderr[-3000:]
    html = report.read_text(errors="replace")
    assert len(html) > 10_000 and "toolcall-repro" in html
