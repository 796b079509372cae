"""The data stage's jobs end to end (by hand, as `toolcall-repro stage` runs them) on synthetic twins, with the real transformers backend on
the shared tiny random Qwen2 model (`tiny_model_dir`, no Hub): synthesize -> normalise -> filter ->
subsets -> report."""

from __future__ import annotations

import json

from toolcall_repro.data.schema import read_samples
from toolcall_repro.job import run
from toolcall_repro.stage import hand_job


def stage(name, ins=(), outs=(), config=None, seeds=(), options=()):
    """One stage as a rule runs it (the job entry's function), NAME=VALUE lists as the stage CLI takes."""
    spec = json.dumps(config) if config is not None else None
    assert run(hand_job(name, inputs=list(ins), outputs=list(outs), config=spec, seeds=list(seeds),
                        options=list(options))) == 0  # fmt: skip

ROWS = {"xlam": 6, "toolace": 3, "looptool": 10}


def normalised(d) -> dict:
    norm = {}
    for source, rows in ROWS.items():
        raw = d / "raw" / f"{source}.jsonl"
        stage("synthesize_source", outs=[f"raw={raw}"], config={"rows": rows, "malformed": 2},
              seeds=["data=0"], options=[f"source={source}"])  # fmt: skip
        norm[source] = d / "normalised" / f"{source}.parquet"
        stage("normalise_source", ins=[f"raw={raw}"], config={"source": source},
              outs=[f"samples={norm[source]}", f"rejects={d / f'{source}.rejects.jsonl'}",
                    f"report={d / f'{source}.report.json'}"])  # fmt: skip
    return norm


def filtered(d, norm, model_dir, seed: int) -> None:
    policy = {"ins": [f"policy={model_dir}"], "seeds": [f"filter={seed}"], "options": ["backend=transformers", "threads=1"]}
    single_cfg = {"rollouts": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 4, "target_size": 8}
    single_cfg |= {"heldout_fraction": 0.2, "max_prompt_tokens": 4000, "batch_size": 4}
    stage("filter_single_turn", ins=[f"samples={norm['xlam']}", f"samples={norm['toolace']}", *policy["ins"]],
          outs=[f"train={d / 'single.parquet'}", f"heldout={d / 'held_single.parquet'}",
                f"report={d / 'single_turn.json'}"],
          config=single_cfg, seeds=policy["seeds"], options=policy["options"])  # fmt: skip
    multi_cfg = {"min_turns": 2, "max_turns": 6, "rollouts": 2, "min_correct": 1, "drop_parallel": True}
    multi_cfg |= {
        "temperature": 1.0,
        "top_p": 1.0,
        "max_new_tokens": 4,
        "target_size": 8,
        "heldout_fraction": 0.2,
    }
    stage("filter_multi_turn", ins=[f"samples={norm['looptool']}", *policy["ins"]],
          outs=[f"train={d / 'multi.parquet'}", f"heldout={d / 'held_multi.parquet'}",
                f"report={d / 'multi_turn.json'}"],
          config=multi_cfg, seeds=policy["seeds"], options=policy["options"])  # fmt: skip
    stage("subset_format_study", ins=[f"single={d / 'single.parquet'}", f"multi={d / 'multi.parquet'}"],
          outs=[f"single={d / 'fs.parquet'}", f"multi={d / 'fm.parquet'}", f"report={d / 'format_study.json'}"],
          config={"size": 4}, seeds=[f"filter={seed}"])  # fmt: skip


