import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from toolcall_repro.data.filters import ids_digest
from toolcall_repro.data.split import partition
from toolcall_repro.engines.local.prompts import answer_text, load_samples, render_prompt
from toolcall_repro.engines.local.warmstart import lr_at, warm_start
from toolcall_repro.protocol import load_chat_template
from toolcall_repro.provenance import model_sha256
from toolcall_repro.rewards import single_turn_reward


def warmstart_stage(files, out, tiny, *, seed, reserve_fraction, reserve_seed, threads, early=None):
    """The warmstart_base_model job by hand (`toolcall-repro stage`), a process of its own."""
    config = {"model.tiny": tiny, "filter.reserve_fraction": reserve_fraction, "engines.warmstart_threads": threads}
    return [sys.executable, "-m", "toolcall_repro.cli", "stage", "warmstart_base_model",
            "--in", f"samples={files['single_turn']}", "--in", f"samples={files['multi_turn']}",
            "--out", f"model={out}", *(["--out", f"early={early}"] if early else []),
            "--config", json.dumps(config), "--seed", f"model={seed}", "--seed", f"reserve={reserve_seed}"]  # fmt: skip


def test_the_job_builds_a_model_dir_that_reloads_with_the_same_tokens(sample_files, tmp_path, tiny_config):
    out = tmp_path / "base"
    cfg = dict(tiny_config, sft_steps=3)
    cmd = warmstart_stage(sample_files, out, cfg, seed=0, reserve_fraction=0.25, reserve_seed=3, threads=1)
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    # the job's log (its stdout) says how far the steps got, how long they took and what is left
    assert re.search(r"^warm start: 1/3 steps \(33%\) loss \d+\.\d{4}, \d+s elapsed, ~\d+s left$", done.stdout, re.M)
    assert re.search(r"^warm start: 3/3 steps \(100%\) .*, ~0s left$", done.stdout, re.M), done.stdout
    report = json.loads((out / "warmstart_report.json").read_text())
    # reserved ids (the filters' held-out candidates) never reach the warm start
    everything = load_samples([sample_files["single_turn"], sample_files["multi_turn"]])
    _, reserved = partition(everything, 0.25, 3)
    assert len(everything) == 32 and 0 < len(reserved) < 32
    assert report["reserve"]["excluded"] == len(reserved)
    assert report["reserve"]["excluded_ids_sha256"] == ids_digest(reserved)
    assert report["examples"] == 32 - len(reserved)
    assert report["sft_steps"] == 3 and report["dropped"] == {"overlong": 0}
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert model.config.model_type == "qwen2" and model.config.vocab_size == len(tok)
    assert tok.chat_template == load_chat_template() and tok.eos_token == "<|im_end|>"
    # transformers rebuilds a qwen2 tokenizer from its own pipeline: the trained file must agree with it
    raw = Tokenizer.from_file(str(out / "tokenizer.json"))
    sample = load_samples([sample_files["multi_turn"]])[0]
    text = render_prompt(sample, tok) + answer_text(sample.ground_truth_list)
    assert raw.encode(text).ids == tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_warm_start_is_deterministic_and_learns(sample_files, tiny_config):
    samples = load_samples([sample_files["single_turn"]])
    m1, t1, r1 = warm_start(samples, dict(tiny_config, sft_steps=12), seed=4, log=lambda m: None)
    m2, t2, r2 = warm_start(samples, dict(tiny_config, sft_steps=12), seed=4, log=lambda m: None)
    assert t1.get_vocab() == t2.get_vocab()
    assert all(
        torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True)
    )
    assert r1["final_loss_mean_last_20"] == r2["final_loss_mean_last_20"]
    assert r1["final_loss_mean_last_20"] < r1["first_loss"] - 1.0


def test_answer_text_is_what_the_reward_accepts():
    gt = [{"name": "get_weather", "arguments": {"city": "lima"}}]
    assert single_turn_reward(answer_text(gt), gt).score == 1.0
    assert single_turn_reward(answer_text([]), []).score == 1.0


