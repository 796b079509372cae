"""Synthetic ACEBench twins: ACEBench's file schema, every category, ground truth perfect under both checkers."""

import json

import pytest

from toolcall_repro.cli import main
from toolcall_repro.eval.acebench.data import CATEGORIES, load_category
from toolcall_repro.eval.acebench.runner import run_categories
from toolcall_repro.eval.acebench.scoring import ground_truth_outputs, score_category
from toolcall_repro.eval.acebench.simulator import ScriptedUser
from toolcall_repro.eval.acebench.synthetic import synthesize


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    out = tmp_path_factory.mktemp("ace") / "data_en"
    assert main(["stage", "synthesize_acebench", "--out", f"data={out}", "--config", '{"synthetic": {"rows": 4}}',
                 "--seed", "data=7"]) == 0  # fmt: skip
    return out


def test_every_category_is_written_in_acebench_layout(twins):
    source = json.loads((twins / "source.json").read_text())
    assert source["kind"] == "synthetic" and source["seed"] == 7
    for category in CATEGORIES:
        entries = load_category(twins, category)  # the loader of the real data: ids pair, answers present
        assert entries and all(e["id"].startswith(category) for e in entries)
        assert all(isinstance(e["function"], list) and e["function"] for e in entries)
    turns = load_category(twins, "normal_multi_turn_user_adjust")
    assert [e["id"] for e in turns[:2]] == [
        "normal_multi_turn_user_adjust_0_0",
        "normal_multi_turn_user_adjust_0_1",
    ]
    assert turns[1]["question"].startswith(turns[0]["question"])  # the second turn carries the first


def test_synthesize_and_download_jobs_write_the_same_folders(twins, tmp_path, run_stage):
    """synthesize_acebench and download_acebench through the job entry: rows and seed (repo and commit)
    from the spec, the same folder as the hand run's (`twins`), the manifest recording the spec."""
    out = tmp_path / "synthetic"
    manifest = run_stage(
        "synthesize_acebench", input={},
        output={"data": str(out), "manifest": str(tmp_path / "manifests" / "synthesize_acebench" / "all.json")},
        config={"synthetic": {"rows": 4, "seed": 7}}, seeds={"data": 7},
    )  # fmt: skip
    files = sorted(p.relative_to(twins) for p in twins.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    for name in files:
        assert (out / name).read_bytes() == (twins / name).read_bytes()
    assert manifest["config"] == {"synthetic": {"rows": 4, "seed": 7}} and manifest["seeds"] == {"data": 7}
    assert not (tmp_path / "synthetic.partial").exists()

    import tarfile

    commit = "e6db74b735ead22c24f27367606a9408573b848f"
    (tmp_path / "repo" / "archive").mkdir(parents=True)
    with tarfile.open(tmp_path / "repo" / "archive" / f"{commit}.tar.gz", "w:gz") as tar:
        tar.add(twins, arcname=f"ACEBench-{commit}/data_all/data_en")
    config = {"repo": (tmp_path / "repo").as_uri(), "commit": commit}
    data = tmp_path / "download" / "data_en"
    manifest = run_stage(
        "download_acebench", input={},
        output={"data": str(data), "manifest": str(tmp_path / "manifests" / "download_acebench" / "all.json")},
        config=config, seeds={},
    )  # fmt: skip
    assert (data / "COMMIT").read_text().split()[0] == commit and manifest["config"] == config
    assert load_category(data, "special_incomplete") == load_category(twins, "special_incomplete")


@pytest.mark.parametrize("category", [c for c in CATEGORIES if not c.startswith("agent")])
def test_ground_truth_scores_100_percent_under_both_checkers(twins, category):
    entries = load_category(twins, category)
    outputs = ground_truth_outputs(category, entries)
    for upstream in (True, False):
        score = score_category(category, entries, outputs, upstream=upstream)
        assert score.accuracy == 1.0, (upstream, score.entries)


def test_agent_milestones_replay_to_the_ground_truth_end_state(twins, oracle):
    categories = ["agent_multi_step", "agent_multi_turn"]
    scores, _, _ = run_categories(
        twins, categories, oracle(twins, categories, None), ScriptedUser(), "python"
    )
    for category in categories:
        assert scores[category]["accuracy"] == 1.0 and scores[category]["process_accuracy"] == 1.0


def test_wrong_answers_fail_and_the_data_is_reproducible(twins, tmp_path):
    entries = load_category(twins, "normal_atom_enum")
    score = score_category("normal_atom_enum", entries, ["[no_such_tool()]"] * len(entries))
    assert score.accuracy == 0.0
    special = load_category(twins, "special_irrelevant")
    assert score_category("special_irrelevant", special, ["[get_weather(city='oslo')]"] * 4).accuracy == 0.0
    synthesize(tmp_path / "a", 4, 7)
    for category in CATEGORIES[:3]:
        name = f"data_{category}.json"
        assert (tmp_path / "a" / name).read_bytes() == (twins / name).read_bytes()


def test_download_unpacks_the_english_data_of_a_github_archive(twins, tmp_path):
    import tarfile

    from toolcall_repro.eval.acebench.download import archive_url, download_acebench

    commit = "e6db74b735ead22c24f27367606a9408573b848f"
    root = tmp_path / "repo" / "archive"
    root.mkdir(parents=True)
    with tarfile.open(root / f"{commit}.tar.gz", "w:gz") as tar:  # GitHub's layout: <name>-<commit>/...
        tar.add(twins, arcname=f"ACEBench-{commit}/data_all/data_en")
        tar.add(twins / "source.json", arcname=f"ACEBench-{commit}/README.md")
    repo = (tmp_path / "repo").as_uri()
    assert archive_url("https://github.com/o/ACEBench.git", commit).endswith(
        f"o/ACEBench/archive/{commit}.tar.gz"
    )
    record = download_acebench(repo, commit, tmp_path / "out" / "data_en")
    out = tmp_path / "out" / "data_en"
    assert (out / "COMMIT").read_text().split()[0] == commit and len(record["archive_sha256"]) == 64
    assert load_category(out, "special_incomplete") == load_category(twins, "special_incomplete")
    with pytest.raises(ValueError, match="40-hex"):
        archive_url(repo, "main")
    with pytest.raises(FileExistsError):
        download_acebench(repo, commit, out)
