"""What a run must settle before its first job, beyond one training run's keys (runconfig.py).

Each check returns problems (one string each, naming the config keys, their values and what is allowed).
`validate_config` here is the dry-run's whole check: the stages' rules and every training run the DAG
builds (runconfig), verl's batch geometry (engines.verl.hydra), then these; `check_config` raises it as
one short error (workflow common.smk calls it before any job). Paper scale is `engines.training: verl`: the run
that takes cluster time, so the one whose inputs must be pinned and whose jobs must work offline.

What the config resolves to (which model a generation runs, the hub models, the studies' pairs, paper scale,
a training job's verl) is the experiment's (toolcall_repro.experiment), read here as the workflow reads it.
"""

from __future__ import annotations

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


def hub_revisions(config: Mapping, experiment: Experiment | None = None) -> dict[str, str | None]:
    """Every hub revision the DAG reads, config key -> revision (None: the key is not set)."""
    exp = experiment or Experiment(config)
    out: dict[str, str | None] = {}
    if config["data"]["mode"] == "hub":
        for name, source in sorted(config["data"]["sources"].items()):
            out[f"data.sources.{name}.revision"] = source["revision"]
    revisions = config["model"].get("revisions") or {}
    for hub_id in sorted(set(revisions) | set(exp.models.hub_models())):
        out[f"model.revisions.{hub_id}"] = revisions.get(hub_id)
    if exp.lm_eval_tasks():  # lm-eval reads the Hub
        for dataset, rev in sorted(((config["evaluate"].get("general") or {}).get("revisions") or {}).items()):
            out[f"evaluate.general.revisions.{dataset}"] = rev
    return out


def pin_problems(config: Mapping, experiment: Experiment | None = None) -> list[str]:
    """A paper-scale run reads every hub revision at a commit sha, unless allow_unpinned_revisions is true.

    A branch (`main`) moves: two runs of one config would train and score on different bytes.
    """
    exp = experiment or Experiment(config)
    if not exp.paper_scale or config.get(UNPINNED_OPT_OUT):
        return []
    revisions = hub_revisions(config, exp)
    unpinned = {k: v for k, v in revisions.items() if not (isinstance(v, str) and SHA_RE.match(v))}
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


def simulator_problems(config: Mapping, experiment: Experiment | None = None) -> list[str]:
    """ACEBench's agent_multi_turn needs a user simulator that works where the scoring job runs.

    `scripted` runs inside the job (no network). `openai` needs an endpoint and a model, and at paper
    scale an explicit `allow_network_simulator: true`: GPU nodes are often offline, and the simulator
    would fail there after the GPU was granted.
    """
    exp = experiment or Experiment(config)
    ace = exp.acebench
    if not ace or ace.get("simulator", "scripted") != "openai" or not _acebench_users(ace):
        return []
    key = "evaluate.acebench"
    missing = [k for k in ("simulator_endpoint", "simulator_model") if not ace.get(k)]
    if missing:
        return [
            f"{key}.simulator: openai needs {' and '.join(f'{key}.{k}' for k in missing)} (got "
            f"{', '.join(f'{k}={ace.get(k)!r}' for k in missing)}); simulator: scripted runs offline in the job"
        ]
    if exp.paper_scale and not ace.get("allow_network_simulator"):
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


def _budgets(exp: Experiment) -> list[tuple[str, int, str | None]]:
    """(config key, generation budget, model generating with it) of every generation the DAG runs:
    training, the filter chains, every benchmark's (model, protocol) pairs (benchmarks.py)."""
    config = exp.config
    out = [
        (f"train.settings.{s}.max_new_tokens", cfg["max_new_tokens"], exp.models.start_model(s))
        for s, cfg in sorted(config["train"]["settings"].items())
    ]
    for chain in ("single_turn", "multi_turn"):
        out.append((f"filter.{chain}.max_new_tokens", config["filter"][chain]["max_new_tokens"],
                    exp.models.filter_policy_model(chain)))  # fmt: skip
    evaluate = config["evaluate"]
    pairs = {pair for benchmark in exp.benchmarks.values() for pair in benchmark.generations(exp)}
    for tag, protocol in sorted(pairs):
        budget = exp.protocol(protocol).get("max_tokens") if protocol in evaluate["protocols"] else None
        if tag in evaluate["models"] and budget is not None:  # unset: protocol_problems says so
            out.append((f"evaluate.protocols.{protocol}.max_tokens", budget, exp.models.eval_model(tag)))
    return out


def thinking_problems(config: Mapping, experiment: Experiment | None = None) -> list[str]:
    """Thinking on or off is explicit per model at paper scale, and a thinking model's budgets fit it."""
    exp = experiment or Experiment(config)
    out = []
    if exp.paper_scale:
        missing = [m for m in exp.models.hub_models() if exp.models.thinking(m) is None]
        if missing:
            out.append(
                f"model.enable_thinking must say true or false for every hub model the run generates with "
                f"(passed to its chat template in training, filtering and evaluation); missing: {missing}"
            )
    short = {}
    for key, budget, model in _budgets(exp):
        if exp.models.thinking(model) and budget < THINKING_MIN_NEW_TOKENS:
            short.setdefault(model, {})[key] = budget
    for model, keys in short.items():
        listed = ", ".join(f"{k}: {v}" for k, v in keys.items())
        out.append(
            f"{listed} must be >= {THINKING_MIN_NEW_TOKENS} tokens with model.enable_thinking.{model}: true "
            "(a <think> trace cut short scores 0); raise them or set enable_thinking false"
        )
    return out


def problems(config: Mapping, experiment: Experiment | None = None) -> list[str]:
    """Every preflight problem of a config that passed the schema (empty: none)."""
    exp = experiment or Experiment(config)
    return pin_problems(config, exp) + simulator_problems(config, exp) + thinking_problems(config, exp)


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
        if exp.paper_scale and not out:
            out += _verl_problems(run, exp.jobs.job_verl(), f"{dataset}/{variant}")
    out += problems(config, exp)
    return list(dict.fromkeys(out))  # one variant read by two settings: one line


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
