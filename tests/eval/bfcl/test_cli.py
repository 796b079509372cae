"""The BFCL jobs end to end on a tiny random Qwen2 model, by hand as `toolcall-repro stage` runs them:
generate_bfcl, score_bfcl, summarise_bfcl."""

import json
import os
import subprocess
import sys

import pytest

from toolcall_repro.eval.bfcl.jobs import parse_protocol
from toolcall_repro.job import run
from toolcall_repro.stage import job_from_argv

# slow: the module's fixture runs generate_bfcl and score_bfcl through the CLI in fresh processes, and again in
# this one (~12 s), before any of its tests.
pytestmark = pytest.mark.slow

CATEGORIES = "simple_python,irrelevance,live_simple"
PROTOCOL = {
    "id": "default",
    "system_prompt": "bfcl_default",
    "template": "native",
    "thinking": "drop",
    "temperature": 0.7,
    "top_p": 1.0,
    "max_tokens": 8,
    "backend": "transformers",
}


def _generate_args(model_dir, results, seed):
    config = {"bfcl": {"categories": CATEGORIES.split(","), "limit": 2}, "protocol": {**PROTOCOL, "seed": seed},
              "model": {"tag": "base"}}  # fmt: skip
    return ["generate_bfcl", "--in", f"model={model_dir}", "--out", f"results={results}",
            "--config", json.dumps(config), "--seed", f"eval={seed}", "--option", "threads=1"]  # fmt: skip


def _score_args(results, out, seed):
    return ["score_bfcl", "--in", f"results={results}", "--out", f"score={out}",
            "--config", json.dumps({"protocol": {**PROTOCOL, "seed": seed}}), "--seed", f"eval={seed}"]  # fmt: skip


def stage(argv) -> int:
    """One job in this process, as `toolcall-repro stage` builds it."""
    return run(job_from_argv(argv))


def summarise(inputs, out) -> int:
    return stage(["summarise_bfcl", *[a for i in inputs for a in ("--in", f"seeds={i}")], "--out", f"summary={out}"])


