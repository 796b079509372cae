"""The run fingerprint both engines resume by: a checkpoint continues a run only if it is the same run.

Same run = same config, seed, prompts and base weights. The local engine's rule (engines/local/grpo.py
`fingerprint`), shared here so that verl checkpoints follow it too: for a directory holding only
`model.safetensors` and `config.json` (the local engine's models) the digest is the local engine's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

CHUNK = 1 << 24  # 16 MiB: hash multi-GB shards without reading them into memory


def weight_files(base_dir: str | Path) -> list[Path]:
    """The files that define a model's weights and architecture, in a fixed order (those present)."""
    base = Path(base_dir)
    names = ["model.safetensors"]
    names += sorted(p.name for p in base.glob("model-*-of-*.safetensors"))
    names += ["model.safetensors.index.json", "config.json"]
    return [base / n for n in names if (base / n).is_file()]


def file_digest(path: str | Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.digest()


def run_fingerprint(
    config: object, seed: int, prompts: Iterable[tuple[str, str]], base_dir: str | Path
) -> str:
    """sha256 over (config, seed), every (prompt id, prompt text) in order, and the base weights."""
    h = hashlib.sha256(json.dumps([config, seed], sort_keys=True, default=str).encode())
    for prompt_id, text in prompts:
        h.update(str(prompt_id).encode() + b"\0" + str(text).encode())
    for path in weight_files(base_dir):
        h.update(file_digest(path))
    return h.hexdigest()
