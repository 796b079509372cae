"""The one training-run config: the schema and the registries agree, and every cross-key rule fails
before any job with a short message naming key, value and what is allowed."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import torch
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from toolcall_repro import preflight
from toolcall_repro import runconfig as rc
from toolcall_repro.experiment import Experiment
from toolcall_repro.rl import LOSS_AGG_MODES, SCOPES, SELECTIONS, SEMANTICS
from toolcall_repro.rl.loss import agg_loss

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "workflow" / "schemas" / "config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())
DEFS = SCHEMA["$defs"]
SHIPPED = ["config/config.yaml", "config/paper.yaml", ".test/config.yaml"]


def load(path="config/config.yaml") -> dict:
    return yaml.safe_load((REPO / path).read_text())


def test_schema_and_registries_are_the_same_sets():
    setting, filt, down = DEFS["setting"]["properties"], DEFS["filter_rule"], DEFS["downsample_rule"]
    assert set(SCHEMA["properties"]["engines"]["properties"]["training"]["enum"]) == set(rc.ENGINES)
    # the RL core's registries and runconfig's limits are listed once, in the package: the schema holds
    # their types only (no copy of the names or of m's range to drift), preflight their values
    def enums(node):
        if isinstance(node, dict):
            yield from node.get("enum", [])
            for v in node.values():
                yield from enums(v)
        elif isinstance(node, list):
            for v in node:
                yield from enums(v)

    listed = set(enums(SCHEMA))
    for names in (SELECTIONS, SCOPES, SEMANTICS, LOSS_AGG_MODES, rc.VERL_ONLY_LOSS_AGG):
        assert not listed & set(names), names
    for prop in (setting["loss_agg"], down["properties"]["selection"], down["properties"]["advantage_scope"],
                 filt["properties"]["semantics"], down["properties"]["m"]):  # fmt: skip
        assert "enum" not in prop and "minimum" not in prop, prop
    assert set(filt["properties"]) == set(rc.FILTER_KEYS)
    assert set(down["properties"]) == set(rc.DOWNSAMPLE_KEYS)
    assert filt["properties"]["probe_every"]["minimum"] == 1  # StreakFilter's (rl.filter_problems)
    # every key a setting may set is a run key (of every engine, or of one: ENGINE_KEYS, which the other
    # engine refuses by name), and the schema requires what the run config requires
    engine_keys = {k for keys in rc.ENGINE_KEYS.values() for k in keys}
    run_keys = set(rc.REQUIRED) | set(rc.OPTIONAL) | set(rc.PASSTHROUGH) | engine_keys
    assert set(setting) <= run_keys
    assert set(DEFS["setting"]["required"]) | set(DEFS["variant"]["required"]) == set(rc.REQUIRED)
    assert setting["heldout_size"]["$ref"] == "#/$defs/posint" and max(rc.HELDOUT_MIN.values()) == 1
    n_limits = {DEFS[d]["properties"]["n"]["minimum"] for d in ("setting", "variant", "variant_override")}
    assert n_limits == {2}


def test_the_local_loss_modes_are_what_agg_loss_implements():
    loss, mask = torch.tensor([[1.0, 2.0], [3.0, 0.0]]), torch.tensor([[1, 1], [1, 0]])
    for mode in LOSS_AGG_MODES:
        assert torch.isfinite(agg_loss(loss, mask, mode))
    for mode in rc.VERL_ONLY_LOSS_AGG:
        with pytest.raises(ValueError, match="loss_agg_mode"):
            agg_loss(loss, mask, mode)


@pytest.mark.parametrize("path", SHIPPED)
def test_shipped_configs_pass_and_compose_every_run(path):
    cfg = load(path)
    if path == "config/paper.yaml":  # ships `main` revisions: refused until pinned or opted out (preflight)
        (problem,) = preflight.validate_config(cfg)
        assert "allow_unpinned_revisions" in problem
        cfg["allow_unpinned_revisions"] = True
    assert preflight.validate_config(cfg) == []
    for dataset, variant, _ in Experiment(cfg).requested_runs():
        run = rc.parse_run(rc.compose_run(cfg, dataset, variant), cfg["engines"]["training"])
        assert run.setting == rc.dataset_setting(cfg, dataset) and run.variant == variant


def test_paper_efficient_multi_turn_takes_its_per_setting_n_and_m():
    cfg = load("config/paper.yaml")
    run, where = rc.compose_sources(cfg, "multi_turn", "efficient")
    assert (run["n"], run["downsample"]["m"]) == (16, 8)
    assert where["n"] == "train.variants.efficient.per_setting.multi_turn.n"
    assert rc.compose_run(cfg, "single_turn", "efficient")["n"] == 8
    assert rc.compose_run(cfg, "tooln1", "vanilla")["max_steps"] == rc.FILTER_POLICY_STEPS
    assert rc.compose_run(cfg, "format_multi", "vanilla")["epochs"] == cfg["train"]["format_study"]["epochs"]


def short(message: str) -> str:
    assert len(message.splitlines()) < 10, message
    return message


def test_m_above_n_names_the_variant_key_the_value_and_the_range():
    cfg = load()
    cfg["train"]["variants"]["efficient"]["downsample"]["m"] = 12
    validate(copy.deepcopy(cfg), str(SCHEMA_PATH))  # one key at a time it is fine: a cross-key rule
    with pytest.raises(rc.ConfigError) as err:
        preflight.check_config(cfg)
    msg = short(str(err.value))
    assert "train.variants.efficient.downsample.m must be an int in [2, n=8]" in msg
    assert "got 12" in msg and "train.settings.single_turn.n: 8" in msg


def test_a_verl_only_loss_mode_is_refused_on_the_local_engine_only():
    cfg = load()
    cfg["train"]["settings"]["single_turn"]["loss_agg"] = "seq-mean-token-sum"
    validate(copy.deepcopy(cfg), str(SCHEMA_PATH))
    msg = short("\n".join(preflight.validate_config(cfg)))
    assert "train.settings.single_turn.loss_agg must be one of ('token-mean', 'seq-mean-token-mean')" in msg
    assert "got 'seq-mean-token-sum'" in msg and "only engines.training verl" in msg
    paper = {**load("config/paper.yaml"), "allow_unpinned_revisions": True}
    paper["train"]["settings"]["single_turn"]["loss_agg"] = "seq-mean-token-sum"
    assert preflight.validate_config(paper) == []


def test_a_top_level_typo_is_one_line_naming_it_and_the_allowed_keys():
    cfg = load()
    cfg["trian"] = cfg.pop("train")
    with pytest.raises(WorkflowError) as err:
        validate(copy.deepcopy(cfg), str(SCHEMA_PATH))
    assert len(str(err.value).splitlines()) > 100  # what snakemake's validate prints on its own
    msg = short(rc.schema_problem(cfg, SCHEMA))
    assert "'trian' was unexpected" in msg and "'train'" in msg


@pytest.mark.parametrize(
    ("change", "named"),
    [
        # the probe schedule: a permanent skip never probes, a temporary one must
        (lambda c: c["train"]["variants"]["filter_only"]["filter"].update(semantics="permanent"),
         "train.variants.filter_only.filter.semantics='permanent' never re-probes"),
        (lambda c: c["train"]["variants"]["filter_only"]["filter"].update(probe_every=None),
         "train.variants.filter_only.filter.semantics='temporary' needs probe_every"),
        (lambda c: c["train"]["runs"].update(single_turn=["vanilla", "efficent"]),
         "train.runs.single_turn must be a variant of train.variants"),
        (lambda c: c["train"]["efficiency"]["runs"]["multi_turn"].update(fast=[0]),
         "train.efficiency.runs.multi_turn must be a variant"),
        (lambda c: c["train"]["variants"]["vanilla_n4"].update(n=4, downsample={
            "m": 8, "selection": "max_variance", "advantage_scope": "group"}),
         "train.variants.vanilla_n4.downsample.m must be an int in [2, n=4] (train.variants.vanilla_n4.n: 4)"),
    ],
)  # fmt: skip
def test_cross_key_rules_name_the_key(change, named):
    cfg = load()
    cfg["train"]["efficiency"]["runs"]["single_turn"]["vanilla_n4"] = [0]
    change(cfg)
    validate(copy.deepcopy(cfg), str(SCHEMA_PATH))
    msg = short("\n".join(preflight.validate_config(cfg)))
    assert named in msg


def test_an_empty_seed_list_leaves_a_variant_out_of_the_efficiency_experiment():
    # an overlay (--configfile) is merged key by key, so [] is how it drops a variant of the default
    cfg = load()
    runs = cfg["train"]["efficiency"]["runs"]["multi_turn"]
    runs["efficient_n16"] = []
    assert rc.schema_problem(cfg, SCHEMA) is None
    assert preflight.validate_config(cfg) == []
    dag = {(d, v) for d, v, _ in Experiment(cfg).requested_runs()}
    assert ("multi_turn", "efficient_n16") not in dag
    assert ("multi_turn", "vanilla_n16") in dag


def test_all_wrong_k_is_accepted_as_both_engines_accept_it():
    cfg = load()
    cfg["train"]["variants"]["filter_only"]["filter"]["all_wrong_k"] = 2
    validate(copy.deepcopy(cfg), str(SCHEMA_PATH))
    assert preflight.validate_config(cfg) == []
    run = rc.parse_run(rc.compose_run(cfg, "single_turn", "filter_only"))
    assert run.filter == rc.FilterConfig(k=1, probe_every=2, probe_fraction=0.0, all_wrong_k=2)


def test_verl_batch_geometry_is_checked_before_any_job():
    cfg = {**load("config/paper.yaml"), "allow_unpinned_revisions": True}
    cfg["train"]["verl"]["gpus_per_node"] = 6  # 128 x 8 rows do not split over 6 / ... ranks
    cfg["train"]["verl"]["tensor_parallel"] = 4
    msg = short("\n".join(preflight.validate_config(cfg)))
    assert "train.verl with run" in msg and "tensor_parallel=4 must divide gpus_per_node=6" in msg
    del cfg["train"]["verl"]  # the workflow's default then gives the job no GPU
    assert "gpus_per_node >= 1" in "\n".join(preflight.validate_config(cfg))


def test_engine_specific_limits_of_the_typed_config():
    run = rc.compose_run(load(), "single_turn", "efficient")
    assert rc.parse_run({**run, "heldout_size": 0}, "local").heldout_size == 0  # no held-out curve
    with pytest.raises(rc.ConfigError, match="heldout_size must be an int >= 1 on engines.training verl"):
        rc.parse_run({**run, "heldout_size": 0}, "verl")
    with pytest.raises(rc.ConfigError, match=r"downsample.m must be an int in \[2, n=8\], got 1"):
        rc.parse_run({**run, "downsample": {**run["downsample"], "m": 1}})
    assert rc.parse_run({**run, "loss_agg": "token-sum"}, "verl").loss_agg == "token-sum"
    with pytest.raises(rc.ConfigError, match="loss_agg must be one of"):
        rc.parse_run({**run, "loss_agg": "token-sum"}, "local")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c: c["evaluate"]["protocols"]["default"].update(template="pasted"),
         "config evaluate.protocols.default.template must be one of ['native', 'context', 'context_all'], got 'pasted'"),
        (lambda c: c["train"]["variants"]["efficient"]["filter"].update(probe_every=0),
         "config train.variants.efficient.filter.probe_every: 0 is less than the minimum of 1"),
        (lambda c: c["train"].pop("seed"), "config train: 'seed' is a required property"),
    ],
)  # fmt: skip
def test_a_schema_failure_is_one_line_with_key_value_and_allowed(change, expected):
    cfg = load()
    change(cfg)
    with pytest.raises(WorkflowError):
        validate(copy.deepcopy(cfg), str(SCHEMA_PATH))  # snakemake's own validate agrees it is bad
    assert rc.schema_problem(cfg, SCHEMA) == expected


def test_a_valid_config_has_no_schema_problem():
    for path in ("config/config.yaml", "config/paper.yaml", ".test/config.yaml"):
        assert rc.schema_problem(load(path), SCHEMA) is None, path


def test_heldout_samples_is_a_local_key_with_a_floor_of_zero():
    from toolcall_repro.runconfig import parse_run, run_problems

    base = {
        "lr": 1e-4, "batch_size": 8, "n": 8, "temperature": 0.7, "top_p": 1.0, "max_prompt_tokens": 2048,
        "max_new_tokens": 48, "epochs": 1, "clip_low": 0.2, "clip_high": 0.28, "loss_agg": "token-mean",
        "checkpoint_every": 4, "heldout_size": 8, "filter": None, "downsample": None,
    }  # fmt: skip
    assert parse_run(base).heldout_samples == 0
    assert parse_run({**base, "heldout_samples": 8}).heldout_samples == 8
    assert run_problems({**base, "heldout_samples": -1}) == [
        "heldout_samples must be an int >= 0 (0: greedy only), got -1"
    ]
    # verl evaluates through BFCL, not the trainer's held-out loop: the key is unknown there
    assert "unknown keys ['heldout_samples']" in run_problems({**base, "heldout_samples": 8}, "verl")[0]


def test_the_gpu_type_is_a_site_setting_not_a_config_key():
    """The GPU type lives in one place, the slurm profile's site settings: an old config naming it in
    train.verl is told where it went, before any job."""
    cfg = {**load("config/paper.yaml"), "allow_unpinned_revisions": True}
    assert "gpu_model" not in cfg["train"]["verl"]
    cfg["train"]["verl"]["gpu_model"] = "a100"
    msg = short("\n".join(preflight.validate_config(cfg)))
    assert "train.verl.gpu_model is a site setting now" in msg and "profiles/slurm/config.yaml" in msg


def test_tracking_takes_verl_loggers_only_with_the_verl_engine():
    cfg = load()
    assert cfg["engines"]["tracking"] == ["tensorboard"]
    validate(copy.deepcopy(cfg), str(SCHEMA_PATH))
    assert not [p for p in rc.stage_problems(cfg) if "tracking" in p]
    local = copy.deepcopy(cfg)
    local["engines"]["tracking"] = ["tensorboard", "wandb"]
    (problem,) = [p for p in rc.stage_problems(local) if "tracking" in p]
    assert (
        problem.startswith("engines.tracking: ['wandb'] are verl's loggers")
        and "[tensorboard] or []" in problem
    )
    local["engines"]["training"] = "verl"
    assert not [p for p in rc.stage_problems(local) if "tracking" in p]
    bad = copy.deepcopy(cfg)
    bad["engines"]["tracking"] = ["neptune"]
    with pytest.raises(WorkflowError):
        validate(bad, str(SCHEMA_PATH))


def test_ms_range_and_the_effective_m_are_worked_out_in_runconfig_alone():
    """One home for m's range (M_MIN, m_problem) and for the m a run back-propagates (effective_m): a copy
    elsewhere in the package (a bound of its own, `m or n` worked out again) fails here."""
    copies = re.compile(r"\bM_MIN\b|\.get\(\"m\"\)\s*or\b|\[\"m\"\]\)?\s+if\s+\w+\s+else\s+\w+")
    found = [
        f"{p.relative_to(REPO)}:{i}: {line.strip()}"
        for p in sorted((REPO / "src").rglob("*.py"))
        if p.name != "runconfig.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if copies.search(line)
    ]
    assert found == []
    assert rc.effective_m({"n": 8, "downsample": None}) == 8
    assert rc.effective_m({"n": 16, "downsample": {"m": 8}}) == 8
    assert rc.m_problem(1, 8) == "an int in [2, n=8]" and rc.m_problem(8, 8) is None
