"""What a run must settle before its first job, beyond one training run's keys (runconfig.py).

Each check returns problems (one string each, naming the config keys, their values and what is allowed);
`runconfig.validate_config` adds them to the dry-run's. Paper scale is `engines.training: verl`: the run
that takes cluster time, so the one whose inputs must be pinned and whose jobs must work offline.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

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


def problems(config: Mapping) -> list[str]:
    """Every preflight problem of a config that passed the schema (empty: none)."""
    return pin_problems(config) + simulator_problems(config)
