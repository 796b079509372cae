"""The data stage's command lines end to end on synthetic twins, with the real transformers backend on
the shared tiny random Qwen2 model (`tiny_model_dir`, no Hub): synthesize -> normalise -> filter ->
subsets -> report."""

from __future__ import annotations

import json

from toolcall_repro.data import filter_cli, normalise, report, synthetic
from toolcall_repro.data.schema import read_samples

ROWS = {"xlam": 6, "toolace": 3, "looptool": 10}


def normalised(d) -> dict:
    norm = {}
    for source, rows in ROWS.items():
        raw = d / "raw" / f"{source}.jsonl"
        synthetic.main(
            [
                "--source",
                source,
                "--config",
                json.dumps({"rows": rows, "malformed": 2}),
                "--seed",
                "0",
                "--out",
                str(raw),
            ]
        )
        norm[source] = d / "normalised" / f"{source}.parquet"
        normalise.main(
            ["--source", source, "--raw", str(raw), "--out", str(norm[source])]
            + ["--rejects", str(d / f"{source}.rejects.jsonl"), "--report", str(d / f"{source}.report.json")]
        )
    return norm


def filtered(d, norm, model_dir, seed: int) -> None:
    common = ["--policy", model_dir, "--backend", "transformers", "--seed", str(seed), "--threads", "1"]
    single_cfg = {"rollouts": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 4, "target_size": 8}
    single_cfg |= {"heldout_fraction": 0.2, "max_prompt_tokens": 4000, "batch_size": 4}
    filter_cli.main(
        [
            "single-turn",
            "--inputs",
            str(norm["xlam"]),
            str(norm["toolace"]),
            "--config",
            json.dumps(single_cfg),
        ]
        + common
        + ["--out-train", str(d / "single.parquet"), "--out-heldout", str(d / "held_single.parquet")]
        + ["--report", str(d / "single_turn.json")]
    )
    multi_cfg = {"min_turns": 2, "max_turns": 6, "rollouts": 2, "min_correct": 1, "drop_parallel": True}
    multi_cfg |= {
        "temperature": 1.0,
        "top_p": 1.0,
        "max_new_tokens": 4,
        "target_size": 8,
        "heldout_fraction": 0.2,
    }
    filter_cli.main(
        ["multi-turn", "--inputs", str(norm["looptool"]), "--config", json.dumps(multi_cfg)]
        + common
        + ["--out-train", str(d / "multi.parquet"), "--out-heldout", str(d / "held_multi.parquet")]
        + ["--report", str(d / "multi_turn.json")]
    )
    filter_cli.main(
        ["format-subsets", "--single", str(d / "single.parquet"), "--multi", str(d / "multi.parquet")]
        + ["--config", '{"size": 4}', "--seed", str(seed), "--out-single", str(d / "fs.parquet")]
        + ["--out-multi", str(d / "fm.parquet"), "--report", str(d / "format_study.json")]
    )


def test_stage_end_to_end_with_the_real_backend_is_reproducible(tmp_path, tiny_model_dir):
    model_dir = str(tiny_model_dir)
    d = tmp_path / "a"
    norm = normalised(d)
    filtered(d, norm, model_dir, seed=0)
    report.main(
        ["--steps", str(d / "single_turn.json"), str(d / "multi_turn.json"), str(d / "format_study.json")]
        + ["--normalise", *[str(d / f"{s}.report.json") for s in ROWS]]
        + ["--rejects", *[str(d / f"{s}.rejects.jsonl") for s in ROWS]]
        + ["--out-json", str(d / "filter_report.json"), "--out-md", str(d / "filter_report.md")]
    )
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
        filter_cli.main(
            ["single-turn", "--inputs", str(norm["xlam"]), str(norm["toolace"]), "--config", json.dumps(cfg)]
            + ["--policy", str(tiny_model_dir), "--backend", "transformers", "--seed", "5", "--threads", "1"]
            + ["--out-train", str(d / "train.parquet"), "--out-heldout", str(d / "heldout.parquet")]
            + ["--report", str(d / "single_turn.json")]
        )  # fmt: skip
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
