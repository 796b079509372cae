"""The config schema: good configs pass, a bad one fails before any job with the key named."""

from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

REPO = Path(__file__).resolve().parents[2]
SCHEMA = str(REPO / "workflow" / "schemas" / "config.schema.yaml")


@pytest.mark.parametrize("path", ["config/config.yaml", "config/paper.yaml", ".test/config.yaml"])
def test_shipped_configs_are_valid(path):
    validate(yaml.safe_load((REPO / path).read_text()), SCHEMA)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"train": {"settings": {"single_turn": {"learning_rate": 0.1}}}}, "learning_rate"),
        ({"train": {"settings": {"multi_turn": {"batch_size": "big"}}}}, "batch_size"),
        ({"evaluate": {"protocols": {"default": {"template": "pasted"}}}}, "template"),
        ({"engines": {"threads": 0}}, "threads"),
        ({"typo_section": 1}, "typo_section"),
        ({"filter": {"reserve_fraction": 1.0}}, "reserve_fraction"),
        # a cross-key rule: the tiny model's warm start needs a reserve for honest held-out splits
        ({"filter": {"reserve_fraction": 0}}, "filter.reserve_fraction must be > 0 with model.base: tiny"),
        ({"filter": {"multi_turn": {"heldout_from": "filtered"}}}, "heldout_from"),
        (
            {"filter": {"reserve_fraction": 0, "single_turn": {"train_from": "reserve"}}},
            "filter.single_turn.train_from: reserve needs filter.reserve_fraction > 0",
        ),
    ],
)
def test_bad_config_fails_before_any_job_naming_the_key(tmp_path, smk, make_config, overrides, named):
    cfg = make_config(tmp_path, "config/config.yaml", overrides)
    res = smk("-n", "--nolock", "--configfile", str(cfg))
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert named in out
    assert "Job stats" not in out  # nothing was scheduled


@pytest.mark.parametrize("missing", [("train", "seed"), ("evaluate", "seeds"), ("filter", "multi_turn")])
def test_missing_field_is_named(missing):
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    del cfg[missing[0]][missing[1]]
    with pytest.raises(Exception, match=missing[1]):
        validate(cfg, SCHEMA)


@pytest.mark.parametrize(
    ("acebench", "named"),
    [
        ({"source": "download"}, "repo"),  # a download needs repo and commit
        ({"source": "download", "repo": "https://github.com/o/ACEBench", "commit": "main"}, "commit"),
        ({"source": "local"}, "data_dir"),
        ({"source": "shared"}, "source"),
    ],
)
def test_acebench_source_needs_its_keys(acebench, named):
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["evaluate"]["acebench"].update(acebench)
    with pytest.raises(Exception, match=named):
        validate(cfg, SCHEMA)


@pytest.mark.parametrize(
    ("downsample", "line"),
    [
        # a cross-key rule (m <= n) the schema cannot see
        ({"m": 12}, "train.variants.efficient.downsample.m must be an int in [2, n=8] (train.settings.single_turn.n: 8), got 12"),
        ({"m": 1}, "train.variants.efficient.downsample.m must be an int in [2, n=8]"),
        # the names of the RL core's registries are listed once, in the package (not the schema)
        ({"selection": "best"}, "train.variants.efficient.downsample.selection must be one of ('max_variance', 'random', 'max_reward'), got 'best'"),
        ({"advantage_scope": "all"}, "train.variants.efficient.downsample.advantage_scope must be one of"),
    ],
)
def test_a_bad_downsample_fails_the_dry_run_in_a_few_lines(tmp_path, smk, make_config, downsample, line):
    """`snakemake -n` exits before any job with the key, the value and what is allowed, not the schema and
    config dump (preflight.check_config)."""
    over = {"train": {"variants": {"efficient": {"downsample": downsample}}}}
    cfg = make_config(tmp_path, "config/config.yaml", over)
    res = smk("-n", "--nolock", "--configfile", str(cfg))
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert line in out, out
    assert len(out.strip().splitlines()) < 10, out
    assert "Job stats" not in out


def test_paper_config_with_unpinned_revisions_stops_the_dry_run_naming_the_keys(smk):
    """config/paper.yaml ships `main` revisions: the dry-run lists each key to pin and names the opt-out;
    with the opt-out (an exploratory run) it plans the DAG."""
    res = smk("-n", "--nolock", "--configfile", "config/paper.yaml")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Job stats" not in out
    assert "model.revisions.Qwen/Qwen3-4B: 'main'" in out and "data.sources.xlam.revision: 'main'" in out
    assert "set allow_unpinned_revisions: true" in out
    res = smk("-n", "--nolock", "--configfile", "config/paper.yaml", "--config", "allow_unpinned_revisions=True")
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_user_simulator_that_cannot_work_offline_stops_the_paper_dry_run(tmp_path, smk, make_config):
    """ACEBench's agent_multi_turn with an LLM user and no endpoint would fail in all its GPU jobs."""
    over = {"allow_unpinned_revisions": True,
            "evaluate": {"acebench": {"simulator": "openai", "simulator_endpoint": None, "simulator_model": "gpt-4o"}}}  # fmt: skip
    res = smk("-n", "--nolock", "--configfile", str(make_config(tmp_path, "config/paper.yaml", over)))
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Job stats" not in out
    assert "evaluate.acebench.simulator: openai needs evaluate.acebench.simulator_endpoint" in out


def test_a_thinking_model_with_too_short_a_budget_stops_the_paper_dry_run(tmp_path, smk, make_config):
    over = {"allow_unpinned_revisions": True, "train": {"settings": {"multi_turn": {"max_new_tokens": 1024}}}}
    res = smk("-n", "--nolock", "--configfile", str(make_config(tmp_path, "config/paper.yaml", over)))
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Job stats" not in out
    assert "train.settings.multi_turn.max_new_tokens: 1024 must be >= 4096 tokens with " \
           "model.enable_thinking.Qwen/Qwen3-4B: true" in out  # fmt: skip
