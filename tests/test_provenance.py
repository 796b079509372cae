import io
import json
import tarfile

import pytest

from toolcall_repro import archive as archives
from toolcall_repro import cli, provenance


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "results" / "demo"
    (run / "tables").mkdir(parents=True)
    (run / "tables" / "t.csv").write_text("a,b\n1,2\n")
    (run / "manifests" / "rule_a").mkdir(parents=True)
    (run / "manifests" / "rule_a" / "x.json").write_text(
        json.dumps({"rule": "rule_a", "wall_clock_s": 1.5, "cpu_s": 1.0, "device_s": 1.0})
    )
    (run / "archive").mkdir()
    (run / "archive" / "old.tar.gz").write_bytes(b"not packed again")
    return run


def test_config_hash_ignores_key_order():
    assert provenance.config_hash({"a": 1, "b": [1, 2]}) == provenance.config_hash({"b": [1, 2], "a": 1})
    assert provenance.config_hash({"a": 1}) != provenance.config_hash({"a": 2})


def test_archive_round_trips_and_names_a_flipped_byte(run_dir, tmp_path):
    archive = tmp_path / "demo.tar.gz"
    extra = tmp_path / "config.yaml"
    extra.write_text("run_id: demo\n")
    info = archives.pack_archive(run_dir, archive, [extra])
    assert info["packed_files"] == 3  # table, manifest, extra config; the archive/ folder is left out
    assert archives.verify_archive(archive) == []
    assert cli.main(["verify", str(archive)]) == 0

    # Rewrite the archive with one byte of one member flipped, keeping its SHA256SUMS as it was.
    tampered = tmp_path / "tampered.tar.gz"
    with tarfile.open(archive) as src, tarfile.open(tampered, "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read()
            if m.name.endswith("tables/t.csv"):
                data = bytes([data[0] ^ 0x01]) + data[1:]
            dst.addfile(m, io.BytesIO(data))
    problems = archives.verify_archive(tampered)
    assert problems == ["demo/tables/t.csv: checksum differs"]
    assert cli.main(["verify", str(tampered)]) == 1


def test_extra_files_with_the_same_name_do_not_collide(run_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for rel in ["config/config.yaml", ".test/config.yaml"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"# {rel}\n")
    archive = tmp_path / "demo-1.tar.gz"
    archives.pack_archive(run_dir, archive, ["config/config.yaml", ".test/config.yaml"])
    assert archives.verify_archive(archive) == []
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "demo-1/extra/config/config.yaml" in names and "demo-1/extra/.test/config.yaml" in names


def test_run_record_sums_manifests(run_dir):
    rec = provenance.run_record(run_dir, {"run_id": "demo"})
    assert rec["jobs"] == 1 and rec["wall_clock_s"] == 1.5
    assert rec["per_rule"]["rule_a"]["jobs"] == 1


def test_model_sha256_is_the_folder_s_files_and_names_not_its_hidden_records(tmp_path):
    import hashlib

    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "w.bin").write_bytes(b"\x01\x02")
    first = provenance.model_sha256(model)

    def sha(b):
        return hashlib.sha256(b).hexdigest()

    # by hand: each file as "<relative posix name>\0<its sha256>\n", in name order
    by_hand = hashlib.sha256(f"config.json\0{sha(b'{}')}\nsub/w.bin\0{sha(bytes([1, 2]))}\n".encode()).hexdigest()
    assert first == by_hand
    # Snakemake's timestamp and the Hub's download records (they hold times) leave it as it was
    (model / ".snakemake_timestamp").write_text("")
    (model / ".cache" / "huggingface").mkdir(parents=True)
    (model / ".cache" / "huggingface" / "w.bin.metadata").write_text("etag\n1733270400.0\n")
    assert provenance.model_sha256(model) == first
    # a byte or a name moves it
    (model / "sub" / "w.bin").write_bytes(b"\x01\x03")
    assert provenance.model_sha256(model) != first
    (model / "sub" / "w.bin").write_bytes(b"\x01\x02")
    (model / "sub" / "w.bin").rename(model / "sub" / "v.bin")
    assert provenance.model_sha256(model) != first
    assert provenance.model_sha256(tmp_path / "Qwen" / "Qwen3-4B") is None  # not a folder: a hub id
