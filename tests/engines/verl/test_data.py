"""Our normalised samples become rows verl's own RLHFDataset reads back unchanged."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

import pyarrow.parquet as pq  # noqa: E402
from _verl_helpers import chat_messages, make_sample, run_config  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402

from toolcall_repro.engines.verl import hydra  # noqa: E402
from toolcall_repro.engines.verl.adapter import dataset_sample_ids  # noqa: E402
from toolcall_repro.engines.verl.data import check_chat, prompt_tokens, to_verl_rows, verl_table  # noqa: E402
from toolcall_repro.engines.verl.main import compose_config  # noqa: E402


def data_config(tmp_path, max_prompt):
    paths = hydra.RunPaths.under(str(tmp_path), "/unused")
    cfg = compose_config(
        hydra.build_overrides(run_config(max_prompt_tokens=max_prompt), {"gpus_per_node": 4}, paths, 0)
    )
    data = OmegaConf.to_container(cfg.data, resolve=False)
    data.update({"tool_config_path": None, "function_tool_path": None, "dataloader_num_workers": 0})
    data["filter_overlong_prompts_workers"] = 1
    return OmegaConf.create(data)


def test_rows_round_trip_through_verl_dataset(tmp_path, tokenizer):
    samples = [make_sample(i).row() for i in range(3)] + [make_sample(3, "multi_turn").row()]
    rows, report = to_verl_rows(samples, chat_messages, tokenizer, max_prompt_tokens=4096)
    assert report.rows_out == 4 and not report.dropped
    path = tmp_path / "train.parquet"
    pq.write_table(verl_table(rows), path)
    ds = RLHFDataset(str(path), tokenizer, data_config(tmp_path, 4096))
    item = ds[3]
    assert item["raw_prompt"] == chat_messages(
        json.loads(samples[3]["messages"]), json.loads(samples[3]["tools"])
    )
    assert item["data_source"] == "multi_turn" and item["extra_info"]["setting"] == "multi_turn"
    assert item["reward_model"]["ground_truth"] == samples[3]["ground_truth"]
    assert item["index"] == 3 and item["extra_info"]["num_turns"] == 2
    assert dataset_sample_ids(ds) == ["xlam:0", "xlam:1", "xlam:2", "xlam:3"]


def test_overlong_prompts_are_dropped_and_counted_so_verl_drops_none(tmp_path, tokenizer):
    samples = [make_sample(i, words=1 + 60 * (i % 2)).row() for i in range(6)]
    lengths = [
        prompt_tokens(tokenizer, chat_messages(json.loads(s["messages"]), json.loads(s["tools"])))
        for s in samples
    ]
    limit = (min(lengths) + max(lengths)) // 2
    rows, report = to_verl_rows(samples, chat_messages, tokenizer, max_prompt_tokens=limit)
    assert report.as_dict()["dropped_ids"] == {"prompt_too_long": ["xlam:1", "xlam:3", "xlam:5"]}
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2]
    assert report.longest_prompt_tokens == max(lengths)
    path = tmp_path / "train.parquet"
    pq.write_table(verl_table(rows), path)
    ds = RLHFDataset(str(path), tokenizer, data_config(tmp_path, limit))  # verl's own length filter is on
    assert len(ds) == 3


def test_limit_keeps_the_first_rows_and_counts_the_rest(tokenizer):
    rows, report = to_verl_rows(
        [make_sample(i).row() for i in range(5)], chat_messages, tokenizer, 4096, limit=2
    )
    assert [r["extra_info"]["id"] for r in rows] == ["xlam:0", "xlam:1"]
    assert report.as_dict()["dropped_counts"] == {"beyond_limit": 3}


@pytest.mark.parametrize(
    ("chat", "message"),
    [
        ([], "non-empty list"),
        ([{"role": "user", "content": "x", "tool_calls": []}], "exactly the keys"),
        ([{"role": "robot", "content": "x"}], "role"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "label leaked"),
    ],
)
def test_bad_chat_messages_are_refused(chat, message):
    with pytest.raises(ValueError, match=message):
        check_chat(chat, "s1")


def test_duplicate_ids_are_refused(tokenizer):
    with pytest.raises(ValueError, match="duplicate sample id"):
        to_verl_rows([make_sample(1).row(), make_sample(1).row()], chat_messages, tokenizer, 4096)


def test_prompts_are_checked_against_the_protocol_render(tokenizer):
    samples = [make_sample(i, "multi_turn").row() for i in range(2)]

    def render(messages, tools):
        return tokenizer.apply_chat_template(
            chat_messages(messages, tools), add_generation_prompt=True, tokenize=False
        )

    rows, _ = to_verl_rows(samples, chat_messages, tokenizer, 4096, render=render)
    assert len(rows) == 2
    with pytest.raises(ValueError, match="xlam:0: verl's templated prompt differs"):
        to_verl_rows(samples, chat_messages, tokenizer, 4096, render=lambda m, t: render(m, t) + "<think>\n")


def test_the_thinking_switch_is_the_same_in_our_prompts_and_in_verls_dataset(tmp_path):
    """With model.enable_thinking false (a Qwen3 template pre-fills an empty think block), the prompts we
    check against protocol.render and the kwargs verl's RLHFDataset templates with agree; the same rows
    templated without the switch are refused, since verl would then template another prompt."""
    from _verl_helpers import CHAT_TEMPLATE

    from toolcall_repro.engines.local.tokenizer import provisional_tokenizer
    from toolcall_repro.engines.verl.launch import training_protocol_fns

    qwen3_end = (
        "{%- if add_generation_prompt %}<|im_start|>assistant\n"
        "{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{%- endif %}"
        "{%- endif %}"
    )
    tok = provisional_tokenizer(CHAT_TEMPLATE.replace("{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}", qwen3_end))
    run = run_config(enable_thinking=False)
    chat, render = training_protocol_fns(tok, run["enable_thinking"])
    samples = [make_sample(i).row() for i in range(2)] + [make_sample(2, "multi_turn").row()]
    rows, _ = to_verl_rows(samples, chat, tok, 4096, render=render, template_kwargs=hydra.template_kwargs(run))
    assert len(rows) == 3 and render(json.loads(samples[0]["messages"]), []).endswith("assistant<think>\n\n</think>")
    with pytest.raises(ValueError, match="verl's templated prompt differs from protocol.render"):
        to_verl_rows(samples, chat, tok, 4096, render=render)
    cfg = compose_config(hydra.build_overrides(run, {"gpus_per_node": 4}, hydra.RunPaths.under(str(tmp_path), "/unused"), 0))
    data = OmegaConf.to_container(cfg.data, resolve=False)
    data.update({"tool_config_path": None, "function_tool_path": None, "dataloader_num_workers": 0})
    path = tmp_path / "train.parquet"
    pq.write_table(verl_table(rows), path)
    ds = RLHFDataset(str(path), tok, OmegaConf.create({**data, "filter_overlong_prompts_workers": 1}))
    assert ds.apply_chat_template_kwargs == {"enable_thinking": False}
