"""Training checkpoints: model, optimizer, torch RNG, and a JSON state (step, epoch, dataloader position,
StreakFilter state, cumulative times, the metrics and curve lines so far). Written to a dot-tmp
directory and renamed, so a kill -9 never leaves a checkpoint that looks complete but is not.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

from toolcall_repro.engines.local.model import replace_dir, tmp_dir_for

STEP_DIR = re.compile(r"^step_(\d+)$")
STATE_FILE = "state.json"


def checkpoint_dirs(root: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under root, oldest first (a directory counts once its state.json exists)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = STEP_DIR.match(p.name)
        if m and p.is_dir() and (p / STATE_FILE).is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(root: str | Path) -> Path | None:
    dirs = checkpoint_dirs(root)
    return dirs[-1][1] if dirs else None


def save_checkpoint(
    root: str | Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict,
    keep: int = 2,
) -> Path:
    """Write checkpoints/step_<step>/ atomically and keep only the newest `keep` checkpoints."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".step_*.tmp*"):  # left by a job killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    final = root / f"step_{step}"
    tmp = tmp_dir_for(final)
    torch.save(model.state_dict(), tmp / "model.pt")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
    (tmp / STATE_FILE).write_text(json.dumps(state, sort_keys=True))
    replace_dir(tmp, final)
    if keep > 0:
        for _, old in checkpoint_dirs(root)[:-keep]:
            shutil.rmtree(old)
    return final


def checkpoint_fingerprint(path: str | Path) -> str | None:
    """The run fingerprint a checkpoint was written with (None if it has none)."""
    return json.loads((Path(path) / STATE_FILE).read_text()).get("fingerprint")


def load_checkpoint(path: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Restore model, optimizer and RNG in place; return the JSON state."""
    path = Path(path)
    model.load_state_dict(torch.load(path / "model.pt", weights_only=True))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    torch.set_rng_state(torch.load(path / "rng.pt", weights_only=True)["torch"])
    return json.loads((path / STATE_FILE).read_text())
