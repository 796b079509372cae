"""The held-out reserve benchmark: reserved, untrained conversations; scored with the training reward."""

import json
import re
from dataclasses import dataclass

import pytest

from toolcall_repro.data.schema import Sample, write_samples
from toolcall_repro.data.split import is_reserved
from toolcall_repro.eval.heldout import score_outputs, select_prompts
from toolcall_repro.toolcall import format_tool_calls

TOOLS = [
    {"name": "get_weather", "description": "weather", "parameters": {"type": "object", "properties": {}}}
]


def sample(i: int, setting: str = "single_turn") -> Sample:
    messages = [{"role": "user", "content": f"weather in city {i}?"}]
    if setting == "multi_turn":
        messages += [{"role": "assistant", "content": "which day?"}, {"role": "user", "content": "today"}]
    truth = [{"name": "get_weather", "arguments": {"city": f"c{i}"}}]
    return Sample.build(id=f"s:{setting}:{i}", source="xlam", setting=setting, tools=TOOLS, messages=messages,
                        ground_truth=truth)  # fmt: skip


@dataclass
class Gen:
    text: str
    prompt_tokens: int = 7


def test_selection_takes_only_reserved_untrained_conversations_in_a_stable_order():
    pool = [sample(i, s) for i in range(60) for s in ("single_turn", "multi_turn")]
    reserved = [s for s in pool if is_reserved(s, 0.3, 5)]
    trained = reserved[:4]
    chosen = select_prompts(pool, trained, 0.3, 5, per_setting=100)
    picked = [s for v in chosen.values() for s in v]
    assert picked and all(is_reserved(s, 0.3, 5) for s in picked)
    assert not {s.id for s in trained} & {s.id for s in picked}
    assert {s.setting for s in chosen["multi_turn"]} == {"multi_turn"}
    small = select_prompts(pool, trained, 0.3, 5, per_setting=3)
    assert [s.id for s in small["single_turn"]] == [s.id for s in chosen["single_turn"][:3]]
    with pytest.raises(ValueError, match="no reserved"):
        select_prompts(pool[:1], [], 0.3, 5, per_setting=3)


def test_scores_are_the_training_reward_in_the_protocols_format():
    prompts = {"single_turn": [sample(1), sample(2)], "multi_turn": [sample(3, "multi_turn")]}
    right = [format_tool_calls(s.ground_truth_list, "python") for s in prompts["single_turn"]]
    outputs = {"single_turn": [Gen(right[0]), Gen("[get_weather(city='x')]")], "multi_turn": [Gen(right[0])]}
    doc = score_outputs(prompts, outputs, "python")
    assert doc["summary"]["single_turn"] == 0.5 and doc["summary"]["multi_turn"] == 0.0
    assert doc["summary"]["avg"] == 0.25 and doc["summary"]["mean_input_tokens"] == 7
    assert [e["reason"] for e in doc["categories"]["single_turn"]["entries"]] == ["correct", "wrong_args"]
    # the same right answer in the other format is a parse failure, not a pass
    xml = score_outputs(prompts, outputs, "xml_json")
    assert xml["summary"]["single_turn"] == 0.0


def heldout(run_stage, tmp_path, model, protocol, per_setting, seeds, variance, reserve_seed=0, threads=1):
    """score_heldout through the job entry over tmp_path/pool.parquet, into tmp_path/out."""
    config = {"heldout": {"per_setting": per_setting}, "reserve": {"fraction": 0.5, "seed": reserve_seed},
              "protocol": protocol, "seeds": {"eval": seeds, "variance": variance}, "model": {"tag": "base"}}  # fmt: skip
    output = {name: str(tmp_path / "out" / f"{name}.json") for name in ("seeds", "summary", "variance")}
    return run_stage(
        "score_heldout", input={"model": str(model), "samples": [str(tmp_path / "pool.parquet")], "exclude": []},
        output={**output, "manifest": str(tmp_path / "manifest.json")}, config=config, seeds={"eval": config["seeds"]},
        threads=threads,
    )  # fmt: skip


