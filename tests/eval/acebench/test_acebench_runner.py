"""The runner end to end: an oracle generator scores 100%; the score_acebench job runs a tiny model and
writes the card."""

import json

import pytest

from toolcall_repro.eval.acebench.aggregate import summarise_seeds
from toolcall_repro.eval.acebench.data import load_category
from toolcall_repro.eval.acebench.runner import run_categories
from toolcall_repro.eval.acebench.simulator import ScriptedUser


def test_oracle_generation_scores_100_percent_end_to_end(data_dir, oracle):
    categories = ["normal_single_turn_parallel_function", "normal_multi_turn_user_adjust", "special_incomplete",
                  "agent_multi_turn"]  # fmt: skip
    generate = oracle(data_dir, categories, limit=4)
    scores, raw, tokens = run_categories(
        data_dir, categories, generate, ScriptedUser(), "python", limit=4, seed=3
    )
    for category in categories[:3]:
        assert scores[category]["fixed"]["accuracy"] == 1.0, scores[category]["fixed"]["entries"]
        assert tokens[category].to_dict()["calls"] == 4
    # upstream's checker fails one of these (whitespace stripped inside a list in an object)
    assert scores["normal_single_turn_parallel_function"]["accuracy"] == 0.75
    assert scores["special_incomplete"]["accuracy"] == 1.0
    agent = scores["agent_multi_turn"]
    assert agent["process_accuracy"] == 1.0 and agent["episode_errors"] == []
    assert agent["accuracy"] == 1.0  # the first four multi-turn tasks replay to their end states
    assert [r["id"] for r in raw["special_incomplete"]] == [f"special_incomplete_{i}" for i in range(4)]
    assert 3 in generate.seeds and len(set(generate.seeds)) > 2  # agent steps get their own seeds


def test_the_runner_logs_entries_done_with_elapsed_and_left(data_dir, oracle, monkeypatch):
    """A progress line per agent episode and per text category here (progress.EVERY_S 0; 30s apart in a
    job): entries done of all categories, elapsed time and an estimate left."""
    import re

    import toolcall_repro.progress as progress

    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    categories = ["special_incomplete", "agent_multi_turn"]
    lines = []
    run_categories(data_dir, categories, oracle(data_dir, categories, limit=2), ScriptedUser(), "python",
                   limit=2, seed=3, log=lines.append)  # fmt: skip
    progress_lines = [m.split(",")[0] for m in lines if m.startswith("acebench generation: ")]
    assert progress_lines == [
        "acebench generation: 2/4 entries (50%) category special_incomplete",
        "acebench generation: 3/4 entries (75%) category agent_multi_turn",
        "acebench generation: 4/4 entries (100%) category agent_multi_turn",
    ]
    assert all(re.search(r", \d+s elapsed, ~\d+s left$", m) for m in lines if m.startswith("acebench")), lines


def ace_config(protocol: str, categories: list[str], limit: int = 1) -> dict:
    return {"acebench": {"source": "local", "categories": categories, "limit": limit, "simulator": "scripted"},
            "protocol": json.loads(protocol), "model": {"tag": "base", "source": "base"}}  # fmt: skip


