from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from toolcall_repro.analysis.tables import general_table
from toolcall_repro.eval.general.runner import harness_metrics, model_args, run_general_eval
from toolcall_repro.eval.general.tasks import LOCAL_TASK


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """check_general_capability by hand (`toolcall-repro stage`), a process of its own, offline."""
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(
        [sys.executable, "-m", "toolcall_repro.cli", "stage", "check_general_capability", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )


@pytest.fixture(scope="module")
def rl_model(tiny_model_dir, tmp_path_factory) -> str:
    """The same architecture with other weights: stands in for the RL checkpoint."""
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    torch.set_num_threads(1)
    model = Qwen2ForCausalLM.from_pretrained(tiny_model_dir)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    out = tmp_path_factory.mktemp("model") / "rl"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return str(out)


@pytest.mark.slow  # two check_general_capability jobs through the CLI, each a fresh process loading lm-eval: ~10 s
def test_local_task_base_vs_rl_end_to_end(tiny_model_dir, rl_model, samples_parquet, tmp_path):
    """The job runs lm-eval's hf backend offline on the local task; the table compares base and RL."""
    outs = {}
    # The second run names the backend as the rule does (engines.generation: transformers = hf).
    for tag, model, backend in (("base", str(tiny_model_dir), "hf"), ("rl-multi", rl_model, "transformers")):
        out = tmp_path / "eval" / "general" / tag
        proc = run_cli(
            *("--in", f"model={model}", "--in", f"samples={samples_parquet}", "--seed", "eval=7"),
            *("--config", json.dumps({"general": {"tasks": "local", "num_fewshot": 1, "limit": 8}})),
            *("--option", f"backend={backend}", "--out", f"summary={out / 'summary.json'}"),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs[tag] = out

    harness = json.loads((outs["base"] / "results.json").read_text())
    # The harness's own record: seeds, model args, n-shot, task hashes.
    assert harness["config"]["random_seed"] == 7 and harness["config"]["fewshot_seed"] == 7
    assert f"pretrained={tiny_model_dir}" in harness["config"]["model_args"]
    assert harness["n-shot"][LOCAL_TASK] == 1 and harness["n-samples"][LOCAL_TASK]["effective"] == 8
    assert harness["task_hashes"][LOCAL_TASK]
    assert (outs["base"] / "samples" / f"{LOCAL_TASK}.jsonl").is_file()

    summary = json.loads((outs["base"] / "summary.json").read_text())
    acc = {r["metric"]: r for r in summary["results"]}
    assert set(acc) == {"acc", "acc_norm"}
    assert acc["acc"]["value"] == harness["results"][LOCAL_TASK]["acc,none"]
    assert (
        acc["acc"]["stderr"] == harness["results"][LOCAL_TASK]["acc_stderr,none"]
        and acc["acc"]["n_samples"] == 8
    )
    card = summary["card"]
    assert card["num_fewshot"] == 1 and card["seeds"]["fewshot"] == 7 and len(card["model_sha256"]) == 64
    assert card["local_task"]["test_docs"] + card["local_task"]["fewshot_docs"] == 30

    from toolcall_repro.analysis import loaders

    units = [{"benchmark": "general", "model": tag, "protocol": None, "kind": "summary",
              "path": str(out / "summary.json")} for tag, out in outs.items()]  # fmt: skip
    df = loaders.load_general(units, loaders.Declared(tmp_path))
    table = general_table(df, "base", ["rl-multi"])
    assert sorted(table.frame["metric"]) == ["acc", "acc_norm"]
    row = table.frame[table.frame["metric"] == "acc"].iloc[0]
    rl_acc = json.loads((outs["rl-multi"] / "results.json").read_text())["results"][LOCAL_TASK]["acc,none"]
    assert row["base"] == pytest.approx(acc["acc"]["value"] * 100)
    assert row["delta"] == pytest.approx((rl_acc - acc["acc"]["value"]) * 100)


def test_check_general_capability_job_runs_the_harness_from_the_spec(
    tiny_model_dir, samples_parquet, tmp_path, run_stage
):
    """The job reads tasks, shots, limit from evaluate.general, the harness seed from seeds.eval and the
    backend as an option (engines.generation: transformers = hf), as the rule passes them."""
    config = {
        "general": {"tasks": "local", "num_fewshot": 1, "limit": 4, "models": ["base"]},
        "model": {"tag": "base", "source": "base"},
    }
    out = tmp_path / "eval" / "general" / "base"
    manifest = run_stage(
        "check_general_capability", input={"model": str(tiny_model_dir), "samples": samples_parquet, "lm_eval_data": []},
        output={"summary": str(out / "summary.json"),
                "manifest": str(tmp_path / "manifests" / "check_general_capability" / "base.json")},
        config=config, seeds={"eval": 7}, backend="transformers",
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    card = summary["card"]
    assert card["seeds"] == {"random": 7, "numpy": 7, "torch": 7, "fewshot": 7} and card["num_fewshot"] == 1
    assert card["limit"] == 4 and card["backend"] == "hf" and card["batch_size"] == 8
    assert card["model_dir"] == str(tiny_model_dir) and card["model_tag"] is None  # as the rule leaves it
    assert {r["n_samples"] for r in summary["results"]} == {4}
    assert (out / "results.json").is_file()
    assert manifest["config"] == config and manifest["seeds"] == {"eval": 7}
    assert manifest["options"] == {"backend": "transformers"}


def test_local_task_without_data_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="needs data files"):
        run_general_eval(str(tmp_path / "model"), ["local"], tmp_path / "o", num_fewshot=0, seed=0)


def test_harness_metrics_reads_groups_and_skips_stderr_keys():
    results = {
        "results": {
            "mmlu": {"alias": "mmlu", "acc,none": 0.683, "acc_stderr,none": 0.004},
            "mmlu_anatomy": {"acc,none": 0.5, "acc_stderr,none": 0.05},
            "hellaswag": {
                "acc,none": 0.5,
                "acc_stderr,none": 0.01,
                "acc_norm,none": 0.6,
                "acc_norm_stderr,none": 0.02,
            },
        },
        "group_subtasks": {"mmlu": ["mmlu_anatomy", "mmlu_law"]},
        "n-samples": {
            "mmlu_anatomy": {"effective": 135},
            "mmlu_law": {"effective": 1534},
            "hellaswag": {"effective": 10042},
        },
    }
    rows = harness_metrics(results, ["mmlu", "hellaswag"])
    assert rows[0] == {"task": "mmlu", "metric": "acc", "value": 0.683, "stderr": 0.004, "n_samples": 1669}
    assert [(r["task"], r["metric"]) for r in rows[1:]] == [("hellaswag", "acc"), ("hellaswag", "acc_norm")]
    with pytest.raises(KeyError, match="winogrande"):
        harness_metrics(results, ["winogrande"])


def test_model_args_per_backend():
    assert model_args("hf", "/m", dtype="float32", device="cpu", seed=0) == (
        "pretrained=/m,tokenizer=/m,dtype=float32,device=cpu"
    )
    assert "tensor_parallel_size=2" in model_args(
        "vllm", "/m", dtype="bfloat16", device="cuda", seed=3, tensor_parallel=2
    )
    with pytest.raises(ValueError, match="backend"):
        model_args("sglang", "/m", dtype="float32", device="cpu", seed=0)


def test_vllm_engine_arguments_reach_lm_evals_model_as_typed_keywords():
    """A CPU build's engine arguments ride in model_args; lm-eval's own parser gives them back typed (it
    passes keywords it does not know on to vllm.LLM)."""
    from lm_eval.utils import simple_parse_args_string

    engine = {"enable_chunked_prefill": False, "kv_cache_memory_bytes": 1 << 30}
    text = model_args("vllm", "/m", dtype="bfloat16", device="cpu", seed=3, engine_args=engine)
    parsed = simple_parse_args_string(text)
    assert {k: parsed[k] for k in engine} == engine
    assert parsed["seed"] == 3 and parsed["pretrained"] == "/m"
