"""The experiment object: the config's units with their paths and manifests, hand-computed on a small config."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from toolcall_repro.experiment import Experiment
from toolcall_repro.units import Score, Study, TrainingRun

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = {
    "run_id": "t",
    "data": {"mode": "synthetic", "sources": {}},
    "model": {"base": "tiny", "filter_policy": "base"},
    "filter": {"seed": 0},
    "train": {
        "seed": 0,
        "settings": {"single_turn": {}, "multi_turn": {}},
        "runs": {"single_turn": ["vanilla"], "multi_turn": ["efficient", "vanilla"]},
        "efficiency": {"runs": {"multi_turn": {"vanilla": [0, 1], "efficient": [2]}}},
        "format_study": {"setting": "multi_turn", "variant": "vanilla"},
    },
    "evaluate": {
        "seeds": [0, 1],
        "heldout": {"per_setting": 4},
        "models": {
            "base": {"source": "base"},
            "rl": {"source": "train", "setting": "multi_turn", "variant": "efficient"},
            "fmt": {"source": "format", "dataset": "format_multi"},
        },
        "studies": {
            "seed_variance": {"models": ["base"], "protocols": ["default"], "seeds": [0, 1, 2, 3]},
            "template": {"models": ["base"], "protocols": ["stronger", "context"]},
            "factorial": {"models": ["base"], "protocols": ["x"], "benchmarks": ["heldout"]},
            "table4": {"models": ["base", "rl"], "protocols": ["default"]},
        },
        "acebench": {"models": ["base", "rl"], "protocol": "stronger"},
        "general": {"models": ["base", "rl"]},
    },
}
EVAL = os.path.join("results", "t", "eval")


def rel(paths):
    return [os.path.relpath(p, os.path.join("results", "t")) for p in paths]


@pytest.fixture
def exp():
    return Experiment(copy.deepcopy(CONFIG))


def test_training_runs_and_efficiency_seeds(exp):
    assert [(r.dataset, r.variant, r.seed) for r in exp.training_runs()] == [
        ("single_turn", "vanilla", None),
        ("multi_turn", "efficient", None),
        ("multi_turn", "vanilla", None),
    ]
    # train.seed (0) is the plain run; the other seeds sit in seed<k> folders beside it
    runs = exp.efficiency_runs()
    assert [r.key for r in runs] == ["multi_turn-efficient-seed2", "multi_turn-vanilla", "multi_turn-vanilla-seed1"]
    assert rel([r.summary for r in runs]) == [
        "train/multi_turn/efficient/seed2/summary.json",
        "train/multi_turn/vanilla/summary.json",
        "train/multi_turn/vanilla/seed1/summary.json",
    ]
    # another seed is the train_grpo_seed rule's job, filed under that rule
    assert rel([runs[1].manifest, runs[2].manifest]) == [
        "manifests/train_grpo/multi_turn-vanilla.json", "manifests/train_grpo_seed/multi_turn-vanilla-seed1.json",
    ]  # fmt: skip
    assert rel(runs[1].files) == [f"train/multi_turn/vanilla/{n}" for n in ("summary.json", "metrics.jsonl", "curve.jsonl")]


def test_scores_per_benchmark_with_their_rules_and_manifests(exp):
    # BFCL at the evaluation seeds: every study but seed_variance, and not the heldout-only factorial
    assert rel(s.path for s in exp.benchmarks["bfcl"].target(exp)) == [
        "eval/bfcl/base/context/summary.json",
        "eval/bfcl/base/default/summary.json",  # table4's, not seed_variance's
        "eval/bfcl/base/stronger/summary.json",
        "eval/bfcl/rl/default/summary.json",
    ]
    (variance,) = exp.benchmarks["bfcl"].variance(exp)
    assert rel([variance.path, variance.manifest]) == [
        "eval/bfcl/base/default/variance.json",
        "manifests/summarise_bfcl_variance/base-default.json",
    ]
    # held-out: the seed-variance pair as its variance file, one summary per other pair
    assert rel(s.path for s in exp.benchmark_scores("heldout")) == [
        "eval/heldout/base/context/summary.json",
        "eval/heldout/base/default/summary.json",
        "eval/heldout/base/default/variance.json",
        "eval/heldout/base/stronger/summary.json",
        "eval/heldout/base/x/summary.json",
        "eval/heldout/rl/default/summary.json",
    ]
    assert {s.rule for s in exp.benchmark_scores("heldout")} == {"score_heldout"}
    assert rel(s.manifest for s in exp.benchmark_scores("acebench")) == [
        "manifests/summarise_acebench/base-stronger.json",
        "manifests/summarise_acebench/rl-stronger.json",
    ]
    general = exp.benchmark_scores("general")
    assert rel([general[1].path, general[1].manifest]) == [
        "eval/general/rl/summary.json",
        "manifests/check_general_capability/rl.json",
    ]
    assert len(exp.scores()) == 4 + 1 + 6 + 2 + 2
    # one list: the registry's, in its order (benchmarks.py)
    assert list(exp.benchmarks) == ["bfcl", "acebench", "heldout", "general"]
    assert exp.scores() == [s for b in exp.benchmarks.values() for s in b.scores(exp)]


def test_a_benchmark_seeds_override_moves_that_benchmark_alone(exp):
    """evaluate.benchmarks.<name>.seeds over evaluate.seeds; absent: every benchmark at evaluate.seeds."""
    assert {n: exp.benchmark_seeds(n) for n in exp.benchmarks} == {
        "bfcl": [0, 1], "acebench": [0, 1], "heldout": [0, 1], "general": [0],
    }  # fmt: skip
    config = copy.deepcopy(CONFIG)
    config["evaluate"]["benchmarks"] = {"bfcl": {"seeds": [5, 6, 7]}, "heldout": {"seeds": [9]}}
    other = Experiment(config)
    assert other.benchmark_seeds("bfcl") == [5, 6, 7] and other.benchmark_seeds("acebench") == [0, 1]
    assert rel(other.seed_files("bfcl", "rl", "default")) == [f"eval/bfcl/rl/default/seed{k}.json" for k in (5, 6, 7)]
    assert rel(other.seed_files("acebench", "rl", "stronger"))[-1] == "eval/acebench/rl/stronger/seed1.json"
    # held-out: its evaluation seeds; the seed-variance study keeps its own
    assert other.heldout_seeds("base", "stronger") == {"eval": [9], "variance": [9]}
    assert other.heldout_seeds("base", "default") == {"eval": [9], "variance": [0, 1, 2, 3]}


def test_a_study_target_and_its_seeds(exp):
    assert rel(exp.study_outputs("factorial")) == ["eval/heldout/base/x/summary.json"]
    assert rel(exp.study_outputs("seed_variance")) == [
        "eval/bfcl/base/default/variance.json",
        "eval/heldout/base/default/variance.json",
    ]
    assert exp.heldout_seeds("base", "default") == {"eval": [0, 1], "variance": [0, 1, 2, 3]}
    assert exp.heldout_seeds("base", "stronger") == {"eval": [0, 1], "variance": [0, 1]}
    assert rel(exp.seed_files("bfcl", "rl", "default")) == [
        "eval/bfcl/rl/default/seed0.json",
        "eval/bfcl/rl/default/seed1.json",
    ]


def test_without_the_held_out_benchmark_studies_run_on_bfcl_alone():
    config = copy.deepcopy(CONFIG)
    del config["evaluate"]["heldout"]
    exp = Experiment(config)
    assert exp.benchmark_scores("heldout") == [] and exp.study_outputs("factorial") == []
    assert exp.studies["template"].benchmarks == ("bfcl",)


def test_models_behind_the_tags(exp):
    assert rel([exp.models.model_dir("base"), exp.models.model_dir("rl"), exp.models.model_dir("fmt")]) == [
        "models/base",
        "train/multi_turn/efficient/final",
        "train/format_multi/vanilla/final",
    ]
    assert rel([exp.heldout_split("format_single"), exp.heldout_split("tooln1")]) == [
        "data/train/heldout_multi_turn.parquet",  # the format study borrows multi_turn's setting
        "data/train/heldout_tooln1.parquet",
    ]
    assert exp.models.hub_id("Qwen--Qwen3-4B") == "Qwen/Qwen3-4B"


def test_the_analysis_receives_units_that_name_what_they_are(exp):
    units = exp.analysis_units()
    first = units["scores"][0]
    assert {k: first[k] for k in ("benchmark", "model", "protocol", "kind")} == {
        "benchmark": "bfcl",
        "model": "base",
        "protocol": "context",
        "kind": "summary",
    }
    assert [(u["dataset"], u["variant"], u["seed"]) for u in units["runs"]][0] == ("single_turn", "vanilla", None)
    manifests = exp.result_manifests(exp.scores(), exp.training_runs(), filter_report=True)
    assert len(manifests) == len(set(manifests)) and rel([manifests[-1]]) == ["manifests/train_grpo/single_turn-vanilla.json"]
    assert os.path.join("results", "t", "manifests", "report_filter", "all.json") in manifests


def test_a_protocol_is_its_own_keys_over_the_defaults_and_a_gap_is_named():
    cfg = copy.deepcopy(CONFIG)
    cfg["evaluate"]["protocol_defaults"] = {"template": "native", "thinking": "drop", "temperature": 0.7,
                                            "top_p": 1.0, "max_tokens": 64}  # fmt: skip
    cfg["evaluate"]["protocols"] = {"default": {"system_prompt": "bfcl_default"},
                                    "context": {"system_prompt": "stronger", "template": "context", "max_tokens": 8}}  # fmt: skip
    exp = Experiment(cfg)
    assert exp.protocol("context") == {"system_prompt": "stronger", "template": "context", "thinking": "drop",
                                       "temperature": 0.7, "top_p": 1.0, "max_tokens": 8}  # fmt: skip
    assert exp.protocol_problems() == []
    del cfg["evaluate"]["protocol_defaults"]["top_p"], cfg["evaluate"]["protocol_defaults"]["thinking"]
    assert Experiment(cfg).protocol_problems() == [
        f"evaluate.protocols.{name}: thinking, top_p not set there nor in evaluate.protocol_defaults; every "
        "protocol needs system_prompt, template, thinking, temperature, top_p, max_tokens"
        for name in ("context", "default")
    ]


def test_every_run_the_dag_can_build_once_with_the_key_that_asks_for_it(exp):
    assert exp.requested_runs() == [
        ("single_turn", "vanilla", "train.runs.single_turn"),
        ("multi_turn", "efficient", "train.runs.multi_turn"),
        ("multi_turn", "vanilla", "train.runs.multi_turn"),  # asked again by efficiency.runs: listed once
        ("format_single", "vanilla", "train.format_study.variant"),
        ("format_multi", "vanilla", "train.format_study.variant"),
    ]
    cfg = copy.deepcopy(CONFIG)
    cfg["model"]["filter_policy"] = "train"
    cfg["evaluate"]["models"]["rl"]["variant"] = "downsample_only"
    assert Experiment(cfg).requested_runs()[-2:] == [
        ("multi_turn", "downsample_only", "evaluate.models.rl"),
        ("tooln1", "vanilla", "model.filter_policy: train"),
    ]


def test_the_studies_reach_the_analysis_as_units_with_their_defaults_resolved(exp):
    studies = exp.analysis_units()["studies"]
    assert studies["template"] == {  # no seeds or benchmarks in its spec: the evaluation seeds, both benchmarks
        "models": ["base"], "protocols": ["stronger", "context"], "seeds": [0, 1], "benchmarks": ["bfcl", "heldout"],
    }  # fmt: skip
    assert studies["seed_variance"]["seeds"] == [0, 1, 2, 3] and studies["factorial"]["benchmarks"] == ["heldout"]
    back = Study.from_unit("table4", studies["table4"])
    assert back == exp.studies["table4"] and back.pairs == (("base", "default"), ("rl", "default"))


def test_the_report_takes_each_tables_pairs_from_the_study_units(exp):
    import pandas as pd

    from toolcall_repro.analysis.report import _study

    cfg = exp.analysis_units()
    bfcl = pd.DataFrame({"benchmark": ["bfcl"], "model": ["other"], "protocol": ["p"]})
    held = bfcl.assign(benchmark="heldout")
    assert _study(cfg, "table4", bfcl) == [("base", "default"), ("rl", "default")]  # the unit's, not the scores'
    assert _study(cfg, "factorial", bfcl) == [] and _study(cfg, "factorial", held) == [("base", "x")]
    assert _study(cfg, "absent", bfcl) == [("other", "p")]  # no study: every pair that has scores


def test_units_are_plain_values():
    run = TrainingRun("results/t", "single_turn", "vanilla", 3)
    assert run.key == "single_turn-vanilla-seed3" and run == TrainingRun("results/t", "single_turn", "vanilla", 3)
    score = Score("results/t", "general", "base", None)
    assert score.unit()["path"] == os.path.join("results", "t", "eval", "general", "base", "summary.json")


@pytest.mark.parametrize("configfile", ["config/config.yaml", ".test/config.yaml"])
def test_every_unit_of_the_shipped_configs_has_a_path_of_its_own(configfile):
    with open(os.path.join(ROOT, configfile)) as f:
        config = yaml.safe_load(f)
    exp = Experiment(config)
    scores = [s.path for s in exp.scores()]
    assert len(scores) == len(set(scores))  # one file, one unit: no score listed twice
    assert len({s.manifest for s in exp.scores()}) < len(scores)  # score_heldout writes both files of a pair
    runs = [r.summary for r in exp.training_runs()]
    assert len(runs) == len(set(runs)) and all(p.startswith(exp.run_dir + os.sep) for p in scores + runs)


def test_the_model_behind_each_generation_and_the_training_jobs_resources():
    """What preflight checks and the rules pass, resolved once here (the model's chat template and
    thinking switch; a training job's SLURM resources and the verl it is launched with)."""
    cfg = copy.deepcopy(CONFIG)
    cfg["model"] = {"base": "org/base", "filter_policy": "train", "filter_policy_multi_turn": "early",
                    "enable_thinking": {"org/multi": True}}  # fmt: skip
    cfg["train"]["settings"]["multi_turn"]["model"] = "org/multi"
    exp = Experiment(cfg)
    assert exp.models.filter_policy_model("single_turn") == "org/base"  # Tool-N1's policy starts at single_turn's
    assert exp.models.filter_policy_model("multi_turn") is None  # the tiny model's warm start
    assert [exp.models.eval_model(t) for t in ("base", "rl", "fmt")] == ["org/base", "org/multi", "org/multi"]
    assert exp.models.thinking("org/multi") is True and exp.models.thinking("org/base") is None and exp.models.thinking(None) is None
    assert exp.models.hub_models() == ["org/base", "org/multi"]
    assert exp.jobs.train_resources() == {"gpu": 0, "nodes": 1} and exp.jobs.job_verl()["gpus_per_node"] == 0
    cfg["train"]["verl"] = {"nodes": 2, "gpus_per_node": 8}
    exp = Experiment(cfg)
    assert exp.jobs.train_resources() == {"gpu": 16, "nodes": 2, "tasks_per_gpu": 0, "tasks": 2, "mpi": "srun"}
    cfg["resources"] = {"train": {"nodes": 1}}  # the site's override reaches the job's verl too
    assert Experiment(cfg).jobs.job_verl() == {"nodes": 1, "gpus_per_node": 8}


# --- the rules' patterns, filled in, are the units' paths -------------------------------------------------


def fill(pattern: str, **wildcards) -> str:
    return pattern.format(**wildcards)


def test_a_training_rules_patterns_are_its_runs_paths(exp):
    """train_grpo and train_grpo_seed (train.smk) write what the analysis reads of each run."""
    lay = exp.layout
    for run in [*exp.training_runs(), *exp.efficiency_runs()]:
        w = {"dataset": run.dataset, "variant": run.variant, "seed": run.seed}
        if run.seed is None:
            files = [lay.training_file("{dataset}", "{variant}", n) for n in ("summary", "metrics", "curve")]  # fmt: skip
            manifest = lay.manifest("train_grpo", "{dataset}", "{variant}")
        else:
            files = [lay.training_file("{dataset}", "{variant}", n, "{seed}") for n in ("summary", "metrics", "curve")]  # fmt: skip
            manifest = lay.manifest("train_grpo_seed", lay.training_key("{dataset}", "{variant}", "{seed}"))
        assert [fill(f, **w) for f in files] == run.files
        assert fill(manifest, **w) == run.manifest


def test_a_scoring_rules_patterns_are_its_scores_paths(exp):
    """summarise_*, score_heldout and check_general_capability (evaluate.smk) write each score and manifest."""
    lay = exp.layout
    scores = exp.scores()
    assert {s.benchmark for s in scores} == {"bfcl", "acebench", "heldout", "general"}
    for s in scores:
        w = {"model": s.model, "protocol": s.protocol}
        if s.protocol is None:
            path, manifest = lay.score(s.benchmark, "{model}", None), lay.manifest(s.rule, "{model}")
        else:
            path = lay.score(s.benchmark, "{model}", "{protocol}", s.kind)
            manifest = lay.manifest(s.rule, "{model}", "{protocol}")
        assert (fill(path, **w), fill(manifest, **w)) == (s.path, s.manifest)
    seed_files = exp.seed_files("bfcl", "base", "default", [3])
    assert seed_files == [fill(lay.seed_score("bfcl", "{model}", "{protocol}", "{seed}"), model="base", protocol="default", seed=3)]  # fmt: skip