def test_the_job_scores_a_tiny_model_with_a_card(tmp_path, tiny_model_dir, run_stage, capsys):
    pool = [sample(i, s) for i in range(40) for s in ("single_turn", "multi_turn")]
    write_samples(pool, tmp_path / "pool.parquet")
    protocol = {"id": "stronger", "system_prompt": "stronger", "template": "context", "thinking": "drop",
                "temperature": 0.7, "top_p": 1.0, "max_tokens": 8, "backend": "transformers"}  # fmt: skip
    heldout(run_stage, tmp_path, tiny_model_dir, protocol, per_setting=3, seeds=[1, 2], variance=[1, 2, 3])
    # the log: a progress line per (seed, setting) with prompts done, elapsed time and an estimate left
    lines = [m for m in capsys.readouterr().out.splitlines() if m.startswith("held-out generation: ")]
    assert [m.split(",")[0] for m in lines[:2]] == [
        "held-out generation: 3/18 prompts (16%) seed 1 setting single_turn",
        "held-out generation: 6/18 prompts (33%) seed 1 setting multi_turn",
    ]
    assert len(lines) == 6 and lines[-1].startswith("held-out generation: 18/18 prompts (100%) seed 3 ")
    assert all(re.search(r", \d+s elapsed, ~\d+s left$", m) for m in lines), lines
    docs = json.loads((tmp_path / "out" / "seeds.json").read_text())
    assert [d["card"]["seed"] for d in docs] == [1, 2, 3]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    variance = json.loads((tmp_path / "out" / "variance.json").read_text())
    assert summary["seeds"] == [1, 2] and variance["seeds"] == [1, 2, 3]
    assert set(summary["metrics"]) >= {"single_turn", "multi_turn", "avg", "mean_input_tokens"}
    doc = docs[0]
    assert doc["card"]["benchmark"] == "heldout-reserve" and doc["card"]["seed"] == 1
    assert doc["card"]["protocol_id"] == "stronger" and doc["card"]["template"] == "context"
    assert len(doc["card"]["prompts"]["ids"]["multi_turn"]) == 3
    assert set(doc["summary"]) == {"single_turn", "multi_turn", "avg", "mean_input_tokens"}


def test_the_job_reads_its_spec_typed_and_records_it(tmp_path, tiny_model_dir, run_stage):
    """score_heldout through the job entry: config (reserve, per_setting, protocol, seeds) read typed from
    the spec, the manifest the spec's config and seeds."""
    pool = [sample(i, s) for i in range(40) for s in ("single_turn", "multi_turn")]
    write_samples(pool, tmp_path / "pool.parquet")
    write_samples(pool[:10], tmp_path / "train.parquet")
    protocol = {"id": "default", "system_prompt": "bfcl_default", "template": "native", "thinking": "drop",
                "temperature": 0.7, "top_p": 1.0, "max_tokens": 8, "seed": 0, "backend": "transformers"}  # fmt: skip
    config = {
        "heldout": {"per_setting": 2},
        "reserve": {"fraction": 0.5, "seed": 3},
        "protocol": protocol,
        "seeds": {"eval": [0, 1], "variance": [0, 1, 2]},
        "model": {"tag": "base", "source": "base"},
    }
    out = tmp_path / "job"
    output = {name: str(out / f"{name}.json") for name in ("seeds", "summary", "variance")}
    manifest = run_stage(
        "score_heldout",
        input={"model": str(tiny_model_dir), "samples": [str(tmp_path / "pool.parquet")],
               "exclude": [str(tmp_path / "train.parquet")]},
        output={**output, "manifest": str(tmp_path / "manifests" / "score_heldout" / "base-default.json")},
        config=config, seeds={"eval": config["seeds"]}, threads=1,
    )  # fmt: skip
    docs = json.loads((out / "seeds.json").read_text())
    assert [d["card"]["seed"] for d in docs] == [0, 1, 2] and docs[0]["card"]["protocol_id"] == "default"
    assert json.loads((out / "variance.json").read_text())["seeds"] == [0, 1, 2]
    assert manifest["rule"] == "score_heldout" and manifest["config"] == config
    assert manifest["seeds"] == {"eval": {"eval": [0, 1], "variance": [0, 1, 2]}}
    assert {str(tmp_path / "pool.parquet"), str(tmp_path / "train.parquet")} <= set(manifest["inputs"])
    assert any(p.startswith(str(tiny_model_dir)) for p in manifest["inputs"])  # the model's files


def test_the_job_scores_through_vllm_as_score_heldout_runs_at_paper_scale(
    tmp_path, tiny_model_dir, fake_vllm, run_stage
):
    """Paper scale: the protocol's backend is vllm and the rule passes threads; vLLM 0.24.0's constructor
    (the `fake_vllm` stand-in) has no `threads` keyword."""
    pool = [sample(i, s) for i in range(40) for s in ("single_turn", "multi_turn")]
    write_samples(pool, tmp_path / "pool.parquet")
    protocol = {"id": "stronger", "system_prompt": "stronger", "template": "native", "thinking": "drop",
                "temperature": 0.7, "top_p": 1.0, "max_tokens": 8, "backend": "vllm"}  # fmt: skip
    heldout(run_stage, tmp_path, tiny_model_dir, protocol, per_setting=2, seeds=[1], variance=[1], threads=2)
    (llm,) = fake_vllm.LLM.instances
    assert llm.calls and llm.engine_args.model == str(tiny_model_dir)
    doc = json.loads((tmp_path / "out" / "seeds.json").read_text())[0]
    assert doc["categories"]["single_turn"]["total"] == 2