def test_the_job_runs_a_tiny_model_and_summarises_seeds(data_dir, tiny_model_dir, tmp_path, protocol_json, run_stage):
    out = tmp_path / "seed1.json"
    categories = ["normal_atom_bool", "special_irrelevant", "agent_multi_step", "agent_multi_turn"]
    run_stage(
        "score_acebench", input={"model": str(tiny_model_dir), "data": str(data_dir)},
        output={"score": str(out), "generations": str(tmp_path / "gen1.jsonl"), "manifest": str(tmp_path / "m1.json")},
        config=ace_config(protocol_json(), categories), seeds={"eval": 1}, threads=1, max_agent_messages=4,
    )  # fmt: skip
    doc = json.loads(out.read_text())
    card = doc["card"]
    assert card["benchmark"] == "acebench" and card["seed"] == 1 and card["protocol_id"] == "stronger"
    assert len(card["data_sha256"]) == 64 and card["model"]["sha256"]
    assert card["user_simulator"]["kind"] == "scripted"
    assert card["user_simulator"]["runs"] == "inside the scoring job, offline"  # the paper default too
    assert card["benchmark_version"] == (data_dir.parent.parent / "COMMIT").read_text().split()[0]
    assert set(doc["categories"]) == {
        "normal_atom_bool",
        "special_irrelevant",
        "agent_multi_step",
        "agent_multi_turn",
    }
    for score in doc["categories"].values():
        assert score["total"] == 1 and 0.0 <= score["accuracy"] <= 1.0 and score["tokens"]["calls"] >= 1
    assert set(doc["summary"]) >= {"normal", "special", "agent", "overall", "agent_process", "formula"}
    assert set(doc["summary_fixed"]) == set(doc["summary"])
    assert card["scoring"]["headline"] == "upstream" and set(card["scoring"]["checkers"]) == {
        "upstream",
        "fixed",
    }
    assert set(card["scoring"]["parse_policy"]) >= {
        "think_prefix",
        "code_fence",
        "bare_call",
        "special_phrases",
    }
    for score in doc["categories"].values():
        assert 0.0 <= score["fixed"]["accuracy"] <= 1.0
    lines = [json.loads(x) for x in (tmp_path / "gen1.jsonl").read_text().splitlines()]
    assert [x["category"] for x in lines] == [
        "normal_atom_bool",
        "special_irrelevant",
        "agent_multi_step",
        "agent_multi_turn",
    ]
    # a second seed's file (same run, other seed and score) to summarise
    other = json.loads(out.read_text())
    other["card"]["seed"] = other["card"]["protocol"]["seed"] = 2
    other["summary"]["overall"] = doc["summary"]["overall"] + 0.5
    (tmp_path / "seed2.json").write_text(json.dumps(other))
    summary_path = tmp_path / "summary.json"
    run_stage(
        "summarise_acebench", input={"seeds": [str(out), str(tmp_path / "seed2.json")]},
        output={"summary": str(summary_path), "manifest": str(tmp_path / "m_summary.json")},
        config={"seeds": [1, 2]}, seeds={"eval": [1, 2]},
    )  # fmt: skip
    summary = json.loads(summary_path.read_text())
    assert summary["seeds"] == [1, 2]
    assert summary["metrics"]["overall"]["mean"] == pytest.approx(doc["summary"]["overall"] + 0.25)
    assert summary["metrics"]["fixed/overall"]["mean"] == pytest.approx(doc["summary_fixed"]["overall"])


def test_the_job_scores_through_vllm_as_score_acebench_runs_at_paper_scale(
    data_dir, tiny_model_dir, tmp_path, protocol_json, fake_vllm, run_stage
):
    """Paper scale: the protocol's backend is vllm and the rule passes threads; vLLM 0.24.0's constructor
    (the `fake_vllm` stand-in) has no `threads` keyword."""
    out = tmp_path / "seed0.json"
    run_stage(
        "score_acebench", input={"model": str(tiny_model_dir), "data": str(data_dir)},
        output={"score": str(out), "manifest": str(tmp_path / "m.json")},
        config=ace_config(protocol_json(backend="vllm"), ["normal_atom_bool"]), seeds={"eval": 0}, threads=2,
    )  # fmt: skip
    (llm,) = fake_vllm.LLM.instances
    assert llm.calls and llm.engine_args.model == str(tiny_model_dir)
    assert json.loads(out.read_text())["categories"]["normal_atom_bool"]["total"] == 1


def test_score_acebench_reads_its_knobs_typed_from_the_spec(data_dir, tiny_model_dir, tmp_path, protocol_json, run_stage):
    """score_acebench through the job entry: categories, limit, simulator read typed from the spec's
    evaluate.acebench, the protocol a dict; the same spec twice gives the same bytes."""
    config = ace_config(protocol_json(), ["normal_atom_bool", "special_irrelevant"])
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name / "seed1.json"
        manifest = run_stage(
            "score_acebench", input={"model": str(tiny_model_dir), "data": str(data_dir)},
            output={"score": str(out), "manifest": str(tmp_path / name / "m.json")},
            config=config, seeds={"eval": 1}, threads=1,
        )  # fmt: skip
        outs.append(out.read_bytes())
        assert manifest["config"] == config and manifest["seeds"] == {"eval": 1}
    doc = json.loads(outs[0])
    assert set(doc["categories"]) == {"normal_atom_bool", "special_irrelevant"} and doc["card"]["seed"] == 1
    assert outs[0] == outs[1]


