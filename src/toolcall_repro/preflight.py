"""What a run must settle before its first job, beyond one training run's keys (runconfig.py).

Each check returns problems (one string each, naming the config keys, their values and what is allowed).
`validate_config` here is the dry-run's whole check: the stages' rules and every training run the DAG
builds (runconfig), verl's batch geometry (engines.verl.hydra), then these; `check_config` raises it as
one short error (workflow common.smk calls it before any job). Paper scale is `engines.training: verl`: the run
that takes cluster time, so the one whose inputs must be pinned and whose jobs must work offline.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from toolcall_repro.engines.verl import hydra  # torch-free: the batch geometry verl will need
from toolcall_repro.experiment import Experiment
from toolcall_repro.runconfig import (
    SETTINGS,
    ConfigError,
    must,
    run_problems,
    stage_problems,
)

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
# The explicit opt-out of pinning, for exploratory runs (a real paper run pins every revision).
UNPINNED_OPT_OUT = "allow_unpinned_revisions"
# model.* names that are not hub ids: the warm-started tiny model and the workflow's own policies
LOCAL_MODEL_NAMES = {"tiny", "base", "early", "train"}


def paper_scale(config: Mapping) -> bool:
    return config["engines"]["training"] == "verl"


def hub_models(config: Mapping) -> list[str]:
    """Every hub model the DAG snapshots (download_model): base, per-setting policies, filter policies."""
    model = config["model"]
    names = [model["base"], model.get("filter_policy"), model.get("filter_policy_multi_turn")]
    names += [s.get("model") for s in config["train"]["settings"].values()]
    return sorted({n for n in names if n and n not in LOCAL_MODEL_NAMES and not os.path.isdir(n)})


def _lm_eval_reads_hub(config: Mapping) -> bool:
    general = config["evaluate"].get("general") or {}
    tasks = {t.strip() for t in str(general.get("tasks", "")).split(",")}
    return bool(tasks - {"", "local"})


def hub_revisions(config: Mapping) -> dict[str, str | None]:
    """Every hub revision the DAG reads, config key -> revision (None: the key is not set)."""
    out: dict[str, str | None] = {}
    if config["data"]["mode"] == "hub":
        for name, source in sorted(config["data"]["sources"].items()):
            out[f"data.sources.{name}.revision"] = source["revision"]
    revisions = config["model"].get("revisions") or {}
    for hub_id in sorted(set(revisions) | set(hub_models(config))):
        out[f"model.revisions.{hub_id}"] = revisions.get(hub_id)
    if _lm_eval_reads_hub(config):
        for dataset, rev in sorted(((config["evaluate"].get("general") or {}).get("revisions") or {}).items()):
            out[f"evaluate.general.revisions.{dataset}"] = rev
    return out


def pin_problems(config: Mapping) -> list[str]:
    """A paper-scale run reads every hub revision at a commit sha, unless allow_unpinned_revisions is true.

    A branch (`main`) moves: two runs of one config would train and score on different bytes.
    """
    if not paper_scale(config) or config.get(UNPINNED_OPT_OUT):
        return []
    unpinned = {k: v for k, v in hub_revisions(config).items() if not (isinstance(v, str) and SHA_RE.match(v))}
    if not unpinned:
        return []
    keys = "\n    ".join(f"{k}: {v!r}" if v is not None else f"{k}: (not set)" for k, v in unpinned.items())
    return [
        f"paper scale (engines.training: verl) needs every hub revision pinned to a 40-hex commit sha; "
        f"{len(unpinned)} are not (pin them, or set {UNPINNED_OPT_OUT}: true for an exploratory run):\n    "
        + keys
    ]


def _acebench_users(ace: Mapping) -> bool:
    """Whether the ACEBench categories include agent_multi_turn, the one that needs a user simulator."""
    from toolcall_repro.eval.acebench.data import resolve_categories

    try:
        return "agent_multi_turn" in resolve_categories(ace.get("categories", "all"))
    except ValueError:
        return True  # an unknown name fails in the job itself; ask for a simulator that works offline


def simulator_problems(config: Mapping) -> list[str]:
    """ACEBench's agent_multi_turn needs a user simulator that works where the scoring job runs.

    `scripted` runs inside the job (no network). `openai` needs an endpoint and a model, and at paper
    scale an explicit `allow_network_simulator: true`: GPU nodes are often offline, and the simulator
    would fail there after the GPU was granted.
    """
    ace = config["evaluate"].get("acebench")
    if not ace or ace.get("simulator", "scripted") != "openai" or not _acebench_users(ace):
        return []
    key = "evaluate.acebench"
    missing = [k for k in ("simulator_endpoint", "simulator_model") if not ace.get(k)]
    if missing:
        return [
            f"{key}.simulator: openai needs {' and '.join(f'{key}.{k}' for k in missing)} (got "
            f"{', '.join(f'{k}={ace.get(k)!r}' for k in missing)}); simulator: scripted runs offline in the job"
        ]
    if paper_scale(config) and not ace.get("allow_network_simulator"):
        return [
            f"{key}.simulator: openai reaches {ace['simulator_endpoint']!r} from the GPU job, which may have no "
            f"network; use simulator: scripted (runs in the job), or set {key}.allow_network_simulator: true "
            "if your compute nodes reach that endpoint"
        ]
    return []


# A thinking model's generation budget may not be cut below this (tokens): a <think> trace cut short
# never reaches its call and scores 0, so training and filtering would learn from truncation, not skill.
# It is config/paper.yaml's evaluation budget (max_tokens 4096); Qwen3's card suggests far more (32k).
THINKING_MIN_NEW_TOKENS = 4096


def thinking_of(config: Mapping, model: str | None) -> bool | None:
    """model.enable_thinking of a model (hub id or path); None: not set (the chat template's default)."""
    return (config["model"].get("enable_thinking") or {}).get(model) if model else None


def setting_model(config: Mapping, setting: str) -> str:
    """The model a setting trains (train.settings.<setting>.model, else model.base)."""
    return config["train"]["settings"][setting].get("model") or config["model"]["base"]


def filter_policy_model(config: Mapping, chain: str) -> str | None:
    """The model whose chat template a filter chain's policy uses (None: the tiny model's warm start)."""
    model = config["model"]
    key = "filter_policy_multi_turn" if chain == "multi_turn" else "filter_policy"
    policy = model.get(key) or model.get("filter_policy", "base")
    if policy == "base":
        return model["base"]
    if policy == "train":  # the 80-step Tool-N1 policy, trained from the single-turn setting's model
        return setting_model(config, "single_turn")
    return None if policy == "early" else policy


def eval_model(config: Mapping, tag: str) -> str:
    """The model whose chat template an evaluation model tag uses (a trained model keeps its base's)."""
    spec = config["evaluate"]["models"][tag]
    if spec["source"] == "base":
        return config["model"]["base"]
    if spec["source"] == "train":
        return setting_model(config, spec["setting"])
    return setting_model(config, config["train"]["format_study"]["setting"])


def _budgets(config: Mapping) -> list[tuple[str, int, str | None]]:
    """(config key, generation budget, model generating with it) of every generation the DAG runs."""
    out = [
        (f"train.settings.{s}.max_new_tokens", cfg["max_new_tokens"], setting_model(config, s))
        for s, cfg in sorted(config["train"]["settings"].items())
    ]
    for chain in ("single_turn", "multi_turn"):
        out.append((f"filter.{chain}.max_new_tokens", config["filter"][chain]["max_new_tokens"],
                    filter_policy_model(config, chain)))  # fmt: skip
    evaluate = config["evaluate"]
    pairs = {(m, p) for study in evaluate["studies"].values() for m in study["models"] for p in study["protocols"]}
    ace = evaluate.get("acebench") or {}
    pairs |= {(m, ace.get("protocol", "stronger")) for m in ace.get("models", [])}
    exp = Experiment(config)
    for tag, protocol in sorted(pairs):
        budget = exp.protocol(protocol).get("max_tokens") if protocol in evaluate["protocols"] else None
        if tag in evaluate["models"] and budget is not None:  # unset: protocol_problems says so
            out.append((f"evaluate.protocols.{protocol}.max_tokens", budget, eval_model(config, tag)))
    return out


def thinking_problems(config: Mapping) -> list[str]:
    """Thinking on or off is explicit per model at paper scale, and a thinking model's budgets fit it."""
    out = []
    if paper_scale(config):
        missing = [m for m in hub_models(config) if thinking_of(config, m) is None]
        if missing:
            out.append(
                f"model.enable_thinking must say true or false for every hub model the run generates with "
                f"(passed to its chat template in training, filtering and evaluation); missing: {missing}"
            )
    short = {}
    for key, budget, model in _budgets(config):
        if thinking_of(config, model) and budget < THINKING_MIN_NEW_TOKENS:
            short.setdefault(model, {})[key] = budget
    for model, keys in short.items():
        listed = ", ".join(f"{k}: {v}" for k, v in keys.items())
        out.append(
            f"{listed} must be >= {THINKING_MIN_NEW_TOKENS} tokens with model.enable_thinking.{model}: true "
            "(a <think> trace cut short scores 0); raise them or set enable_thinking false"
        )
    return out


def problems(config: Mapping) -> list[str]:
    """Every preflight problem of a config that passed the schema (empty: none)."""
    return pin_problems(config) + simulator_problems(config) + thinking_problems(config)


def validate_config(config: Mapping, experiment: Experiment | None = None) -> list[str]:
    """Every cross-key problem (empty: none), each naming its key: the stages' rules (`stage_problems`),
    then every training run the DAG builds, with the training engine's limits, then what a run must settle
    before its first job (`problems` below: pinned revisions and an offline simulator at paper scale).

    Needs a config that passed the JSON Schema (types and single-key limits are its job: `schema_problem`).
    `experiment`: the workflow's own (its run configs, composed here once, are the ones the rules pass).
    """
    exp = experiment or Experiment(config)
    engine = config["engines"]["training"]
    variants = config["train"]["variants"]
    out: list[str] = stage_problems(config) + exp.protocol_problems()
    for dataset, variant, asked in exp.requested_runs():
        if dataset not in SETTINGS and not dataset.startswith("format_") and dataset != "tooln1":
            out.append(must(f"{asked}.setting", f"one of {SETTINGS}", dataset))
            continue
        if variant not in variants:
            out.append(must(asked, f"a variant of train.variants {sorted(variants)}", variant))
            continue
        run, where = exp.run_config(dataset, variant), exp.run_sources(dataset, variant)
        out += run_problems(run, engine, where)
        if engine == "verl" and not out:
            out += _verl_problems(run, _job_verl(config), f"{dataset}/{variant}")
    out += problems(config)
    return list(dict.fromkeys(out))  # one variant read by two settings: one line


def _job_verl(config: Mapping) -> dict:
    """train.verl as a training job gets it (workflow common.smk: VERL, train_resources' nodes)."""
    verl = dict(config["train"].get("verl") or {"nodes": 1, "gpus_per_node": 0})
    nodes = (config.get("resources") or {}).get("train", {}).get("nodes")
    return {**verl, "nodes": nodes} if nodes is not None else verl


def _verl_problems(run: Mapping, verl: Mapping | None, label: str) -> list[str]:
    """verl's batch geometry (engines.verl.hydra.geometry: rows split over mini-batches and GPUs)."""
    try:
        hydra.geometry(run, verl)
        hydra.max_steps(run)
    except ConfigError as err:
        return [f"train.verl with run {label}: {err}"]
    return []


def check_config(config: Mapping, limit: int = 5, experiment: Experiment | None = None) -> None:
    """`validate_config` as one short `ConfigError` (at most `limit` lines of problems)."""
    problems = validate_config(config, experiment)
    if problems:
        lines = problems[:limit] + (
            [f"... and {len(problems) - limit} more"] if len(problems) > limit else []
        )
        raise ConfigError("bad config (checked before any job):\n  " + "\n  ".join(lines))
