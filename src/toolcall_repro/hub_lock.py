"""The hub lock: every hub revision a config names, resolved to a commit sha by one command.

`toolcall-repro lock-hub --configfile config/paper.yaml`, run on the submit host with network, asks the
Hugging Face Hub (`huggingface_hub.HfApi.model_info` / `dataset_info`) for each revision the DAG reads
(`preflight.hub_revisions`: the data sources, the models, lm-eval's datasets) and writes
`config/paper.hub-lock.yaml` beside the config: a config overlay with each revision's commit sha, each
data source's id as the hub now reports it (a moved repository is followed, and said), and under
`hub_lock` what was asked and what answered (repository type, the id asked for, the revision asked for,
gated or not). Commit it, and give it after the config: `--configfile config/paper.yaml
config/paper.hub-lock.yaml`; the dry run then finds no branch name left (`preflight.pin_problems`).

A gated repository (xLAM) needs its licence accepted on the hub and a token (HF_TOKEN, or `hf auth
login`): without one the hub answers 401 and the command stops with one line naming the repository and
its page; the lock records `gated`, so `toolcall-repro plan` can say the same before any job, offline.
The command writes the lock whole or not at all; run twice against an unchanged hub it writes the same
bytes. Written by hand: no library resolves a config's revisions; huggingface_hub answers each one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

__all__ = ["Entry", "Pin", "entries", "gated_without_token", "lock_path", "main", "resolve", "write_lock"]

HUB = "https://huggingface.co"
LOCK_KEY = "hub_lock"


@dataclass(frozen=True)
class Entry:
    """One revision the config names: its key, the repository's type and id, the revision asked for."""

    key: str
    repo_type: str  # model | dataset
    repo_id: str
    revision: str


@dataclass(frozen=True)
class Pin:
    entry: Entry
    sha: str
    hub_id: str  # as the hub reports it now (differs from entry.repo_id for a moved repository)
    gated: bool

    @property
    def moved(self) -> bool:
        return self.hub_id != self.entry.repo_id


def page(repo_type: str, repo_id: str) -> str:
    return f"{HUB}/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}"


def lock_path(configfile: str | Path) -> Path:
    """config/paper.yaml -> config/paper.hub-lock.yaml"""
    p = Path(configfile)
    return p.with_name(f"{p.stem}.hub-lock.yaml")


def entries(config: Mapping) -> list[Entry]:
    """Every hub revision the config's DAG reads (preflight.hub_revisions), with its repository."""
    from toolcall_repro.preflight import hub_revisions

    out = []
    for key, rev in hub_revisions(config).items():
        parts = key.split(".")
        if key.startswith("data.sources."):
            name = parts[2]
            out.append(Entry(key, "dataset", config["data"]["sources"][name]["hub_id"], rev or "main"))
        elif key.startswith("model.revisions."):
            out.append(Entry(key, "model", key.removeprefix("model.revisions."), rev or "main"))
        elif key.startswith("evaluate.general.revisions."):
            out.append(Entry(key, "dataset", key.removeprefix("evaluate.general.revisions."), rev or "main"))
        else:  # pragma: no cover - hub_revisions names no other kind
            raise ValueError(f"{key}: no repository known for this key")
    return out


