"""The efficiency evidence (`make evidence`): its dry-run plans exactly the pre-registered design
(docs/efficiency.md, "Pre-registration 2"), read from the jobs' own specs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

from _workflow_helpers import fabricate_completed_run, make_workdir, snakemake

from toolcall_repro.plan import parse_dryrun

REPO = Path(__file__).resolve().parents[2]
# The pre-registered design, written out here on purpose: a change of config/evidence.yaml must fail this.
TRAININGS = {
    (s, v, k)
    for s in ("multi_turn", "single_turn")
    for v in ("vanilla", "efficient")
    for k in (0, 1, 2, 3, 4)
}
# Equal compute: efficient trains twice vanilla's passes (about half the CPU a pass in the first run).
PASSES = {
    ("multi_turn", "vanilla"): 5,
    ("multi_turn", "efficient"): 10,
    ("single_turn", "vanilla"): 4,
    ("single_turn", "efficient"): 8,
}
CHECKPOINT_EVERY = {"multi_turn": 28, "single_turn": 32}
HELDOUT = 400
TRAIN_PROMPTS = {"multi_turn": 448, "single_turn": 512}
SPLIT_SEED = 3  # filter.seed: the reserve and the held-out draw; earlier runs used 0 only
DATA_SEED = 3  # data seeds 0-2 were used before


def make_evidence_args() -> list[str]:
    """The snakemake arguments of `make evidence`, as make expands its recipe (nothing is run)."""
    out = subprocess.run(["make", "-s", "-n", "-C", str(REPO), "evidence"], capture_output=True, text=True)
    (line,) = [ln for ln in out.stdout.splitlines() if ".venv/bin/snakemake efficiency" in ln]
    return shlex.split(line.split(".venv/bin/snakemake", 1)[1])


def test_make_evidence_runs_the_efficiency_target_with_the_evidence_config():
    args = make_evidence_args()
    assert args[0] == "efficiency"  # before --configfile, which takes every argument after it
    assert args[-2:] == ["--configfile", "config/evidence.yaml"] and "--cores" in args
    assert "--rerun-incomplete" in args  # an interrupted sitting resumes (trainings from checkpoints)
    # multi-turn (the primary setting) first: its ten trainings' summaries are prioritised
    first = args[args.index("--prioritize") + 1 : args.index("--configfile")]
    assert len(first) == 10 and all(f.startswith("results/evidence/train/multi_turn/") for f in first)


def test_evidence_target_plans_the_preregistered_design(smk):
    res = smk("-n", "-p", "--nolock", *make_evidence_args())
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = parse_dryrun(res.stdout)
    rules = [j.rule for j in jobs]
    for rule in ("synthesize_source", "warmstart_base_model", "filter_multi_turn", "filter_single_turn"):
        assert rule in rules, rule
    assert rules.count("report_efficiency") == 1
    manifests = [j.spec["output"]["manifest"] for j in jobs if j.spec and j.rule != "archive_efficiency"]
    assert manifests and all(m.startswith("results/evidence/") for m in manifests)  # the archive has none

    train = [j for j in jobs if j.rule in ("train_grpo", "train_grpo_seed")]
    planned = {(j.run_config["setting"], j.run_config["variant"], j.spec["seeds"]["train"]) for j in train}
    assert planned == TRAININGS and len(train) == len(TRAININGS)
    for j in train:
        cfg = j.run_config
        assert cfg["epochs"] == PASSES[cfg["setting"], cfg["variant"]] and cfg["heldout_size"] == HELDOUT, (
            j.name
        )
        assert cfg["checkpoint_every"] == CHECKPOINT_EVERY[cfg["setting"]], j.name
        assert cfg["heldout_samples"] == 4 and cfg["n"] == 8 and cfg["batch_size"] == 8
        if cfg["variant"] == "efficient":
            assert cfg["filter"]["k"] == 1 and cfg["filter"]["probe_every"] == 2
            assert cfg["downsample"] == {"m": 4, "selection": "max_variance", "advantage_scope": "subset"}
        else:
            assert cfg["filter"] is None and cfg["downsample"] is None
    assert PASSES["multi_turn", "vanilla"] >= 5  # probes fall due at epoch 3 (k = 1, probe_every 2)
    (report,) = [j for j in jobs if j.rule == "report_efficiency"]
    assert report.run_config["efficiency"]["margin"] == {"of_vanilla_gain": 0.25}

    for setting in ("multi_turn", "single_turn"):
        (filt,) = [j for j in jobs if j.rule == f"filter_{setting}"]
        assert filt.run_config["heldout_from"] == "reserve" and filt.run_config["heldout_size"] == HELDOUT
        assert filt.run_config["target_size"] == TRAIN_PROMPTS[setting]
        assert filt.spec["seeds"]["filter"] == SPLIT_SEED
    synth = {j.spec["options"]["source"]: j.spec for j in jobs if j.rule == "synthesize_source"}
    assert set(synth) == {"xlam", "toolace", "looptool"}
    assert all(spec["seeds"]["data"] == DATA_SEED for spec in synth.values())


def test_the_efficiency_target_ends_in_its_own_archive(smk):
    """The evidence is archived by its own target (it builds no tables, so the whole run's archive_results
    is not in its DAG): the archive_results job, once the report is written, named for the run, the code
    and the config, beside the run's other archives; the default target plans no such job."""
    res = smk("-n", "-p", "--nolock", *make_evidence_args())
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = parse_dryrun(res.stdout)
    assert "archive_results" not in [j.rule for j in jobs]
    (arch,) = [j for j in jobs if j.rule == "archive_efficiency"]
    (target,) = [j for j in jobs if j.rule == "efficiency"]
    (out,) = arch.outputs
    assert out.startswith("results/archives/evidence-efficiency-") and out.endswith(".tar.gz")
    assert out in target.inputs
    assert arch.inputs == [
        "results/evidence/efficiency/index.md",
        "config/evidence.yaml",
        "config/config.yaml",
    ]
    assert arch.spec["stage"] == "archive_results" and arch.spec["rule"] == "archive_efficiency"
    assert arch.spec["options"]["run_dir"] == "results/evidence"
    default = smk("-n", "--forceall", "--nolock")
    assert default.returncode == 0, default.stderr[-3000:]
    assert "archive_efficiency" not in {j.rule for j in parse_dryrun(default.stdout)}