def test_stage_end_to_end_with_the_real_backend_is_reproducible(tmp_path, tiny_model_dir):
    model_dir = str(tiny_model_dir)
    d = tmp_path / "a"
    norm = normalised(d)
    filtered(d, norm, model_dir, seed=0)
    stage("report_filter",
          ins=[f"steps={d / n}" for n in ("single_turn.json", "multi_turn.json", "format_study.json")]
          + [f"normalise={d / f'{s}.report.json'}" for s in ROWS] + [f"rejects={d / f'{s}.rejects.jsonl'}" for s in ROWS],
          outs=[f"json={d / 'filter_report.json'}", f"md={d / 'filter_report.md'}"])  # fmt: skip
    merged = json.loads((d / "filter_report.json").read_text())

    assert merged["malformed_rows"]["total"] == 6
    single, multi = merged["chains"]["single_turn"], merged["chains"]["multi_turn"]
    for chain in (single, multi):
        for step in chain["steps"]:
            assert step["out"] == step["in"] - sum(step["dropped"].values())
        assert chain["outputs"]["train"]["samples"] == len(read_samples(chain["outputs"]["train"]["path"]))
        assert (
            chain["protocol"]["system_prompt"]["id"] == "stronger"
            and chain["protocol"]["template"] == "native"
        )
    # every rollout was generated and scored: the correct-per-sample histogram covers every scored sample
    assert sum(single["rollouts"]["correct_per_sample"].values()) == single["rollouts"]["samples"] > 0
    assert sum(multi["rollouts"]["correct_per_sample"].values()) == multi["rollouts"]["samples"] > 0
    assert multi["turn_counting"]["definitions"]["user_requests"]["in_range"] > 0
    assert {s["step"] for s in multi["steps"]} >= {"turn_range", "single_call_answer", "rollouts_min_correct"}
    assert (d / "filter_report.md").read_text().count("| rollouts_") == 2

    second = tmp_path / "b"
    filtered(second, norm, model_dir, seed=0)
    for name in (
        "single.parquet",
        "held_single.parquet",
        "multi.parquet",
        "held_multi.parquet",
        "fs.parquet",
        "fm.parquet",
    ):
        assert (d / name).read_bytes() == (second / name).read_bytes(), name
    again = json.loads((second / "multi_turn.json").read_text())
    assert again["drops"] == json.loads((d / "multi_turn.json").read_text())["drops"]


def test_a_killed_filter_job_resumes_after_its_last_complete_chunk(tmp_path, tiny_model_dir, monkeypatch):
    """The single-turn filter on the real transformers backend, killed in its second generate() call: the
    retry (same command) regenerates only from that chunk on and writes the uninterrupted run's bytes."""
    from toolcall_repro.data import rollouts
    from toolcall_repro.provenance import sha256_file

    cfg = {"rollouts": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 4, "target_size": 8}
    cfg |= {"heldout_fraction": 0.2, "max_prompt_tokens": 4000, "batch_size": 2}
    norm = normalised(tmp_path / "data")

    def run(d):
        d.mkdir(parents=True, exist_ok=True)
        stage("filter_single_turn",
              ins=[f"samples={norm['xlam']}", f"samples={norm['toolace']}", f"policy={tiny_model_dir}"],
              outs=[f"train={d / 'train.parquet'}", f"heldout={d / 'heldout.parquet'}",
                    f"report={d / 'single_turn.json'}"],
              config=cfg, seeds=["filter=5"], options=["backend=transformers", "threads=1"])  # fmt: skip
        report = json.loads((d / "single_turn.json").read_text().replace(str(d), "<out>"))
        report.pop("rollout_seconds")  # a clock
        return {"train": sha256_file(d / "train.parquet"), "heldout": sha256_file(d / "heldout.parquet"),
                "report": report}  # fmt: skip

    real_load, calls = rollouts.load_policy, []

    def counted(kind, model_dir, threads, kill_at=None):
        backend, tokenizer = real_load(kind, model_dir, threads)
        generate = backend.generate

        def wrapped(prompts, n, **kw):
            if len(calls) == kill_at:
                raise KeyboardInterrupt("killed")
            calls.append([*prompts])
            return generate(prompts, n, **kw)

        monkeypatch.setattr(backend, "generate", wrapped)
        return backend, tokenizer

    monkeypatch.setattr(rollouts, "load_policy", counted)
    expected = run(tmp_path / "whole")
    whole = list(calls)
    assert len(whole) >= 3 and not (tmp_path / "whole" / "single_turn.chunks").exists()

    calls.clear()
    monkeypatch.setattr(rollouts, "load_policy", lambda *a: counted(*a, kill_at=1))
    try:
        run(tmp_path / "retried")
    except KeyboardInterrupt:
        pass
    assert len(list((tmp_path / "retried" / "single_turn.chunks").iterdir())) == 1
    calls.clear()
    monkeypatch.setattr(rollouts, "load_policy", counted)
    assert run(tmp_path / "retried") == expected  # train and held-out bytes, the report but its clock
    assert calls == whole[1:]  # chunk 0 was read back, not generated
    assert not (tmp_path / "retried" / "single_turn.chunks").exists()
