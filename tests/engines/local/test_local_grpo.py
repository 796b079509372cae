import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from toolcall_repro.engines.local.grpo import GRPOTrainer, parse_config, train_grpo
from toolcall_repro.engines.local.model import load_policy
from toolcall_repro.engines.local.prompts import build_prompts, load_samples
from toolcall_repro.rewards import Reward
from toolcall_repro.rl import CURVE_KEYS, STEP_KEYS, TRANSITION_KEYS, without_timings


def read_jsonl(path):
    return [json.loads(line) for line in open(path)]


def args_for(files, base, out, cfg, setting="single_turn", resume=False, seed=3):
    """train_grpo's keywords for one run (the job passes the same: engines.train.train_local)."""
    return {"train": str(files[setting]), "heldout": str(files[f"heldout_{setting}"]), "base": str(base),
            "out": str(out), "config": parse_config(cfg), "seed": seed, "threads": 1, "resume": resume}  # fmt: skip


def run(kwargs, log):
    return train_grpo(**kwargs, log=log)


@pytest.mark.parametrize(
    "setting, variant",
    [
        ("single_turn", "vanilla"),
        ("single_turn", "efficient"),
        ("multi_turn", "filter_only"),
        ("multi_turn", "downsample_only"),
    ],
)
def test_each_variant_writes_the_contract_outputs(
    sample_files, base_model, tmp_path, make_config, variants, setting, variant
):
    cfg = make_config(setting=setting, variant=variant, **variants[variant])
    summary = run(args_for(sample_files, base_model, tmp_path, cfg, setting), log=lambda m: None)
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    curve = read_jsonl(tmp_path / "curve.jsonl")
    assert len(metrics) == summary["steps"] >= 2 * (16 // 4) - 4  # 2 epochs of 4 steps, minus skips
    for line in metrics:
        assert set(STEP_KEYS) | set(TRANSITION_KEYS) <= set(line)
        fractions = line["group/all_correct_frac"] + line["group/all_wrong_frac"] + line["group/mixed_frac"]
        assert fractions == pytest.approx(1.0)
        prompts = line["perf/gen_rows"] // 4
        expected = 2 if variants[variant]["downsample"] else 4
        assert line["perf/update_rows"] == prompts * expected
        assert line["perf/update_tokens"] > line["perf/gen_tokens"] > 0
    assert [m["step"] for m in metrics] == list(range(1, len(metrics) + 1))
    assert curve[0]["step"] == 0 and curve[-1]["step"] == summary["steps"]
    assert all(set(CURVE_KEYS) <= set(c) for c in curve)
    assert summary["setting"] == setting and summary["variant"] == variant
    # the update's share of a step on the CPU clock, the clock the analysis reads (runstats.clock)
    cpu = {k: sum(x[f"timing_cpu_s/{k}"] for x in metrics) for k in ("update_actor", "optimizer", "step")}
    assert summary["update_share"] == pytest.approx((cpu["update_actor"] + cpu["optimizer"]) / cpu["step"])
    if variants[variant]["filter"] is None:
        assert all(m["filter/skipped"] == 0 for m in metrics)
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "final")
    tok = AutoTokenizer.from_pretrained(tmp_path / "final")
    assert model.config.model_type == "qwen2" and tok.chat_template


