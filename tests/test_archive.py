import json
import subprocess
import tarfile

import pytest

from toolcall_repro import archive, cli, provenance

WEIGHTS = "model.safetensors"


@pytest.fixture
def run_dir(tmp_path):
    """A results tree with every part the policy tells apart: resume state, final and base weights, a hub
    snapshot, an in-tree archive of an older layout, and the results a reader needs."""
    run = tmp_path / "results" / "demo"
    files = {
        "tables/csv/t.csv": "a,b\n1,2\n",
        "manifests/train_grpo/single_turn-vanilla.json": "{}",
        "train/single_turn/vanilla/summary.json": "{}",
        "train/single_turn/vanilla/metrics.jsonl": "{}\n",
        f"train/single_turn/vanilla/final/{WEIGHTS}": "w" * 300,
        "train/single_turn/vanilla/final/config.json": "{}",
        f"train/single_turn/vanilla/checkpoints/step_4/{WEIGHTS}": "c" * 500,
        "train/single_turn/vanilla/checkpoints/step_4/optimizer.pt": "o" * 900,
        f"train/multi_turn/efficient/checkpoints/step_8/{WEIGHTS}": "c" * 500,
        f"models/base/{WEIGHTS}": "b" * 200,
        f"models/hub/Qwen--Qwen3-4B/{WEIGHTS}": "h" * 700,
        "archive/demo.tar.gz": "an older archive, inside the tree",
    }
    for rel, text in files.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text(text)
    return run


def names_in(path):
    with tarfile.open(path) as tar:
        return [n.split("/", 1)[1] for n in tar.getnames()]


def test_part_of_tells_the_parts_apart():
    assert archive.part_of("train/single_turn/vanilla/checkpoints/step_4/x") == (
        "resume checkpoints",
        "train/single_turn/vanilla/checkpoints",
    )
    assert archive.part_of("train/format_multi/vanilla/final/x") == (
        "final weights",
        "train/format_multi/vanilla/final",
    )
    assert archive.part_of("train/single_turn/vanilla/final.json")[0] == "results"  # a file, not the folder
    stale = "train/multi_turn/efficient/checkpoints.stale-0123456789ab-1"  # set aside by a verl retry
    assert archive.part_of(f"{stale}/global_step_2/actor/x.pt") == ("resume checkpoints", stale)
    assert archive.part_of("models/hub/a--b/x") == ("hub snapshots", "models/hub/a--b")
    assert archive.part_of("eval/bfcl/base/default/summary.json") == ("results", "")


@pytest.mark.parametrize("weights", ["final", "none"])
def test_policy_leaves_resume_state_out_and_weights_per_option(run_dir, tmp_path, weights):
    out = tmp_path / f"demo-{weights}.tar.gz"
    info = archive.pack_archive(run_dir, out, weights=weights)
    names = names_in(out)
    assert not any("/checkpoints/" in n for n in names)
    assert not any(n.startswith(("models/hub/", "archive/")) for n in names)
    assert "tables/csv/t.csv" in names and "train/single_turn/vanilla/summary.json" in names
    has_weights = f"train/single_turn/vanilla/final/{WEIGHTS}" in names
    assert has_weights == (weights == "final") == (f"models/base/{WEIGHTS}" in names)
    assert archive.verify_archive(out) == []

    # The archive's own manifest names every folder left out, with its size and why.
    with tarfile.open(out) as tar:
        manifest = json.loads(tar.extractfile(f"demo-{weights}/{archive.ARCHIVE_MANIFEST}").read())
    assert (
        manifest["weights"] == weights
        and manifest["run_id"] == "demo"
        and manifest["left_out"] == info["left_out"]
    )
    left = {lo["path"]: lo for lo in manifest["left_out"]}
    assert left["train/single_turn/vanilla/checkpoints"]["files"] == 2
    assert left["train/single_turn/vanilla/checkpoints"]["bytes"] == 1400
    assert "resume" in left["train/multi_turn/efficient/checkpoints"]["reason"]
    assert "models/hub/Qwen--Qwen3-4B" in left and "archive" in left
    assert ("train/single_turn/vanilla/final" in left) == (weights == "none") == ("models/base" in left)
    assert manifest["parts"]["resume checkpoints"] == {
        "archived": False,
        "files": 3,
        "bytes": 1900,
        "reason": archive.PARTS["resume checkpoints"].reason,
    }
    assert manifest["parts"]["final weights"]["archived"] == (weights == "final")


