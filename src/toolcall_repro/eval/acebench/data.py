"""ACEBench English data: the 17 categories, their groups, and loading a category joined with its answers.

Layout (upstream, pinned commit in data/acebench/COMMIT): `<data_dir>/data_<category>.json` holds the
prompts (JSONL: id, question, function, time|profile, and initial_config/involved_classes for agent
categories); `<data_dir>/possible_answer/data_<category>.json` holds `ground_truth` (and `mile_stone` for
agent categories) in the same order.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from toolcall_repro.io import iter_jsonl

NORMAL_CATEGORIES = (
    "normal_single_turn_single_function",
    "normal_single_turn_parallel_function",
    "normal_multi_turn_user_adjust",
    "normal_multi_turn_user_switch",
    "normal_similar_api",
    "normal_preference",
    "normal_atom_bool",
    "normal_atom_enum",
    "normal_atom_number",
    "normal_atom_list",
    "normal_atom_object_deep",
    "normal_atom_object_short",
)
SPECIAL_CATEGORIES = ("special_incomplete", "special_error_param", "special_irrelevant")
AGENT_CATEGORIES = ("agent_multi_step", "agent_multi_turn")
CATEGORIES = NORMAL_CATEGORIES + SPECIAL_CATEGORIES + AGENT_CATEGORIES
GROUPS = {"normal": NORMAL_CATEGORIES, "special": SPECIAL_CATEGORIES, "agent": AGENT_CATEGORIES}

DATA_DIR_ENV = "ACEBENCH_DATA_DIR"


class ACEBenchDataError(ValueError):
    """The data folder is missing a file, or prompts and answers do not line up."""


def group_of(category: str) -> str:
    for group, members in GROUPS.items():
        if category in members:
            return group
    raise ACEBenchDataError(f"unknown ACEBench category {category!r}; known: {', '.join(CATEGORIES)}")


def is_normal_multi_turn(category: str) -> bool:
    return category.startswith("normal_multi_turn")


def resolve_categories(spec: str | list[str]) -> list[str]:
    """`all`, a group name (`normal`, `special`, `agent`) or a comma-separated list, in canonical order."""
    items = spec if isinstance(spec, list) else [s.strip() for s in spec.split(",") if s.strip()]
    chosen: set[str] = set()
    for item in items:
        if item == "all":
            chosen.update(CATEGORIES)
        elif item in GROUPS:
            chosen.update(GROUPS[item])
        else:
            group_of(item)  # raises on an unknown name
            chosen.add(item)
    if not chosen:
        raise ACEBenchDataError(f"no ACEBench category selected by {spec!r}")
    return [c for c in CATEGORIES if c in chosen]


def default_data_dir(fallback: str | Path) -> Path:
    """$ACEBENCH_DATA_DIR if set, else `fallback` (the package itself knows no data location)."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else Path(fallback)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise ACEBenchDataError(f"missing ACEBench file {path}")
    rows = []
    for lineno, row in iter_jsonl(path, error=ACEBenchDataError):
        if "id" not in row:
            raise ACEBenchDataError(f"{path}:{lineno}: a row must be an object with an id")
        rows.append(row)
    return rows


def category_files(data_dir: str | Path, category: str) -> tuple[Path, Path]:
    group_of(category)
    data_dir = Path(data_dir)
    return data_dir / f"data_{category}.json", data_dir / "possible_answer" / f"data_{category}.json"


def load_category(data_dir: str | Path, category: str, limit: int | None = None) -> list[dict]:
    """Prompt rows joined with their answers (`ground_truth`, and `mile_stone` for agent rows).

    `limit` keeps the first N prompts (for normal multi-turn categories, the first N lines: a
    conversation cut short is scored on the lines it has).
    """
    prompt_path, answer_path = category_files(data_dir, category)
    prompts, answers = _read_jsonl(prompt_path), _read_jsonl(answer_path)
    if len(prompts) != len(answers):
        raise ACEBenchDataError(f"{category}: {len(prompts)} prompts but {len(answers)} answers")
    entries = []
    for prompt, answer in zip(prompts, answers, strict=True):
        if prompt["id"] != answer["id"]:
            raise ACEBenchDataError(f"{category}: prompt {prompt['id']} is paired with answer {answer['id']}")
        if "ground_truth" not in answer:
            raise ACEBenchDataError(f"{category}: answer {answer['id']} has no ground_truth")
        entry = dict(prompt)
        entry["ground_truth"] = answer["ground_truth"]
        if "mile_stone" in answer:
            entry["mile_stone"] = answer["mile_stone"]
        entries.append(entry)
    if limit is not None:
        if limit < 1:
            raise ACEBenchDataError(f"limit must be positive, got {limit}")
        entries = entries[:limit]
    return entries


def data_sha256(data_dir: str | Path, categories: list[str] | tuple[str, ...] = CATEGORIES) -> str:
    """One sha256 over the prompt and answer files of the given categories (relative names and bytes)."""
    h = hashlib.sha256()
    data_dir = Path(data_dir)
    for category in categories:
        for path in category_files(data_dir, category):
            if not path.is_file():
                raise ACEBenchDataError(f"missing ACEBench file {path}")
            h.update(f"{path.relative_to(data_dir).as_posix()}\0".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()