def resolve(api, wanted: Sequence[Entry]) -> tuple[list[Pin], list[str]]:
    """Ask the hub for each entry's commit; (pins, one line per repository that did not answer)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    pins, problems = [], []
    for e in wanted:
        info_of = api.model_info if e.repo_type == "model" else api.dataset_info
        try:
            info = info_of(e.repo_id, revision=e.revision)
        except GatedRepoError:
            problems.append(
                f"{e.key}: {e.repo_type} {e.repo_id} is gated: accept its terms at {page(e.repo_type, e.repo_id)},"
                " then give a token (HF_TOKEN, or `hf auth login`) and run again"
            )
            continue
        except RevisionNotFoundError:
            problems.append(f"{e.key}: {e.repo_type} {e.repo_id} has no revision {e.revision!r}")
            continue
        except RepositoryNotFoundError:
            problems.append(
                f"{e.key}: {e.repo_type} {e.repo_id} is not on the hub (a typo, a private repository, or one"
                f" that moved without a redirect): see {page(e.repo_type, e.repo_id)}"
            )
            continue
        pins.append(Pin(e, str(info.sha), str(info.id), bool(getattr(info, "gated", False))))
    return pins, problems


def overlay(pins: Sequence[Pin]) -> dict:
    """The config overlay of the pins: revisions (and the data sources' ids) where the config reads them."""
    out: dict = {}
    for p in pins:
        e = p.entry
        if e.key.startswith("data.sources."):
            name = e.key.split(".")[2]
            out.setdefault("data", {}).setdefault("sources", {})[name] = {"hub_id": p.hub_id, "revision": p.sha}
        elif e.key.startswith("model.revisions."):
            out.setdefault("model", {}).setdefault("revisions", {})[e.repo_id] = p.sha
        else:
            out.setdefault("evaluate", {}).setdefault("general", {}).setdefault("revisions", {})[e.repo_id] = p.sha
    out[LOCK_KEY] = {
        p.entry.key: {
            "type": p.entry.repo_type,
            "asked": f"{p.entry.repo_id}@{p.entry.revision}",
            "hub_id": p.hub_id,
            "sha": p.sha,
            "gated": p.gated,
        }
        for p in pins
    }
    return out


def write_lock(path: str | Path, pins: Sequence[Pin], configfile: str) -> Path:
    from toolcall_repro.io import atomic_write_text

    head = (
        f"# The hub lock of {configfile}: written by `toolcall-repro lock-hub --configfile {configfile}`"
        " (toolcall_repro.hub_lock).\n"
        f"# Give it after the config: --configfile {configfile} {Path(path).as_posix()}. Commit it; rerun the"
        " command to move the pins.\n"
    )
    atomic_write_text(Path(path), head + yaml.safe_dump(overlay(pins), sort_keys=True, width=1000))
    return Path(path)


def gated_without_token(config: Mapping, token: str | None = ...) -> list[str]:
    """One line per gated repository the lock records while no token is at hand (plan, download rules)."""
    if token is ...:
        from huggingface_hub import get_token

        token = get_token()
    if token:
        return []
    return [
        f"{key}: {rec['type']} {rec['hub_id']} is gated and no Hugging Face token is set: accept its terms at "
        f"{page(rec['type'], rec['hub_id'])}, then set HF_TOKEN (or `hf auth login`) on the submit host"
        for key, rec in sorted((config.get(LOCK_KEY) or {}).items())
        if rec.get("gated")
    ]


def main(argv: list[str] | None = None, api=None) -> int:
    p = argparse.ArgumentParser(prog="toolcall-repro lock-hub", description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", default="config/paper.yaml")
    p.add_argument("--out", help="the lock file (default: <config>.hub-lock.yaml beside the config)")
    a = p.parse_args(argv)
    from toolcall_repro.configarg import merged_config

    config = merged_config([a.configfile])
    wanted = entries(config)
    if not wanted:
        print(f"{a.configfile}: reads no hub revision (data.mode synthetic, no hub model): nothing to lock")
        return 0
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    pins, problems = resolve(api, wanted)
    if problems:
        print(f"toolcall-repro lock-hub: nothing written; {len(problems)} of {len(wanted)} did not resolve:",
              file=sys.stderr)  # fmt: skip
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    out = write_lock(a.out or lock_path(a.configfile), pins, a.configfile)
    for pin in pins:
        e = pin.entry
        moved = f" (moved: the hub now calls it {pin.hub_id})" if pin.moved else ""
        print(f"{e.key}: {e.repo_id}@{e.revision} -> {pin.sha}{moved}{' [gated]' if pin.gated else ''}")
    print(f"wrote {out}: use --configfile {a.configfile} {out}")
    return 0