def test_size_report_names_every_part(run_dir, tmp_path):
    info = archive.pack_archive(run_dir, tmp_path / "demo.tar.gz", weights="none")
    report = archive.size_report(info)
    assert report.splitlines()[0].startswith("demo.tar.gz: ")
    rows = {line.split("  ")[1].strip(): line for line in report.splitlines()[2:]}
    assert set(rows) == {
        "results",
        "resume checkpoints",
        "final weights",
        "base model",
        "hub snapshots",
        "archives",
    }
    assert "left out" in rows["resume checkpoints"] and "resume state" in rows["resume checkpoints"]
    assert "left out" not in rows["results"]


def test_the_cli_prints_the_size_by_part(run_dir, tmp_path, capsys):
    out = tmp_path / "demo.tar.gz"
    assert (
        archive.main(["pack", "--run-dir", str(run_dir), "--out", str(out), "--weights", "none"]) == 0
    )
    printed = capsys.readouterr().out
    assert "resume checkpoints" in printed and "left out" in printed
    assert cli.main(["verify", str(out)]) == 0
    with pytest.raises(SystemExit):
        archive.main(["pack", "--run-dir", str(run_dir), "--out", str(out), "--weights", "some"])


def test_same_tree_gives_the_same_bytes(run_dir, tmp_path):
    a, b = tmp_path / "x" / "demo.tar.gz", tmp_path / "y" / "demo.tar.gz"
    archive.pack_archive(run_dir, a)
    archive.pack_archive(run_dir, b)
    assert a.read_bytes() == b.read_bytes()


def test_members_lie_under_the_archive_name_so_two_extract_side_by_side(run_dir, tmp_path):
    out = tmp_path / "demo-abc-def.tar.gz"
    archive.pack_archive(run_dir, out)
    with tarfile.open(out) as tar:
        assert {n.split("/")[0] for n in tar.getnames()} == {"demo-abc-def"}


def test_iter_members_streams_only_the_wanted(run_dir, tmp_path):
    out = tmp_path / "demo.tar.gz"
    archive.pack_archive(run_dir, out)
    got = dict(archive.iter_members(out, lambda rel: rel.endswith(".csv")))
    assert got == {"tables/csv/t.csv": b"a,b\n1,2\n"}


def test_names_of_two_runs_of_one_config_after_a_change():
    cfg = {"run_id": "embedded", "train": {"variants": {"efficient": {"downsample": {"m": 4}}}}}
    changed = json.loads(json.dumps(cfg))
    changed["train"]["variants"]["efficient"]["downsample"]["m"] = 5
    reordered = {"train": cfg["train"], "run_id": "embedded"}

    def name(c):
        return archive.archive_name(c["run_id"], "0123456789", provenance.config_hash(c))

    assert name(cfg) == name(reordered)  # the same config gives the same name
    assert name(cfg) != name(changed)
    for n in (name(cfg), name(changed)):
        assert n.startswith("embedded-0123456789-") and n.endswith(".tar.gz")
    assert name(cfg).removesuffix(".tar.gz").split("-")[-1] == provenance.config_hash(cfg)[:10]


def test_code_tag_is_the_commit_plus_a_hash_of_uncommitted_changes(tmp_path):
    assert archive.code_tag(tmp_path) == "nogit"

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)  # fmt: skip

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-q", "-m", "c")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert archive.code_tag(tmp_path) == commit[:10]
    (tmp_path / "code.py").write_text("x = 2\n")
    dirty = archive.code_tag(tmp_path)
    assert dirty.startswith(commit[:10] + "-dirty") and dirty == archive.code_tag(tmp_path)
    (tmp_path / "code.py").write_text("x = 3\n")
    assert archive.code_tag(tmp_path) != dirty  # another edit, another name


def test_a_symlink_in_the_tree_is_packed_as_the_file_it_names(run_dir, tmp_path):
    (run_dir / "tables" / "link.csv").symlink_to(run_dir / "tables" / "csv" / "t.csv")
    out = tmp_path / "demo.tar.gz"
    archive.pack_archive(run_dir, out)
    assert archive.verify_archive(out) == []
    assert dict(archive.iter_members(out, lambda rel: rel == "tables/link.csv")) == {
        "tables/link.csv": b"a,b\n1,2\n"
    }


def test_compressed_sizes_by_part_add_up_to_the_archive(run_dir, tmp_path):
    extra = tmp_path / "config.yaml"
    extra.write_text("run_id: demo\n")
    info = archive.pack_archive(run_dir, tmp_path / "demo.tar.gz", [extra])
    packed = {k: p["compressed_bytes"] for k, p in info["parts"].items() if p["archived"]}
    assert set(packed) == {"results", "final weights", "base model", "config files"}
    assert all(n > 0 for n in packed.values())
    # The rest is the gzip header and trailer, ARCHIVE.json, SHA256SUMS and the tar end blocks.
    assert 0 < info["archive_bytes"] - sum(packed.values()) < 2000
