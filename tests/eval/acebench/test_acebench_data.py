import json
import shutil

import pytest

from toolcall_repro.eval.acebench.data import (
    CATEGORIES,
    GROUPS,
    ACEBenchDataError,
    data_sha256,
    default_data_dir,
    group_of,
    load_category,
    resolve_categories,
)

# Sizes of ACEBench English at the pinned commit (notes.md).
EXPECTED_SIZES = {"normal": 823, "special": 150, "agent": 50}


def test_every_category_loads_with_answers_and_group_sizes_match(data_dir):
    sizes = dict.fromkeys(GROUPS, 0)
    for category in CATEGORIES:
        entries = load_category(data_dir, category)
        assert all("ground_truth" in e and "function" in e and e["id"].startswith(category) for e in entries)
        if group_of(category) == "agent":
            assert all("mile_stone" in e and "involved_classes" in e for e in entries)
        sizes[group_of(category)] += len(entries)
    assert sizes == EXPECTED_SIZES
    assert len(CATEGORIES) == 17


def test_limit_keeps_the_first_entries(data_dir):
    full = load_category(data_dir, "normal_multi_turn_user_adjust")
    assert [e["id"] for e in load_category(data_dir, "normal_multi_turn_user_adjust", limit=3)] == [
        e["id"] for e in full[:3]
    ]
    with pytest.raises(ACEBenchDataError):
        load_category(data_dir, "normal_atom_bool", limit=0)


def _copy(data_dir, tmp_path, category):
    (tmp_path / "possible_answer").mkdir()
    for rel in (f"data_{category}.json", f"possible_answer/data_{category}.json"):
        shutil.copy(data_dir / rel, tmp_path / rel)
    return tmp_path


def test_misaligned_answers_are_a_clear_error(data_dir, tmp_path):
    d = _copy(data_dir, tmp_path, "special_irrelevant")
    answers = d / "possible_answer" / "data_special_irrelevant.json"
    lines = answers.read_text().splitlines()
    answers.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    with pytest.raises(ACEBenchDataError, match="paired with answer"):
        load_category(d, "special_irrelevant")
    answers.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ACEBenchDataError, match="50 prompts but 49 answers"):
        load_category(d, "special_irrelevant")
    answers.write_text("{not json\n")
    with pytest.raises(ACEBenchDataError, match="not JSON"):
        load_category(d, "special_irrelevant")
    with pytest.raises(ACEBenchDataError, match="missing"):
        load_category(d, "special_incomplete")


def test_data_sha256_changes_with_any_byte(data_dir, tmp_path):
    d = _copy(data_dir, tmp_path, "special_irrelevant")
    before = data_sha256(d, ["special_irrelevant"])
    assert before == data_sha256(data_dir, ["special_irrelevant"])
    path = d / "data_special_irrelevant.json"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[0]["question"] += " "
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert data_sha256(d, ["special_irrelevant"]) != before


def test_resolve_categories():
    assert resolve_categories("all") == list(CATEGORIES)
    assert resolve_categories("agent") == list(GROUPS["agent"])
    assert resolve_categories("special_irrelevant, normal_atom_bool") == [
        "normal_atom_bool",
        "special_irrelevant",
    ]
    with pytest.raises(ACEBenchDataError, match="unknown ACEBench category"):
        resolve_categories("normal_atom_float")


def test_default_data_dir_prefers_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ACEBENCH_DATA_DIR", str(tmp_path))
    assert default_data_dir("/elsewhere") == tmp_path
    monkeypatch.delenv("ACEBENCH_DATA_DIR")
    assert default_data_dir("/x/data_en").as_posix() == "/x/data_en"  # no built-in location
