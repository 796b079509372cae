"""Checks a run settles before its first job: pinned hub revisions at paper scale."""

from __future__ import annotations

from pathlib import Path

import yaml

from toolcall_repro import preflight
from toolcall_repro.eval.acebench.data import resolve_categories
from toolcall_repro.experiment import Experiment
from toolcall_repro.preflight import validate_config

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


def paper() -> dict:
    return {**load("config/paper.yaml"), "allow_unpinned_revisions": True}


def test_thinking_is_explicit_for_every_hub_model_of_a_paper_run():
    assert preflight.thinking_problems(paper()) == []
    cfg = paper()
    del cfg["model"]["enable_thinking"]["Qwen/Qwen3-8B"]  # the multi-turn filter model
    (problem,) = preflight.thinking_problems(cfg)
    assert "model.enable_thinking must say true or false" in problem and "['Qwen/Qwen3-8B']" in problem


def test_a_thinking_model_with_a_budget_below_the_minimum_is_refused_naming_each_key():
    """The issue's defect: Qwen3 thinks, but multi-turn training and the Qwen3-8B filter had 1024 tokens
    against evaluation's 4096, so cut traces scored 0 in training and filtering."""
    cfg = paper()
    cfg["train"]["settings"]["multi_turn"]["max_new_tokens"] = 1024
    cfg["filter"]["multi_turn"]["max_new_tokens"] = 1024
    problems = preflight.thinking_problems(cfg)
    assert len(problems) == 2
    four_b = next(p for p in problems if "Qwen/Qwen3-4B" in p)
    assert four_b.startswith("train.settings.multi_turn.max_new_tokens: 1024 must be >= 4096 tokens")
    eight_b = next(p for p in problems if "Qwen/Qwen3-8B" in p)
    assert "filter.multi_turn.max_new_tokens: 1024" in eight_b
    cfg["evaluate"]["protocols"]["stronger"]["max_tokens"] = 2048  # evaluation is held to it too
    assert "evaluate.protocols.stronger.max_tokens: 2048" in " ".join(preflight.thinking_problems(cfg))
    cfg["model"]["enable_thinking"] = {m: False for m in cfg["model"]["enable_thinking"]}
    assert preflight.thinking_problems(cfg) == []  # thinking off: short budgets are the user's choice


def test_each_generation_takes_its_own_models_switch():
    cfg = paper()
    exp = Experiment(cfg)  # preflight and the workflow's job specs read these from the experiment
    assert exp.models.filter_policy_model("multi_turn") == "Qwen/Qwen3-8B"
    assert exp.models.filter_policy_model("single_turn") == "Qwen/Qwen2.5-3B-Instruct"  # the tooln1 policy
    assert exp.models.eval_model("rl-multi") == "Qwen/Qwen3-4B"
    assert exp.models.eval_model("rl-single") == "Qwen/Qwen2.5-3B-Instruct"
    from toolcall_repro.runconfig import compose_run

    assert compose_run(cfg, "multi_turn", "efficient")["enable_thinking"] is True
    assert compose_run(cfg, "tooln1", "vanilla")["enable_thinking"] is False
    assert "enable_thinking" not in compose_run(load("config/config.yaml"), "multi_turn", "vanilla")  # tiny


def test_the_base_models_acebench_budget_is_checked_when_acebench_names_no_models():
    """ACEBench scores the base model when evaluate.acebench.models is unset (the experiment's default,
    the DAG's score_acebench jobs); preflight once read that as no model and never checked its budget."""
    cfg = load("config/config.yaml")
    assert "models" not in cfg["evaluate"]["acebench"]
    cfg["model"]["enable_thinking"] = {"tiny": True}
    for chain in ("single_turn", "multi_turn"):
        cfg["train"]["settings"][chain]["max_new_tokens"] = 4096
        cfg["filter"][chain]["max_new_tokens"] = 4096
    cfg["evaluate"]["protocol_defaults"]["max_tokens"] = 4096
    cfg["evaluate"]["protocols"]["ace"] = {"system_prompt": "stronger", "max_tokens": 256}  # ACEBench's alone
    cfg["evaluate"]["acebench"]["protocol"] = "ace"
    (problem,) = preflight.thinking_problems(cfg)
    assert problem.startswith("evaluate.protocols.ace.max_tokens: 256 must be >= 4096 tokens")
    assert "model.enable_thinking.tiny: true" in problem
