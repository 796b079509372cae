import json

import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from toolcall_repro.engines.local.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from toolcall_repro.engines.local.grpo import parse_config
from toolcall_repro.engines.local.rollout import sample_groups, top_p_filter
from toolcall_repro.engines.local.tokenizer import TAG_TOKENS, train_tokenizer
from toolcall_repro.engines.local.update import UpdateRow, policy_update, response_log_probs
from toolcall_repro.protocol import load_chat_template

EOS, PAD = 2, 0


def tiny_model(seed=0):
    cfg = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(cfg)


PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]


def sample(model, prompts, n, **kw):
    """`sample_groups` with this file's EOS and PAD ids; top_p 1 and 8 new tokens unless given."""
    kw = {"top_p": 1.0, "max_new_tokens": 8} | kw
    return sample_groups(model, prompts, n, eos_id=EOS, pad_id=PAD, **kw)


def test_tokenizer_is_deterministic_and_round_trips():
    texts = ["<|im_start|>user\nswitch the kitchen light on<|im_end|>\n<tool_call>\n{}\n</tool_call>"] * 20
    texts += [f"weather in city {i}\n" for i in range(30)]
    a, b = (train_tokenizer(texts, 400, load_chat_template()) for _ in range(2))
    assert a.get_vocab() == b.get_vocab()
    ids = a(texts[0], add_special_tokens=False)["input_ids"]
    assert a.decode(ids) == texts[0]
    assert a.pad_token_id == 0 and a.eos_token == "<|im_end|>"
    assert all(len(a(t, add_special_tokens=False)["input_ids"]) == 1 for t in TAG_TOKENS)
    assert sorted(a.get_vocab().values()) == list(range(len(a)))  # no id collisions
    assert a.chat_template == load_chat_template()
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(texts, 100, load_chat_template())


def test_greedy_shared_prefix_matches_hf_generate():
    model = tiny_model()
    shared = sample(model, PROMPTS, 2, temperature=0)
    unshared = sample(model, PROMPTS, 2, temperature=0, share_prefix=False)
    for prompt, group, other in zip(PROMPTS, shared, unshared, strict=True):
        ref = model.generate(
            torch.tensor([prompt]), max_new_tokens=8, do_sample=False, eos_token_id=EOS, pad_token_id=PAD
        )[0, len(prompt) :].tolist()
        assert list(group[0].response_ids) == ref[: len(group[0].response_ids)]
        assert group[0] == group[1] and group[0].response_ids == other[0].response_ids


def test_sampling_is_seeded_and_log_probs_match_a_full_forward():
    model = tiny_model()

    def draw(seed):
        g = torch.Generator().manual_seed(seed)
        return sample(model, PROMPTS, 4, temperature=1.3, top_p=0.95, generator=g)

    a, b, c = draw(1), draw(1), draw(2)
    assert a == b and a != c
    assert len({r.response_ids for r in a[0]}) > 1
    rollout = a[2][1]
    row = UpdateRow(tuple(PROMPTS[2]), rollout.response_ids, rollout.old_log_probs, 0.0)
    with torch.no_grad():
        logp, mask = response_log_probs(model, [row], 1.3, PAD)
    np.testing.assert_allclose(logp[0, : mask.sum()].numpy(), rollout.old_log_probs, atol=1e-5)


def test_top_p_keeps_the_smallest_covering_set():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(top_p_filter(logits, 0.7))
    assert kept.tolist() == [[True, True, False, False]]
    assert torch.isfinite(top_p_filter(logits, 0.01)).sum() == 1


def _rows(model, adv):
    g = torch.Generator().manual_seed(0)
    groups = sample(model, PROMPTS[:2], 2, temperature=1.0, max_new_tokens=6, generator=g)
    return [
        UpdateRow(tuple(p), r.response_ids, r.old_log_probs, adv)
        for p, grp in zip(PROMPTS[:2], groups, strict=True)
        for r in grp
    ]


def _update(model, rows, micro):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    return policy_update(
        model,
        opt,
        rows,
        temperature=1.0,
        clip_low=0.2,
        clip_high=0.28,
        loss_agg="token-mean",
        micro_batch_size=micro,
        grad_clip=1.0,
        pad_id=PAD,
    )


def test_zero_advantage_changes_nothing_and_positive_advantage_raises_log_prob():
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = _update(model, _rows(model, 0.0), micro=3)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert out["update_tokens"] == sum(r.num_tokens for r in _rows(model, 0.0))
    rows = _rows(model, 1.0)
    with torch.no_grad():
        old = response_log_probs(model, rows, 1.0, PAD)
    _update(model, rows, micro=4)
    with torch.no_grad():
        new = response_log_probs(model, rows, 1.0, PAD)
    assert float((new[0] * new[1]).sum()) > float((old[0] * old[1]).sum())


def test_micro_batching_gives_the_same_update():
    a, b = tiny_model(), tiny_model()
    rows = _rows(a, 0.0)
    rows = [
        UpdateRow(r.prompt_ids, r.response_ids, r.old_log_probs, float(i % 3 - 1)) for i, r in enumerate(rows)
    ]
    _update(a, rows, micro=1)
    _update(b, rows, micro=len(rows))
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(va, vb, atol=1e-5, rtol=1e-4, msg=k)