def test_filter_skips_all_correct_prompts_and_probes_them(sample_files, base_model, tmp_path, make_config):
    """With a scripted reward: prompts t0..t5 are always solved, the others half of the time."""
    cfg = parse_config(
        make_config(
            epochs=4,
            checkpoint_every=100,
            heldout_size=0,
            filter={"k": 1, "probe_every": 2, "probe_fraction": 0.0, "semantics": "temporary"},
        )
    )
    model, tok = load_policy(base_model)
    train, _ = build_prompts(load_samples([sample_files["single_turn"]]), tok, 2048)
    easy = {r.ground_truth for r in train[:6]}
    calls = {"n": 0}

    def scripted(output, ground_truth):
        calls["n"] += 1
        return Reward(1.0 if ground_truth in easy or calls["n"] % 2 else 0.0, "correct")

    easy_ids = {r.id for r in train if r.ground_truth in easy}
    trainer = GRPOTrainer(cfg, model, tok, train, [], scripted, seed=0, out_dir=tmp_path)
    trainer.fit(log=lambda m: None)
    by_epoch = {}
    for m in trainer.state.metrics:
        by_epoch.setdefault(m["epoch"], []).append(m)
    assert by_epoch[0][0]["filter/skipped"] == 0
    assert by_epoch[1][0]["filter/skipped"] == len(easy_ids) > 0
    assert by_epoch[1][0]["reward/full_mean"] > by_epoch[1][0]["reward/active_mean"] or len(easy_ids) == 16
    assert sum(m["perf/gen_rows"] for m in by_epoch[1]) == (16 - len(easy_ids)) * 4
    # skipped in epochs 1 and 2, probed in epoch 3, still correct, so precision is 1
    assert by_epoch[3][-1]["filter/probed"] == len(easy_ids)
    assert by_epoch[3][-1]["filter/probe_still_correct"] == len(easy_ids)
    assert by_epoch[3][-1]["filter/precision"] == 1.0
    assert by_epoch[1][-1]["transition/all_correct_to_all_correct"] == 0  # skipped prompts are not observed


def _cli(files, base, out, cfg):
    """The train_grpo job by hand (`toolcall-repro stage`), local engine: it resumes its own checkpoints."""
    return [sys.executable, "-m", "toolcall_repro.cli", "stage", "train_grpo",
            "--in", f"train={files['single_turn']}", "--in", f"heldout={files['heldout_single_turn']}",
            "--in", f"base={base}", "--out", f"summary={out / 'summary.json'}", "--config", json.dumps(cfg),
            "--seed", "train=3", "--option", "engine=local", "--option", "threads=1"]  # fmt: skip


