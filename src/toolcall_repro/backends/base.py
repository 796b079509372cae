"""The generation interface every backend implements, and the pure helpers they share."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")  # ChatML end of turn and end of text, when in the vocabulary


@dataclass(frozen=True)
class Generation:
    """One sampled completion. ``completion_tokens`` counts the stop token when generation stopped on one
    (as vLLM does); ``text`` never contains it. ``finish_reason`` is ``stop`` or ``length``."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"


def derive_seed(seed: int, prompt_index: int) -> int:
    """The per-prompt seed: a prompt's samples depend on (seed, its index), not on batching or other prompts."""
    digest = hashlib.sha256(f"{seed}:{prompt_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # 63 bits: fits torch and vLLM seeds


def check_request(
    prompts: list[str], n: int, temperature: float, top_p: float, max_tokens: int, seed: int
) -> None:
    """Raise ValueError for a malformed generation request."""
    if not isinstance(prompts, list) or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError("prompts must be a list of non-empty strings")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not 0.0 <= float(temperature):
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if not 0.0 < float(top_p) <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")


class GenerationBackend(ABC):
    """Generates ``n`` completions for each rendered prompt.

    Sampling is exactly the arguments (no top-k, no repetition penalty, none of the model's own generation
    defaults); ``temperature == 0`` is greedy decoding, and then the ``n`` completions are one greedy
    completion repeated. Results are reproducible for a given ``seed``.
    """

    kind: str = ""

    @abstractmethod
    def generate(
        self, prompts: list[str], n: int, *, temperature: float, top_p: float, max_tokens: int, seed: int
    ) -> list[list[Generation]]:
        """One list of ``n`` generations per prompt, in prompt order."""