def test_checkpoint_round_trip_keeps_only_the_newest(tmp_path):
    model = tiny_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _update(model, _rows(model, 1.0), micro=4)
    (tmp_path / ".step_6.tmp999").mkdir(parents=True)  # what a kill -9 mid-write leaves
    for step in (2, 4, 6):
        save_checkpoint(tmp_path, step, model, opt, {"step": step}, keep=2)
    (tmp_path / "step_8").mkdir()  # a directory without state.json is an unfinished checkpoint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_4", "step_6", "step_8"]
    assert latest_checkpoint(tmp_path).name == "step_6"
    other = tiny_model(seed=1)
    other_opt = torch.optim.AdamW(other.parameters(), lr=1e-3)
    assert load_checkpoint(tmp_path / "step_6", other, other_opt) == {"step": 6}
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), other.state_dict().values(), strict=True)
    )
    assert json.dumps(other_opt.state_dict()["param_groups"]) == json.dumps(opt.state_dict()["param_groups"])


@pytest.mark.parametrize(
    "over, match",
    [
        ({"n": 1}, "n must be"),
        ({"loss_agg": "sum"}, "loss_agg"),
        ({"downsample": {"m": 9, "selection": "max_variance", "advantage_scope": "group"}}, "downsample.m"),
        ({"downsample": {"m": 2, "selection": "best", "advantage_scope": "group"}}, "selection"),
        ({"filter": {"probe_every": 2}}, "filter needs k"),
        ({"bogus": 1}, "unknown keys"),
        ({"temperature": 0}, "temperature"),
    ],
)
def test_bad_config_is_a_clear_error(over, match, make_config):
    with pytest.raises(ValueError, match=match):
        parse_config(make_config(**over))


def test_config_accepts_the_workflow_shape(make_config):
    cfg = parse_config(make_config(setting="single_turn", variant="vanilla", max_steps=3, model="Qwen/x"))
    assert cfg.max_steps == 3 and cfg.extra == {"model": "Qwen/x"}
    missing = make_config()
    del missing["clip_low"]
    with pytest.raises(ValueError, match="missing keys"):
        parse_config(missing)


def test_ppo_mini_batches_move_the_ratio_so_the_clip_acts():
    rows = _rows(tiny_model(), 0.0)
    rows = [
        UpdateRow(r.prompt_ids, r.response_ids, r.old_log_probs, float(1 - 2 * (i % 2)))
        for i, r in enumerate(rows)
    ]

    def update(mini_batches):
        model = tiny_model()
        opt = torch.optim.AdamW(model.parameters(), lr=5e-2, weight_decay=0.0)
        return policy_update(
            model,
            opt,
            rows,
            temperature=1.0,
            clip_low=0.2,
            clip_high=0.28,
            loss_agg="token-mean",
            micro_batch_size=1,
            grad_clip=1.0,
            pad_id=PAD,
            mini_batches=mini_batches,
        )

    one = update(1)
    # One optimizer step with old log-probs from the same weights: ratio 1, nothing clipped.
    assert one["optimizer_steps"] == 1 and one["pg_clipfrac"] == 0.0 and one["pg_clipfrac_later"] is None
    assert abs(one["ppo_kl"]) < 1e-4
    four = update(len(rows))  # one row per mini-batch: every later row sees moved weights
    assert four["optimizer_steps"] == len(rows)
    assert four["pg_clipfrac_later"] > 0 and four["pg_clipfrac"] > 0
    assert four["pg_clipfrac"] <= four["pg_clipfrac_later"]  # the first mini-batch never clips


_RESAVE = """
import sys
from toolcall_repro.engines.local.model import load_policy, save_hf_dir
model, tokenizer = load_policy(sys.argv[1])
save_hf_dir(model, tokenizer, sys.argv[2])
"""


@pytest.mark.slow  # two fresh processes that load transformers (~4 s each)
def test_a_resaved_policy_is_the_same_bytes_whatever_the_callers_hf_hub_offline(tmp_path):
    """A GRPO final/ is the loaded base policy saved again. transformers saves the loading flags with the
    tokenizer (tokenizer_config.json: local_files_only), and HF_HUB_OFFLINE in the caller's shell sets that
    flag unless the loader does: two fresh runs differed only by it (every card's model sha256 with them)."""
    import os
    import subprocess
    import sys

    from toolcall_repro.engines.local.model import save_hf_dir

    model = tiny_model()
    tok = train_tokenizer(["hello world <tool_call> x </tool_call>"] * 4, 300, load_chat_template())
    base = save_hf_dir(model, tok, tmp_path / "base")
    outs = {}
    for offline in ("0", "1"):
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env["HF_HUB_OFFLINE"] = offline
        out = tmp_path / f"resaved-{offline}"
        subprocess.run([sys.executable, "-c", _RESAVE, str(base), str(out)], env=env, check=True, timeout=300)
        outs[offline] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert outs["0"].keys() == outs["1"].keys() and "tokenizer_config.json" in outs["0"]
    differing = [name for name in outs["0"] if outs["0"][name] != outs["1"][name]]
    assert differing == []