@pytest.fixture(scope="module")
def two_seeds(tiny_model_dir, tmp_path_factory):
    """Seed 0 through the real command line (a process whose BFCL_PROJECT_ROOT is not usable: the job sets
    its own), seed 1 in this process."""
    root = tmp_path_factory.mktemp("bfcl_cli")
    env = {**os.environ, "BFCL_PROJECT_ROOT": "/nonexistent/must-be-replaced"}
    for argv in (_generate_args(tiny_model_dir, root / "w0" / "results", 0),
                 _score_args(root / "w0" / "results", root / "seed0.json", 0)):  # fmt: skip
        proc = subprocess.run([sys.executable, "-m", "toolcall_repro.cli", "stage", *argv],
                              env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
    mp = pytest.MonkeyPatch()
    mp.setenv("BFCL_PROJECT_ROOT", os.environ.get("BFCL_PROJECT_ROOT", ""))
    try:
        assert stage(_generate_args(tiny_model_dir, root / "w1" / "results", 1)) == 0
        assert stage(_score_args(root / "w1" / "results", root / "seed1.json", 1)) == 0
    finally:
        mp.undo()
    return root


def test_score_file_follows_the_contract_and_carries_the_card(two_seeds):
    doc = json.loads((two_seeds / "seed0.json").read_text())
    assert set(doc) == {"card", "categories", "summary", "coverage"}
    assert set(doc["categories"]) == set(CATEGORIES.split(","))
    for cat in doc["categories"].values():
        assert cat["total"] == 2 and 0 <= cat["correct"] <= 2
        assert {e["id"] for e in cat["entries"]} and all(
            {"id", "valid", "error"} <= set(e) for e in cat["entries"]
        )
    card = doc["card"]
    assert card["protocol_id"] == "default" and card["seed"] == 0
    assert (
        card["system_prompt"]["id"] == "bfcl_default" and card["system_prompt"]["output_format"] == "python"
    )
    assert card["benchmark"]["limit"] == 2 and len(card["benchmark"]["data"]["sha256"]) == 64
    assert "web_search_base" in card["benchmark"]["excluded_categories"]
    assert card["user_simulator"] is None and len(card["model"]["checkpoint_sha256"]) == 64
    assert set(card["aggregation"]["formulas"]) >= {"single_turn_mean_nl_l", "single_turn_weighted", "avg"}
    assert doc["summary"]["multi_turn"] is None  # no multi-turn category in this run
    assert not doc["coverage"]["non_live"]["complete"]
    # the raw results are in bfcl's layout, next to the card
    results = two_seeds / "w0" / "results"
    assert (results / "toolcallrepro-base" / "non_live" / "BFCL_v4_simple_python_result.json").is_file()
    assert not list(two_seeds.glob("w0/.results.tmp-*"))


def test_summarise_gives_mean_std_per_seed(two_seeds):
    out = two_seeds / "summary.json"
    assert summarise([two_seeds / "seed0.json", two_seeds / "seed1.json"], out) == 0
    summary = json.loads(out.read_text())
    assert summary["seeds"] == [0, 1]
    per_seed = [json.loads((two_seeds / f"seed{s}.json").read_text())["summary"]["non_live"] for s in (0, 1)]
    assert summary["metrics"]["non_live"]["per_seed"] == per_seed
    assert summary["card"]["protocol_id"] == "default"


def test_mean_input_tokens_is_the_mean_first_query_count_of_the_result_lines(two_seeds):
    doc = json.loads((two_seeds / "seed0.json").read_text())
    per_category = {}
    for f in (two_seeds / "w0" / "results").rglob("BFCL_v4_*_result.json"):
        lines = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        per_category[f.name.removeprefix("BFCL_v4_").removesuffix("_result.json")] = [
            line["input_token_count"] for line in lines
        ]
    counts = [c for cs in per_category.values() for c in cs]
    assert len(counts) == 6 and all(isinstance(c, int) and c > 0 for c in counts)
    assert doc["summary"]["mean_input_tokens"] == pytest.approx(sum(counts) / len(counts))
    for category, cs in per_category.items():
        assert doc["categories"][category]["mean_input_tokens"] == pytest.approx(sum(cs) / len(cs))
    assert "mean_input_tokens" in doc["card"]["aggregation"]["formulas"]
    summary = two_seeds / "tokens_summary.json"
    assert summarise([two_seeds / "seed0.json", two_seeds / "seed1.json"], summary) == 0
    metric = json.loads(summary.read_text())["metrics"]["mean_input_tokens"]
    # the first prompt does not depend on the sampling seed
    assert metric["per_seed"] == [doc["summary"]["mean_input_tokens"]] * 2 and metric["std"] == 0.0


def test_rescoring_is_deterministic_and_checks_the_protocol(two_seeds, monkeypatch):
    monkeypatch.setenv("BFCL_PROJECT_ROOT", os.environ.get("BFCL_PROJECT_ROOT", ""))
    again = two_seeds / "again.json"
    results = two_seeds / "w0" / "results"
    assert stage(_score_args(results, again, 0)) == 0
    first = json.loads((two_seeds / "seed0.json").read_text())
    assert json.loads(again.read_text()) == first
    with pytest.raises(ValueError, match="generated under protocol"):
        stage(_score_args(results, two_seeds / "again1.json", 1))


def test_generate_then_score_bfcl_jobs_give_the_same_scores_and_record_their_specs(
    two_seeds, tiny_model_dir, run_stage, monkeypatch
):
    """generate_bfcl (a per-category limit) writes the raw results, score_bfcl scores them into the
    entries of the command-line run; each manifest records the spec's config, seeds and options."""
    monkeypatch.setenv("BFCL_PROJECT_ROOT", os.environ.get("BFCL_PROJECT_ROOT", ""))
    root = two_seeds / "job"
    config = {
        "bfcl": {"categories": ["simple_python"], "limit": {"default": 2, "multi_turn_base": 1}},
        "protocol": {**PROTOCOL, "seed": 0},
        "model": {"tag": "base", "source": "base"},
    }
    results = str(root / "eval" / "raw" / "seed0")
    manifest = run_stage(
        "generate_bfcl", input={"model": str(tiny_model_dir)},
        output={"results": results, "manifest": str(root / "manifests" / "generate_bfcl" / "base-default-0.json")},
        config=config, seeds={"eval": 0}, threads=1,
    )  # fmt: skip
    assert (root / "eval" / "raw" / "seed0" / "toolcallrepro-base").is_dir()
    assert manifest["rule"] == "generate_bfcl" and manifest["config"] == config
    assert manifest["seeds"] == {"eval": 0} and manifest["options"] == {"threads": 1}
    assert not (root / "eval" / "seed0.json").exists()  # generation scores nothing

    score = str(root / "eval" / "seed0.json")
    manifest = run_stage(
        "score_bfcl", input={"results": results},
        output={"score": score, "manifest": str(root / "manifests" / "score_bfcl" / "base-default-0.json")},
        config={"protocol": config["protocol"]}, seeds={"eval": 0},
    )  # fmt: skip
    doc = json.loads((root / "eval" / "seed0.json").read_text())
    cli = json.loads((two_seeds / "seed0.json").read_text())
    assert doc["categories"]["simple_python"] == cli["categories"]["simple_python"]  # per-query seeds
    assert doc["card"]["benchmark"]["limit"] == {"default": 2, "multi_turn_base": 1}
    assert doc["card"]["seed"] == 0 and doc["card"]["protocol_id"] == "default"
    assert manifest["rule"] == "score_bfcl" and set(manifest["outputs"]) == {score}
    assert set(manifest["inputs"]) >= {f"{results}/card.json", f"{results}/expected_ids.json"}

    # the score job holds the results to the protocol it is asked for: another seed's is refused
    with pytest.raises(ValueError, match="generated under protocol"):
        run_stage(
            "score_bfcl", input={"results": results},
            output={"score": str(root / "other.json"), "manifest": str(root / "manifests" / "score_bfcl" / "x.json")},
            config={"protocol": {**PROTOCOL, "seed": 1}}, seeds={"eval": 1},
        )  # fmt: skip
    assert not (root / "other.json").exists()

    inputs = [str(two_seeds / f"seed{s}.json") for s in (0, 1)]
    summary = str(root / "summary.json")
    manifest = run_stage(
        "summarise_bfcl", input={"seeds": inputs},
        output={"summary": summary, "manifest": str(root / "manifests" / "summarise_bfcl" / "base-default.json")},
        config={"seeds": [0, 1]}, seeds={"eval": [0, 1]},
    )  # fmt: skip
    assert summarise(inputs, root / "cli_summary.json") == 0
    assert json.loads((root / "summary.json").read_text()) == json.loads(
        (root / "cli_summary.json").read_text()
    )
    assert manifest["seeds"] == {"eval": [0, 1]} and set(manifest["inputs"]) == set(inputs)


def test_protocol_argument_checks():
    pid, protocol = parse_protocol(json.dumps(PROTOCOL), 3, None)
    assert pid == "default" and protocol.seed == 3 and protocol.output_format == "python"
    with pytest.raises(ValueError, match="contradicts"):
        parse_protocol(json.dumps({**PROTOCOL, "seed": 1}), 2, None)
    with pytest.raises(ValueError, match="unknown protocol keys"):
        parse_protocol(json.dumps({**PROTOCOL, "temprature": 1.0}), 0, None)