def test_the_efficiency_archive_packs_the_finished_evidence_run(tmp_path):
    """The rule runs for real: on a finished evidence run (every output fabricated, then the archive
    removed), `make evidence`'s command runs only the archive job, and the archive verifies and holds the
    report and the trainings' manifests, no resume checkpoints."""
    work = make_workdir(tmp_path)
    args = make_evidence_args()
    fabricate_completed_run(work, *[a for a in args if a != "--rerun-incomplete"])
    (archive,) = (work / "results" / "archives").glob("evidence-efficiency-*.tar.gz")
    archive.unlink()
    res = snakemake(*args, cwd=work, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    ran = [
        line.split()[1].rstrip(":")
        for line in res.stderr.splitlines()
        if line.startswith(("rule ", "localrule "))
    ]
    assert ran == ["archive_efficiency", "efficiency"], ran
    ok = subprocess.run(
        [sys.executable, "-m", "toolcall_repro.cli", "verify", str(archive)], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        packed = json.load(tar.extractfile(next(n for n in names if n.endswith("/ARCHIVE.json"))))
    prefix = archive.name.removesuffix(".tar.gz")
    assert f"{prefix}/efficiency/index.md" in names
    # the config files under extra/ (by absolute path here: the test's config/ links to the work tree's)
    assert any(n.startswith(f"{prefix}/extra/") and n.endswith("/config/evidence.yaml") for n in names)
    assert any(n.startswith(f"{prefix}/manifests/train_grpo_seed/") for n in names)
    assert not any("/checkpoints/" in n for n in names)
    assert packed["run_id"] == "evidence" and packed["archive"] == archive.name


def test_an_evidence_unit_plans_its_own_upstream_and_one_seed_pair(smk):
    """`make evidence-unit`'s first unit (pre-registration 3): the data, the warm start, the multi-turn filter
    and held-out split, vanilla and efficient at seed 0 side by side, then the unit job; nothing else."""
    line = subprocess.run(
        [sys.executable, "-m", "toolcall_repro.cli", "evidence-unit", "next", "--units", "/nonexistent"],
        capture_output=True, text=True, cwd=REPO, check=True,
    ).stdout.split()  # fmt: skip
    assert line == ["multi_turn-seed0", "multi_turn", "0", "results/evidence/efficiency/units/multi_turn-seed0"]
    res = smk("-n", "-p", "--nolock", line[-1], "--configfile", "config/evidence.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = parse_dryrun(res.stdout)
    assert sorted(j.rule for j in jobs) == sorted(
        ["synthesize_source"] * 3
        + ["normalise_source"] * 3
        + ["warmstart_base_model", "filter_multi_turn", "train_grpo", "train_grpo", "evidence_unit"]
    )
    train = {j.run_config["variant"]: j for j in jobs if j.rule == "train_grpo"}
    assert set(train) == {"vanilla", "efficient"} and all(j.spec["seeds"]["train"] == 0 for j in train.values())
    (unit,) = [j for j in jobs if j.rule == "evidence_unit"]
    assert unit.run_config["setting"] == "multi_turn" and unit.run_config["seed"] == 0
    assert [r["variant"] for r in unit.run_config["runs"]] == ["vanilla", "efficient"]
    assert all(f in unit.inputs for j in train.values() for f in j.outputs if f.endswith("summary.json"))
