"""Checks a run settles before its first job: pinned hub revisions at paper scale."""

from __future__ import annotations

from pathlib import Path

import yaml

from toolcall_repro import preflight
from toolcall_repro.eval.acebench.data import resolve_categories
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


def with_acebench(path: str, **ace) -> dict:
    cfg = {**load(path), "allow_unpinned_revisions": True}
    cfg["evaluate"]["acebench"] = {**cfg["evaluate"]["acebench"], **ace}
    return cfg


def test_paper_default_user_simulator_runs_offline_in_the_job():
    cfg = with_acebench("config/paper.yaml")
    assert cfg["evaluate"]["acebench"]["simulator"] == "scripted"
    assert "agent_multi_turn" in resolve_categories(cfg["evaluate"]["acebench"]["categories"])
    assert preflight.simulator_problems(cfg) == [] and validate_config(cfg) == []


def test_an_llm_user_without_an_endpoint_is_refused_naming_the_keys():
    cfg = with_acebench("config/paper.yaml", simulator="openai", simulator_endpoint=None, simulator_model="gpt-4o")
    (problem,) = preflight.simulator_problems(cfg)
    assert "evaluate.acebench.simulator: openai needs evaluate.acebench.simulator_endpoint" in problem
    assert "simulator_endpoint=None" in problem and "simulator: scripted" in problem
    cfg = with_acebench("config/config.yaml", simulator="openai")  # CPU scale too: it cannot run anywhere
    assert "simulator_endpoint and evaluate.acebench.simulator_model" in preflight.simulator_problems(cfg)[0]


def test_a_network_user_at_paper_scale_needs_the_explicit_opt_in():
    ace = {"simulator": "openai", "simulator_endpoint": "https://api.example.org/v1", "simulator_model": "m"}
    (problem,) = preflight.simulator_problems(with_acebench("config/paper.yaml", **ace))
    assert "'https://api.example.org/v1'" in problem and "allow_network_simulator: true" in problem
    assert preflight.simulator_problems(with_acebench("config/paper.yaml", **ace, allow_network_simulator=True)) == []
    assert preflight.simulator_problems(with_acebench("config/config.yaml", **ace)) == []  # a laptop run


def test_no_simulator_is_needed_without_agent_multi_turn():
    ace = {"simulator": "openai", "simulator_endpoint": None, "categories": ["normal", "agent_multi_step"]}
    assert preflight.simulator_problems(with_acebench("config/paper.yaml", **ace)) == []