def test_schedule():
    assert lr_at(0, 100, 1.0) < lr_at(4, 100, 1.0) == 1.0
    assert lr_at(99, 100, 1.0) < 0.15


def test_history_assistant_messages_are_targets_but_not_their_first_token(sample_files, base_model):
    from toolcall_repro.engines.local.model import load_policy
    from toolcall_repro.engines.local.warmstart import supervised_examples

    _, tok = load_policy(base_model)
    sample = load_samples([sample_files["multi_turn"]])[0]
    (example,), dropped = supervised_examples([sample], tok, 4096)
    assert dropped == {"overlong": 0}
    text = tok.decode([example.ids[t] for t in example.targets])
    history_calls = [c["name"] for m in sample.messages_list for c in m.get("tool_calls", [])]
    assert len(history_calls) == 2 and all(name in text for name in history_calls)
    answer = answer_text(sample.ground_truth_list)
    assert text.endswith(answer + "<|im_end|>")
    # every history message opens unsupervised, so "<think>" is the only supervised opening
    assert text.count("<think>") == 1 and text.count("<tool_call>") == 1
    prompt_len = len(tok(render_prompt(sample, tok), add_special_tokens=False)["input_ids"])
    assert example.targets == sorted(example.targets) and example.targets[-1] == len(example.ids) - 1
    assert len([t for t in example.targets if t >= prompt_len]) == len(example.ids) - prompt_len


def test_shared_prefix_gives_the_same_loss_and_gradients_as_full_sequences():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from toolcall_repro.engines.local.warmstart import Example, shared_prefix, target_loss_sum

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, intermediate_size=64, max_position_embeddings=512)
    )  # fmt: skip
    common = torch.randint(0, 97, (40,)).tolist()
    batch = [
        Example(common + torch.randint(0, 97, (20 + 3 * i,)).tolist(), list(range(45 + i, 60 + 3 * i)))
        for i in range(4)
    ]

    def loss_and_grads(prefix_fn):
        model.zero_grad()
        prefix = prefix_fn()
        loss = sum(target_loss_sum(model, ex, prefix) for ex in batch)
        loss.backward()
        return loss.item(), torch.cat([p.grad.flatten() for p in model.parameters()])

    full_loss, full_grads = loss_and_grads(lambda: None)
    shared = shared_prefix(model, batch)
    assert shared is not None and shared[0][0].shape[-2] == 40  # the common tokens, before every target
    shared_loss, shared_grads = loss_and_grads(lambda: shared_prefix(model, batch))
    assert abs(full_loss - shared_loss) < 1e-4 * abs(full_loss)
    assert torch.allclose(full_grads, shared_grads, atol=1e-5)
    # a batch without a common prefix runs whole sequences
    assert shared_prefix(model, [Example([1, 2, 3], [2]), Example([4, 5, 6], [2])]) is None


