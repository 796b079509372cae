"""The efficiency evidence (`make evidence`): its dry-run plans exactly the pre-registered design
(docs/efficiency.md, "Pre-registration"), read from the jobs' own specs."""

from __future__ import annotations

import shlex
from pathlib import Path

from toolcall_repro.plan import parse_dryrun

REPO = Path(__file__).resolve().parents[2]
# The pre-registered design, written out here on purpose: a change of config/evidence.yaml must fail this.
TRAININGS = {
    (s, v, k) for s in ("multi_turn", "single_turn") for v in ("vanilla", "efficient") for k in (0, 1, 2)
}
PASSES = {"multi_turn": 5, "single_turn": 4}
HELDOUT = 400
TRAIN_PROMPTS = {"multi_turn": 448, "single_turn": 512}
SPLIT_SEED = 3  # filter.seed: the reserve and the held-out draw; earlier runs used 0 only
DATA_SEED = 3  # data seeds 0-2 were used before


def make_evidence_args() -> list[str]:
    """The snakemake arguments of `make evidence`, from the Makefile's recipe."""
    recipe = (REPO / "Makefile").read_text().split("\nevidence:")[1].split("\n\n")[0]
    return shlex.split(recipe.split(".venv/bin/snakemake", 1)[1])


def test_make_evidence_runs_the_efficiency_target_with_the_evidence_config():
    args = make_evidence_args()
    assert args[0] == "efficiency"  # before --configfile, which takes every argument after it
    assert args[-2:] == ["--configfile", "config/evidence.yaml"] and "--cores" in args
    assert "--rerun-incomplete" in args  # an interrupted sitting resumes (trainings from checkpoints)


def test_evidence_target_plans_the_preregistered_design(smk):
    res = smk("-n", "-p", "--nolock", *make_evidence_args())
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = parse_dryrun(res.stdout)
    rules = [j.rule for j in jobs]
    for rule in ("synthesize_source", "warmstart_base_model", "filter_multi_turn", "filter_single_turn"):
        assert rule in rules, rule
    assert rules.count("report_efficiency") == 1
    assert all(j.spec["output"]["manifest"].startswith("results/evidence/") for j in jobs if j.spec)

    train = [j for j in jobs if j.rule in ("train_grpo", "train_grpo_seed")]
    planned = {(j.run_config["setting"], j.run_config["variant"], j.spec["seeds"]["train"]) for j in train}
    assert planned == TRAININGS and len(train) == len(TRAININGS)
    for j in train:
        cfg = j.run_config
        assert cfg["epochs"] == PASSES[cfg["setting"]] and cfg["heldout_size"] == HELDOUT, j.name
        assert cfg["heldout_samples"] == 4 and cfg["n"] == 8 and cfg["batch_size"] == 8
        if cfg["variant"] == "efficient":
            assert cfg["filter"]["k"] == 1 and cfg["filter"]["probe_every"] == 2
            assert cfg["downsample"] == {"m": 4, "selection": "max_variance", "advantage_scope": "subset"}
        else:
            assert cfg["filter"] is None and cfg["downsample"] is None
    assert PASSES["multi_turn"] >= 5  # probes fall due at epoch 3 (k = 1, probe_every 2)

    for setting in ("multi_turn", "single_turn"):
        (filt,) = [j for j in jobs if j.rule == f"filter_{setting}"]
        assert filt.run_config["heldout_from"] == "reserve" and filt.run_config["heldout_size"] == HELDOUT
        assert filt.run_config["target_size"] == TRAIN_PROMPTS[setting]
        assert filt.spec["seeds"]["filter"] == SPLIT_SEED
    synth = {j.spec["options"]["source"]: j.spec for j in jobs if j.rule == "synthesize_source"}
    assert set(synth) == {"xlam", "toolace", "looptool"}
    assert all(spec["seeds"]["data"] == DATA_SEED for spec in synth.values())
