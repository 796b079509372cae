"""The reserve: samples that the tiny model's warm start never sees, so held-out accuracy stays honest.

The filters carve their held-out splits after the warm-started model has scored every sample, so the
held-out ids cannot be known when the warm start runs. Instead a seeded hash decides, before anything is
trained, whether a sample is *reserved*: the warm start skips reserved samples (its tokenizer and its
supervised steps alike), and every filter chain draws its held-out split only from reserved survivors.

The hash is over the sample's *conversation*, not its id: ToolACE dialogues and LoopTool trajectories
give several samples whose histories contain each other's answers (the warm start also supervises the
assistant turns of a history), so all prefixes of one conversation, i.e. samples with the same tools
and the same first user message, fall on the same side. Exact re-posts across rows do too. The decision
depends on nothing but (conversation, fraction, seed), so both stages agree without passing files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from toolcall_repro.data.schema import Sample


def conversation_key(sample: Sample) -> str:
    """The tools and the first user message (the id when a sample has no user message)."""
    first_user = next((m["content"] for m in json.loads(sample.messages) if m["role"] == "user"), None)
    if first_user is None:
        return f"id:{sample.id}"
    return json.dumps([sample.tools, first_user], ensure_ascii=False)


def reserve_score(key: str, seed: int) -> float:
    """A uniform number in [0, 1) from sha256 of (seed, key): stable across runs, machines and Python."""
    digest = hashlib.sha256(f"reserve:{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_reserved(sample: Sample, fraction: float, seed: int) -> bool:
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"reserve fraction must be in [0, 1), got {fraction!r}")
    return reserve_score(conversation_key(sample), seed) < fraction


def partition(samples: Iterable[Sample], fraction: float, seed: int) -> tuple[list[Sample], list[Sample]]:
    """(open, reserved), each in input order."""
    open_, reserved = [], []
    for s in samples:
        (reserved if is_reserved(s, fraction, seed) else open_).append(s)
    return open_, reserved