# slow: two warm-start jobs in fresh processes at the config's 2 threads, ~8 s each on an idle 2-core machine
# and several times that when the other core is busy (two threads then wait on each other every step).
@pytest.mark.slow
def test_warm_start_as_configured_twice_gives_bit_identical_weights(sample_files, tmp_path):
    """The embedded default's model.tiny and engines.warmstart_threads (steps cut to 4), run twice:
    same seed, same thread count -> the same bytes, whatever else the machine runs. The thread count
    is part of the config because 1 and 2 threads give different float sums (max |dw| ~ 1e-5)."""
    import yaml

    from toolcall_repro.engines.local.model import load_policy

    config = yaml.safe_load((Path(__file__).parents[3] / "config" / "config.yaml").read_text())
    threads = config["engines"].get("warmstart_threads", config["engines"]["threads"])
    tiny = dict(config["model"]["tiny"], sft_steps=4, early_step=2)

    def build(name):
        out, early = tmp_path / name, tmp_path / f"{name}-early"
        cmd = warmstart_stage(sample_files, out, tiny, seed=config["model"]["tiny"]["seed"],
                              reserve_fraction=config["filter"]["reserve_fraction"],
                              reserve_seed=config["filter"]["seed"], threads=threads, early=early)  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return out, early

    a, a_early = build("a")
    b, b_early = build("b")
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    # Every score card names the model by one sha256 over its folder: the whole folder is the same,
    # not only the weights (a wall-clock figure in warmstart_report.json once moved every base score).
    assert model_sha256(a) == model_sha256(b)
    assert model_sha256(a_early) == model_sha256(b_early)
    assert (a_early / "model.safetensors").read_bytes() == (b_early / "model.safetensors").read_bytes()
    # The early snapshot is the same run two steps earlier: other weights, same tokenizer.
    assert (a_early / "tokenizer.json").read_text() == (a / "tokenizer.json").read_text()
    final, _ = load_policy(a)
    early, _ = load_policy(a_early)
    assert not all(
        torch.equal(x, y)
        for x, y in zip(final.state_dict().values(), early.state_dict().values(), strict=True)
    )
    assert json.loads((a_early / "early_step.json").read_text()) == {"sft_steps_done": 2, "of": 4}


# slow: three warm-start jobs in fresh processes (torch reads the kernel choice when it loads), ~7 s each.
@pytest.mark.slow
def test_the_configured_cpu_capability_decides_the_weights_not_the_callers_shell(sample_files, tmp_path):
    """engines.cpu_capability reaches the warm start through the job entry, as in the workflow: a caller
    whose shell asks for other kernels (another machine's instruction set, simulated with
    ATEN_CPU_CAPABILITY=default) gets the configured capability's bytes. Without a pin (a spec with no
    cpu_capability, as every job was before the pin) the shell's choice goes through and the bytes
    differ: that is how two machines trained two models from one config."""
    import os

    import yaml

    if not torch.cpu._is_avx2_supported():
        pytest.skip("this CPU has no AVX2: the pinned capability (avx2) cannot run here")
    config = yaml.safe_load((Path(__file__).parents[3] / "config" / "config.yaml").read_text())
    samples = [str(sample_files["single_turn"]), str(sample_files["multi_turn"])]

    def build(name, capability, outer):
        out, manifest = tmp_path / name, tmp_path / f"{name}.json"
        spec = {
            "rule": "warmstart_base_model",
            "stage": "warmstart_base_model",
            "config": {
                "model.tiny": dict(config["model"]["tiny"], sft_steps=4),
                "filter.reserve_fraction": config["filter"]["reserve_fraction"],
                "engines.warmstart_threads": 1,
            },
            "seeds": {"model": 0, "reserve": 0},
            "options": {} if capability is None else {"cpu_capability": capability},
            "input": {"samples": samples},
            "output": {"model": str(out), "manifest": str(manifest)},
            "files": {"input": samples, "output": [str(out), str(manifest)]},
        }
        env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
        env.update(outer)
        cmd = [sys.executable, "-m", "toolcall_repro.job", json.dumps(spec)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        return (out / "model.safetensors").read_bytes(), json.loads(manifest.read_text())["machine"]

    elsewhere = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
    pinned_here, facts = build("pinned-here", "avx2", {})
    pinned_elsewhere, facts_elsewhere = build("pinned-elsewhere", "avx2", elsewhere)
    unpinned_elsewhere, facts_unpinned = build("unpinned-elsewhere", None, elsewhere)
    assert pinned_here == pinned_elsewhere
    assert facts["torch_capability"] == facts_elsewhere["torch_capability"] == "avx2"
    assert facts_elsewhere["kernel_env"]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert facts_unpinned["torch_capability"] == "default"
    assert unpinned_elsewhere != pinned_here
