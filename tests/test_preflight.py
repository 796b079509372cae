"""Checks a run settles before its first job: pinned hub revisions at paper scale."""

from __future__ import annotations

from pathlib import Path

import yaml

from toolcall_repro import preflight
from toolcall_repro.runconfig import validate_config

REPO = Path(__file__).resolve().parents[1]
SHA = "0123456789abcdef0123456789abcdef01234567"


def load(path: str) -> dict:
    return yaml.safe_load((REPO / path).read_text())


def pin_everything(cfg: dict) -> dict:
    for source in cfg["data"]["sources"].values():
        source["revision"] = SHA
    cfg["model"]["revisions"] = {m: SHA for m in cfg["model"]["revisions"]}
    cfg["evaluate"]["general"]["revisions"] = {d: SHA for d in cfg["evaluate"]["general"]["revisions"]}
    return cfg


def test_paper_config_with_branch_revisions_is_refused_with_every_key_to_pin():
    (problem,) = preflight.pin_problems(load("config/paper.yaml"))
    for key in ("data.sources.xlam.revision", "data.sources.looptool.revision", "model.revisions.Qwen/Qwen3-4B",
                "model.revisions.Qwen/Qwen2.5-3B-Instruct", "model.revisions.Qwen/Qwen3-8B",
                "evaluate.general.revisions.cais/mmlu"):  # fmt: skip
        assert f"{key}: 'main'" in problem
    assert "allow_unpinned_revisions: true" in problem
    assert any("allow_unpinned_revisions" in p for p in validate_config(load("config/paper.yaml")))


def test_pinned_or_opted_out_paper_config_passes():
    assert preflight.pin_problems(pin_everything(load("config/paper.yaml"))) == []
    assert preflight.pin_problems({**load("config/paper.yaml"), "allow_unpinned_revisions": True}) == []


def test_a_hub_model_without_a_revision_entry_is_named():
    cfg = pin_everything(load("config/paper.yaml"))
    del cfg["model"]["revisions"]["Qwen/Qwen3-8B"]  # still the multi-turn filter model
    (problem,) = preflight.pin_problems(cfg)
    assert "model.revisions.Qwen/Qwen3-8B: (not set)" in problem and "1 are not" in problem


def test_a_short_sha_or_tag_is_not_a_pin():
    cfg = pin_everything(load("config/paper.yaml"))
    cfg["data"]["sources"]["looptool"]["revision"] = "b6c572d"
    cfg["model"]["revisions"]["Qwen/Qwen3-4B"] = "v1.0"
    (problem,) = preflight.pin_problems(cfg)
    assert "data.sources.looptool.revision: 'b6c572d'" in problem and "Qwen/Qwen3-4B: 'v1.0'" in problem


def test_cpu_scale_configs_read_no_hub_and_are_not_asked_to_pin():
    for path in ("config/config.yaml", ".test/config.yaml"):
        assert preflight.pin_problems(load(path)) == [], path
