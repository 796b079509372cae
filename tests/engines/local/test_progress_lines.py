"""The local engine's long loops log progress a person can read: steps done of the total, elapsed time
and an estimate of what is left (warm start steps, GRPO steps, held-out evaluation at checkpoints)."""

import re

import pytest

import toolcall_repro.progress as progress
from toolcall_repro.engines.local.grpo import parse_config, train_grpo
from toolcall_repro.engines.local.prompts import load_samples
from toolcall_repro.engines.local.warmstart import warm_start

ESTIMATE = r", (\d+m)?\d+s elapsed, ~(\d+m)?\d+s left$"


def matching(pattern, lines):
    return [m for m in lines if re.search(pattern, m)]


def test_the_warm_start_logs_its_first_step_every_50_and_its_last_with_an_estimate(sample_files, tiny_config):
    samples = load_samples([sample_files["single_turn"]])
    lines = []
    warm_start(samples, dict(tiny_config, sft_steps=3), seed=0, log=lines.append)
    assert lines[0].startswith("warm start: tokenizer (") and lines[0].endswith("; 3 steps, batch 8")
    steps = matching(r"^warm start: \d/3 steps", lines)
    assert [s.split()[2] for s in steps] == ["1/3", "3/3"]
    assert re.match(r"warm start: 1/3 steps \(33%\) loss \d+\.\d{4}" + ESTIMATE, steps[0]), steps[0]
    assert steps[1].endswith(" left") and "(100%)" in steps[1] and steps[1].endswith("~0s left")


def _train(files, base, out, cfg, log):
    return train_grpo(
        train=str(files["single_turn"]), heldout=str(files["heldout_single_turn"]), base=str(base), out=str(out),
        config=parse_config(cfg), seed=3, threads=1, log=log,
    )  # fmt: skip


def test_grpo_steps_carry_the_total_elapsed_and_left_and_evaluations_their_time(
    sample_files, base_model, tmp_path, make_config, monkeypatch
):
    monkeypatch.setattr(progress, "EVERY_S", 0.0)  # every held-out batch logs (a slow evaluation would)
    lines = []
    cfg = make_config(
        setting="single_turn", variant="vanilla", epochs=1, checkpoint_every=2, heldout_samples=2
    )
    _train(sample_files, base_model, tmp_path / "vanilla", cfg, lines.append)
    # one line per step, as before, now with the steps left and the time they take (16 prompts, batch 4)
    steps = matching(r"^step \d+/", lines)
    assert [s.split()[1] for s in steps] == ["1/4", "2/4", "3/4", "4/4"]
    assert re.match(r"step 1/4 \(25%\) epoch 0 reward \d\.\d{3} .* update \d+\.\d\ds" + ESTIMATE, steps[0]), (
        steps[0]
    )
    assert steps[-1].endswith("~0s left")
    assert len(matching(r"^step 0 heldout_accuracy \S+ \(held-out eval \d+s\)$", lines)) == 1
    assert len(matching(r"^checkpoint step [24] heldout_accuracy \S+ \(held-out eval \d+s\)$", lines)) == 2
    # the held-out evaluation (greedy, then sampled) reports its own progress while it runs
    assert matching(r"^held-out greedy: 4/4 prompts \(100%\)" + ESTIMATE, lines)
    assert matching(r"^held-out sampled: 1/4 prompts \(25%\)" + ESTIMATE, lines)


@pytest.mark.parametrize("max_steps", [None, 3])
def test_a_filtered_runs_total_is_an_estimate_unless_max_steps_bounds_it(
    sample_files, base_model, tmp_path, make_config, variants, max_steps
):
    lines = []
    cfg = make_config(
        setting="single_turn", variant="efficient", epochs=1, max_steps=max_steps, **variants["efficient"]
    )
    _train(sample_files, base_model, tmp_path, cfg, lines.append)
    steps = matching(r"^step \d+/", lines)
    assert steps and all(re.search(ESTIMATE, s) for s in steps)
    total = "~4" if max_steps is None else "3"  # one epoch of 16 prompts, batch 4 (the filter may shorten it)
    assert steps[0].split()[1] == f"1/{total}"