@pytest.mark.slow  # three training jobs in fresh processes, one killed with SIGKILL mid-run: ~13 s
def test_kill_9_then_resume_gives_identical_metrics(
    sample_files, base_model, tmp_path, make_config, variants
):
    cfg = make_config(epochs=3, checkpoint_every=2, **variants["efficient"])
    straight = tmp_path / "straight"
    run(args_for(sample_files, base_model, straight, cfg), log=lambda m: None)

    killed = tmp_path / "killed"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        _cli(sample_files, base_model, killed, cfg),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 120
    while not (killed / "checkpoints" / "step_2" / "state.json").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "summary.json").exists() and not (killed / "metrics.jsonl").exists()

    done = subprocess.run(
        _cli(sample_files, base_model, killed, cfg), env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["resumed_from"] and summary["resumed_from"][0] >= 2
    a = [without_timings(m) for m in read_jsonl(straight / "metrics.jsonl")]
    b = [without_timings(m) for m in read_jsonl(killed / "metrics.jsonl")]
    assert a == b
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
    assert strip(read_jsonl(straight / "curve.jsonl")) == strip(read_jsonl(killed / "curve.jsonl"))


def test_resume_never_continues_another_runs_checkpoints(sample_files, base_model, tmp_path, make_config):
    cfg = make_config(epochs=1, checkpoint_every=2)
    other = make_config(epochs=1, checkpoint_every=2, lr=0.5)
    fresh = run(args_for(sample_files, base_model, tmp_path / "fresh", other), log=lambda m: None)
    run(args_for(sample_files, base_model, tmp_path, cfg), log=lambda m: None)
    logs = []
    changed = run(args_for(sample_files, base_model, tmp_path, other, resume=True), log=logs.append)
    assert any("discarding checkpoints" in m and "another run" in m for m in logs)
    assert changed["resumed_from"] == [] and changed["heldout_accuracy"] == fresh["heldout_accuracy"]
    run(args_for(sample_files, base_model, tmp_path, cfg), log=lambda m: None)
    # a completed run resumed again changes nothing
    before = (tmp_path / "metrics.jsonl").read_text()
    run(args_for(sample_files, base_model, tmp_path, cfg, resume=True), log=lambda m: None)
    assert [without_timings(m) for m in map(json.loads, before.splitlines())] == [
        without_timings(m) for m in read_jsonl(tmp_path / "metrics.jsonl")
    ]


def test_overlong_prompts_are_dropped_and_counted(sample_files, base_model, tmp_path, make_config):
    model, tok = load_policy(base_model)
    both = load_samples([sample_files["single_turn"], sample_files["multi_turn"]])
    records, dropped = build_prompts(both, tok, None)
    assert dropped == {} and len(records) == 32
    limit = max(r.num_tokens for r in records if r.setting == "single_turn")
    kept, dropped = build_prompts(both, tok, limit)
    assert {r.setting for r in kept} == {"single_turn"} and dropped == {"overlong_prompt": 16}
    with pytest.raises(ValueError, match="no training prompt fits"):
        run(
            args_for(sample_files, base_model, tmp_path, make_config(max_prompt_tokens=5)), log=lambda m: None
        )


def _heldout_records(files, base, setting="single_turn"):
    model, tok = load_policy(str(base))
    records, _ = build_prompts(load_samples([files[f"heldout_{setting}"]]), tok, 2048)
    return model, tok, records


def test_sampled_heldout_scores_are_fractions_of_the_samples_and_repeat_exactly(
    sample_files, base_model, make_config
):
    from toolcall_repro.engines.local.grpo import heldout_sampled_scores
    from toolcall_repro.rewards import reward_for_setting

    model, tok, records = _heldout_records(sample_files, base_model)
    reward = reward_for_setting("single_turn")
    cfg = parse_config(make_config(heldout_samples=4))
    first = heldout_sampled_scores(model, tok, records, reward, cfg)
    assert len(first) == len(records) == 6
    assert all(s * 4 == int(s * 4) and 0 <= s <= 1 for s in first)
    # common random numbers: the draw for a prompt depends on its position only, so the same weights
    # give the same scores, and a prefix of the held-out set scores as it does inside the whole set
    assert heldout_sampled_scores(model, tok, records, reward, cfg) == first
    assert heldout_sampled_scores(model, tok, records[:3], reward, cfg) == first[:3]
    assert heldout_sampled_scores(model, tok, records, reward, parse_config(make_config())) is None


def test_sampled_heldout_scores_count_the_reward_of_every_sample(sample_files, base_model, make_config):
    from toolcall_repro.engines.local.grpo import heldout_sampled_scores

    model, tok, records = _heldout_records(sample_files, base_model)
    seen = []

    def reward(text, truth):
        seen.append(text)
        return Reward(score=float(len(seen) % 2), reason="correct" if len(seen) % 2 else "wrong_args")

    scores = heldout_sampled_scores(model, tok, records, reward, parse_config(make_config(heldout_samples=4)))
    assert len(seen) == 4 * len(records)
    assert scores == [0.5] * len(records)  # two of each prompt's four samples score 1


def test_curve_and_summary_carry_sampled_heldout_outcomes(sample_files, base_model, tmp_path, make_config):
    cfg = make_config(heldout_samples=2, epochs=1)
    summary = run(args_for(sample_files, base_model, tmp_path, cfg), log=lambda m: None)
    curve = read_jsonl(tmp_path / "curve.jsonl")
    for c in curve:
        assert len(c["heldout_sampled_outcomes"]) == len(c["heldout_outcomes"]) == 4
        assert c["heldout_sampled_accuracy"] == pytest.approx(sum(c["heldout_sampled_outcomes"]) / 4)
    assert summary["heldout_sampled_accuracy"]["samples"] == 2
    assert summary["heldout_sampled_accuracy"]["initial"] == curve[0]["heldout_sampled_accuracy"]
    assert summary["heldout_sampled_accuracy"]["final"] == curve[-1]["heldout_sampled_accuracy"]


@pytest.mark.slow  # two GRPO runs (2 and 4 epochs) a variant, compared byte for byte: ~5 s each variant
@pytest.mark.parametrize("variant", ["vanilla", "efficient"])
def test_a_longer_run_begins_with_the_shorter_one(
    sample_files, base_model, tmp_path, make_config, variants, variant
):
    """More passes extend a run without changing its start: the learning rate is constant, each epoch's
    shuffle is seeded by (seed, epoch) and the filter's state by the seed, none by the epoch count. So the
    efficiency evidence's longer efficient runs contain its shorter ones (docs/efficiency.md), checked here by
    bytes: the same step metrics, held-out outcomes and weights up to the shorter run's end."""
    cfg = {**variants[variant], "checkpoint_every": 2, "keep_checkpoints": 10}
    short, long = tmp_path / "short", tmp_path / "long"
    for out, epochs in ((short, 2), (long, 4)):
        run(
            args_for(sample_files, base_model, out, make_config(epochs=epochs, **cfg), "multi_turn"),
            log=print,
        )
    a = [without_timings(m) for m in read_jsonl(short / "metrics.jsonl")]
    b = [without_timings(m) for m in read_jsonl(long / "metrics.jsonl")]
    assert len(b) > len(a) >= 4 and b[: len(a)] == a
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
    ca, cb = strip(read_jsonl(short / "curve.jsonl")), strip(read_jsonl(long / "curve.jsonl"))
    assert len(cb) > len(ca) and cb[: len(ca)] == ca
    _same_weights(short, long, a[-1]["step"])


def test_a_longer_run_keeps_the_filter_state_of_the_shorter_one(
    sample_files, base_model, tmp_path, make_config
):
    """The same with a filter that acts (a scripted reward: t0..t5 always solved): the longer run skips and
    probes in the passes the shorter one lacks, and its first passes are the shorter run byte for byte."""
    filt = {"k": 1, "probe_every": 2, "probe_fraction": 0.0, "semantics": "temporary"}
    down = {"m": 2, "selection": "max_variance", "advantage_scope": "subset"}
    runs = {}
    for epochs in (2, 4):
        cfg = parse_config(
            make_config(
                epochs=epochs,
                checkpoint_every=2,
                keep_checkpoints=10,
                heldout_size=0,
                filter=filt,
                downsample=down,
            )
        )
        model, tok = load_policy(base_model)
        train, _ = build_prompts(load_samples([sample_files["single_turn"]]), tok, 2048)
        easy = {r.ground_truth for r in train[:6]}
        calls = {"n": 0}

        def scripted(output, ground_truth, easy=easy, calls=calls):
            calls["n"] += 1
            return Reward(1.0 if ground_truth in easy or calls["n"] % 3 else 0.0, "correct")

        trainer = GRPOTrainer(cfg, model, tok, train, [], scripted, seed=0, out_dir=tmp_path / str(epochs))
        trainer.fit(log=lambda m: None)
        runs[epochs] = [without_timings(m) for m in trainer.state.metrics]
    a, b = runs[2], runs[4]
    assert b[: len(a)] == a and len(b) > len(a)
    assert sum(m["filter/skipped"] for m in b[len(a) :]) > 0 and b[-1]["filter/probed"] > 0
    _same_weights(tmp_path / "2", tmp_path / "4", a[-1]["step"])


def _same_weights(short, long, step):
    """The checkpoint at `step` of two runs holds the same tensors, bit for bit."""
    x = torch.load(short / "checkpoints" / f"step_{step}" / "model.pt", weights_only=True)
    y = torch.load(long / "checkpoints" / f"step_{step}" / "model.pt", weights_only=True)
    assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
