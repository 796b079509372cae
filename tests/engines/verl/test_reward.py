"""Our reward through verl's own reward-manager path (the config's custom reward function)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

import torch  # noqa: E402
from _verl_helpers import run_config  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.reward import load_reward_manager  # noqa: E402

from toolcall_repro.engines.verl import hydra  # noqa: E402
from toolcall_repro.engines.verl.main import compose_config  # noqa: E402

GT = '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]'
RIGHT = '<think>\nweather\n</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
CASES = [
    ("single_turn", RIGHT, 1.0, "correct"),
    ("single_turn", RIGHT.replace("Oslo", "Rome"), 0.0, "wrong_args"),
    ("single_turn", RIGHT.split("</think>\n")[1], 0.0, "format"),  # no thinking block
    ("multi_turn", RIGHT.split("</think>\n")[1], 1.0, "correct"),  # multi-turn has no format term
    ("single_turn", "<think>\n</think>\n<tool_call>\n{not json}\n</tool_call>", 0.0, "parse"),
]


def toy_batch(tokenizer, setting, text, prompt_len=4, response_len=128):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) <= response_len
    pad = tokenizer.pad_token_id
    responses = torch.full((1, response_len), pad)
    responses[0, : len(ids)] = torch.tensor(ids)
    attention = torch.cat(
        [torch.ones(1, prompt_len, dtype=torch.long), torch.zeros(1, response_len, dtype=torch.long)], 1
    )
    attention[0, prompt_len : prompt_len + len(ids)] = 1
    return DataProto.from_single_dict(
        {
            "prompts": torch.zeros(1, prompt_len, dtype=torch.long),
            "responses": responses,
            "attention_mask": attention,
            "data_source": np.array([setting], dtype=object),
            "reward_model": np.array([{"ground_truth": GT, "style": "rule"}], dtype=object),
            "extra_info": np.array([{"setting": setting, "id": "x:1", "index": 0}], dtype=object),
        }
    )


@pytest.fixture(scope="module")
def manager(tmp_path_factory, tokenizer):
    paths = hydra.RunPaths.under(str(tmp_path_factory.mktemp("run")), "/unused")
    config = compose_config(hydra.build_overrides(run_config(), {"gpus_per_node": 4}, paths, seed=0))
    return load_reward_manager(config, tokenizer)


@pytest.mark.parametrize(("setting", "text", "score", "reason"), CASES)
def test_reward_manager_scores_decoded_responses(manager, tokenizer, setting, text, score, reason):
    # run on the loop the manager was built with, as verl's reward-loop worker does
    out = manager.loop.run_until_complete(manager.run_single(toy_batch(tokenizer, setting, text)))
    assert out["reward_score"] == score
    assert out["reward_extra_info"] == {"score": score, "acc": score, "reason": reason}


def test_scores_land_on_the_last_response_token(manager, tokenizer):
    batch = toy_batch(tokenizer, "single_turn", RIGHT)
    scores = manager.assemble_rm_scores(batch, [1.0])
    last = int(batch.batch["attention_mask"][0, 4:].sum()) - 1
    assert scores[0, last] == 1.0 and scores.sum() == 1.0
