"""Generation backends: ``transformers`` (CPU, the embedded default) and ``vllm`` (GPU, paper scale).

Backends are imported lazily, so importing this package needs neither torch nor vLLM.
"""

from __future__ import annotations

from typing import Any

from toolcall_repro.backends.base import Generation, GenerationBackend, derive_seed

BACKEND_KINDS = ("transformers", "vllm")

__all__ = ["BACKEND_KINDS", "Generation", "GenerationBackend", "derive_seed", "load_backend"]


def load_backend(kind: str, model_dir: str, **kw: Any) -> GenerationBackend:
    """Build the backend ``kind`` for the HF model directory ``model_dir``; ``kw`` go to its constructor."""
    if kind == "transformers":
        from toolcall_repro.backends.transformers import TransformersBackend

        return TransformersBackend(model_dir, **kw)
    if kind == "vllm":
        from toolcall_repro.backends.vllm import VLLMBackend

        return VLLMBackend(model_dir, **kw)
    raise ValueError(f"unknown backend {kind!r}; expected one of {BACKEND_KINDS}")
