"""Test-wide setup: bfcl-eval and the Hub kept off shared folders and the network; one tiny Qwen2 model;
what a skip means (TOOLCALL_REQUIRE_FIXTURES) and where the verl tests run.

pytest imports this file before any test module, so the environment below is in place before anything
imports bfcl-eval (which reads BFCL_PROJECT_ROOT on first import and creates result/, score/ and
.file_locks/ there, by default inside site-packages).
"""

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from collections import Counter

_BFCL_ROOT = tempfile.mkdtemp(prefix="bfcl_root_tests_")
atexit.register(shutil.rmtree, _BFCL_ROOT, ignore_errors=True)
os.environ.setdefault("BFCL_PROJECT_ROOT", _BFCL_ROOT)
os.environ["HF_HUB_OFFLINE"] = "1"  # tests build their models locally; never download
os.environ["HF_DATASETS_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

# tests/ has no __init__.py: make the vLLM stand-in importable (as tests/workflow does its helpers)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "backends"))

torch.set_num_threads(1)  # the machine's cores are shared

# The verl CPU tests need verl, which lives in .venv-verl only (verl needs numpy>=2, bfcl-eval pins
# 1.26.4); scripts/test.sh runs them there with `-m verl`. Where verl is absent their folder is not
# collected (the header says so), so that no skip in a run stands for anything but a missing fixture.
HAVE_VERL = importlib.util.find_spec("verl") is not None
collect_ignore = [] if HAVE_VERL else ["engines/verl"]

# A test skips, in one line naming what is missing and how to get it, when this machine lacks a
# fixture from outside the repository (ACEBench data in ../shared, Chromium, snakefmt, bfcl-eval).
# CI has them all: `.ci/run` sets TOOLCALL_REQUIRE_FIXTURES=1, and then every skip is a failure.
REQUIRE_FIXTURES = os.environ.get("TOOLCALL_REQUIRE_FIXTURES", "0") not in ("", "0")


# What `make test-fast` (`-m "not workflow and not slow and not verl"`) leaves out, marked here by path so
# that a new test in these files is marked too (markers: pyproject.toml). Every test under tests/workflow/
# drives the Snakemake CLI, a shell script or a fresh venv in subprocesses: `workflow`. test_smoke.py runs
# a whole DAG for real, also `e2e`. tests/cluster/ starts a real SLURM: `workflow` too; its toy paper run
# (~37 min, jobs in .venv-verl, through the slurm profile) is also `e2e` and `paper_cpu`. A slow unit test
# elsewhere carries `slow` in its own file, with the reason beside it.
_TESTS = os.path.dirname(os.path.abspath(__file__))
PATH_MARKS = {
    "workflow/": ("workflow",),
    "workflow/test_smoke.py": ("e2e",),
    "cluster/test_local_slurm.py": ("workflow",),  # a real SLURM on this host (scripts/local_slurm.sh)
    "cluster/test_ray_two_nodes.py": ("workflow",),  # and a real two-node Ray on it
    "cluster/test_venv_deployment.py": ("workflow",),  # and the venv deployment (profiles/slurm-venv)
    "cluster/test_paper_cpu.py": ("workflow", "e2e", "paper_cpu"),  # and the toy paper run through both
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        rel = os.path.relpath(str(item.path), _TESTS).replace(os.sep, "/")
        for prefix, marks in PATH_MARKS.items():
            if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
                for mark in marks:
                    item.add_marker(mark)


def pytest_report_header(config):
    lines = []
    if not HAVE_VERL:
        lines.append(
            "verl not importable: tests/engines/verl not collected (scripts/test.sh runs them in .venv-verl)"
        )
    if REQUIRE_FIXTURES:
        lines.append("TOOLCALL_REQUIRE_FIXTURES=1: a test that skips for a missing fixture fails")
    return lines


def _skip_reason(report) -> str:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def _skip_fails(report):
    """Under TOOLCALL_REQUIRE_FIXTURES=1, turn a skipped test or module into a failure, reason kept."""
    if not (REQUIRE_FIXTURES and report.skipped) or hasattr(report, "wasxfail"):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped, and TOOLCALL_REQUIRE_FIXTURES=1 makes that a failure: {_skip_reason(report)}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _skip_fails(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _skip_fails(report)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after -ra's list of skips, just above the counts
def pytest_terminal_summary(terminalreporter):
    """One line per missing fixture, however many tests it skipped."""
    result = yield
    reasons = Counter(_skip_reason(r) for r in terminalreporter.stats.get("skipped", []))
    if reasons:
        terminalreporter.write_line(
            f"{sum(reasons.values())} skipped for fixtures this machine lacks (CI has them and sets "
            "TOOLCALL_REQUIRE_FIXTURES=1, under which a skip fails):"
        )
        for reason, n in reasons.most_common():
            terminalreporter.write_line(f"  {n} x {reason}")
    return result


# <|im_end|> first, so it gets id 0: a model whose logits are all equal picks it under greedy decoding
SPECIAL = [
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
]
CORPUS = [
    "What is the weather in Paris? Rome? Oslo?",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "[get_weather(city='Paris')] 0123456789 abcdefghijklmnopqrstuvwxyz",
    "Find the area of a triangle with a base of 10 units. cd ls mkdir",
    '[calculate_triangle_area(base=10, height=5)] {"name": "cd", "arguments": {"folder": "a"}}',
    "system user assistant tool response You can call functions described in JSON",
    "You are an expert in composing functions.",
]


def _tokenizer(corpus, vocab_size):
    # imported here: most tests never build a model, and transformers is slow to import
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from toolcall_repro.protocol import load_chat_template

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator(corpus, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    tok.chat_template = load_chat_template()
    return tok


def _save_tiny(directory, stop_at_once, max_positions, corpus, vocab_size):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = _tokenizer(corpus, vocab_size)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config)
    if stop_at_once:
        with torch.no_grad():
            model.model.norm.weight.zero_()  # every logit 0: greedy picks id 0, <|im_end|>
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory):
    """`tiny_qwen2(**options)` -> folder of a random 2-layer Qwen2 + byte-level BPE tokenizer with the
    project's chat template, built once per distinct set of options.

    stop_at_once=True: all logits equal, so greedy decoding stops at once with <|im_end|>.
    max_positions: the context the config declares (default 32768: BFCL multi-turn prompts are long).
    corpus, vocab_size: the tokenizer's training text (default CORPUS) and its vocabulary size.
    """
    built = {}

    def get(*, stop_at_once=False, max_positions=32768, corpus=CORPUS, vocab_size=400):
        key = (stop_at_once, max_positions, tuple(corpus), vocab_size)
        if key not in built:
            name = "tiny_qwen2_stop" if stop_at_once else "tiny_qwen2"
            built[key] = _save_tiny(tmp_path_factory.mktemp(name), *key)
        return built[key]

    return get


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_qwen2):
    return tiny_qwen2()


@pytest.fixture(scope="session")
def stopping_model_dir(tiny_qwen2):
    return tiny_qwen2(stop_at_once=True)


@pytest.fixture
def fake_vllm(monkeypatch):
    """`import vllm` gives a stand-in built from vLLM 0.24.0's own constructor names
    (tests/backends/_vllm_0_24_0.py): a keyword the real `vllm.LLM` would refuse raises the same TypeError."""
    import _vllm_0_24_0  # imported here: tests/test_fixture_skips.py runs this file without its folder

    module = _vllm_0_24_0.module()
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.platforms", module.platforms)
    return module