def test_both_checkers_score_every_run_and_differ_on_ground_truth_as_upstream_does(data_dir, oracle):
    # upstream's checker fails 2 of the first 6 ground truths of single_turn_parallel_function; the fixed one none
    category = "normal_single_turn_parallel_function"
    scores, _, _ = run_categories(
        data_dir, [category], oracle(data_dir, [category], 100), None, "python", limit=100
    )
    assert scores[category]["fixed"]["accuracy"] == 1.0
    assert scores[category]["accuracy"] < 1.0


def test_the_job_reports_bad_input_clearly(data_dir, tmp_path, capsys, protocol_json):
    from toolcall_repro.job import run
    from toolcall_repro.stage import hand_job

    def score(data, protocol, categories):
        return run(hand_job("score_acebench", inputs=[f"data={data}", "model=m"], outputs=[f"score={tmp_path / 'x.json'}"],
                            config=json.dumps(ace_config(protocol, categories)), seeds=["eval=0"], options=["threads=1"]))  # fmt: skip

    assert score(tmp_path / "absent", protocol_json(), "all") == 2
    assert "no ACEBench data folder" in capsys.readouterr().err
    assert score(data_dir, protocol_json(), ["normal_atom_float"]) == 2
    assert "unknown ACEBench category" in capsys.readouterr().err
    assert score(data_dir, protocol_json(system_prompt="nope"), "all") == 2
    assert "unknown system prompt" in capsys.readouterr().err


def _doc(seed, overall, model="m"):
    return {
        "card": {"seed": seed, "protocol": {"seed": seed, "template": "native"}, "model": model},
        "categories": {"normal_atom_bool": {"accuracy": overall, "process_accuracy": None}},
        "summary": {
            "normal": overall,
            "special": 0.0,
            "agent": 0.0,
            "overall": overall,
            "agent_process": None,
        },
    }


def test_summarise_seeds_mean_std_and_consistency():
    summary = summarise_seeds([_doc(0, 0.2), _doc(1, 0.4), _doc(2, 0.6)])
    overall = summary["metrics"]["overall"]
    assert overall["mean"] == pytest.approx(0.4) and overall["std"] == pytest.approx(0.2)
    assert (overall["min"], overall["max"]) == (0.2, 0.6)
    assert summary["metrics"]["agent_process"]["mean"] is None
    assert summarise_seeds([_doc(0, 0.5)])["metrics"]["overall"]["std"] is None
    with pytest.raises(ValueError, match="differ in more than the seed"):
        summarise_seeds([_doc(0, 0.2), _doc(1, 0.4, model="other")])
    with pytest.raises(ValueError, match="repeated seeds"):
        summarise_seeds([_doc(0, 0.2), _doc(0, 0.4)])


def test_prompts_beyond_the_context_are_not_generated_but_counted(data_dir, tiny_model_dir, gen):
    from transformers import AutoTokenizer

    from toolcall_repro.eval.acebench.prompts import single_turn_messages
    from toolcall_repro.eval.acebench.runner import TokenCounter, backend_generate_fn, context_budget
    from toolcall_repro.protocol import Protocol

    class Backend:
        prompts: list = []

        def generate(self, prompts, n, *, temperature, top_p, max_tokens, seed):
            self.prompts.extend(prompts)
            return [[gen("[]", prompt_tokens=1)] for _ in prompts]

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    entries = load_category(data_dir, "special_irrelevant", limit=2)
    requests = [(single_turn_messages("special_irrelevant", e), e["function"]) for e in entries]
    requests[1] = ([{"role": "user", "content": "hi"}], [])
    backend = Backend()
    generate = backend_generate_fn(
        backend, tokenizer, Protocol(system_prompt="fmt_python"), max_prompt_tokens=1000
    )
    first, second = generate(requests, 0)
    assert first.finish_reason == "prompt_too_long" and first.text == "" and first.prompt_tokens > 1000
    assert second.text == "[]" and len(backend.prompts) == 1
    counter = TokenCounter()
    counter.add(first)
    counter.add(second)
    assert counter.to_dict()["prompts_too_long"] == 1
    assert context_budget(tiny_model_dir, 6) == 16384 - 6
