"""Download: the `datasets` read, the JSONL write and the checksums, on a local dataset (no network here)."""

from __future__ import annotations

import json
from pathlib import Path

from toolcall_repro.data.download import download, sidecar_path
from toolcall_repro.data.schema import iter_jsonl
from toolcall_repro.data.sources import load_rows
from toolcall_repro.provenance import sha256_file

FIXTURES = Path(__file__).parent / "fixtures"


def test_local_dataset_is_written_in_its_own_schema_with_checksums(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "tooln1.json"
    rows = [json.loads(line) for line in (FIXTURES / "tooln1.jsonl").read_text().splitlines()[:2]]
    for row in rows:  # one column type for the whole file, as a real export has
        row["tools"] = row["tools"] if isinstance(row["tools"], str) else json.dumps(row["tools"])
        row["answer"] = row["answer"] if isinstance(row["answer"], str) else json.dumps(row["answer"])
        row.setdefault("raw_system", "")
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "raw" / "tooln1.jsonl"
    record = download("tooln1", "json", None, "train", out, data_files=[str(src)])

    assert record["rows"] == 2 and set(record["columns"]) == {
        "tools",
        "conversations",
        "answer",
        "raw_system",
    }
    assert record["out_sha256"] == sha256_file(out)
    assert record["files_read_sha256"] == {str(src): sha256_file(src)}
    assert json.loads(sidecar_path(out).read_text()) == record
    result = load_rows("tooln1", iter_jsonl(out))
    assert [s.id for s in result.samples] == ["tooln1:0", "tooln1:1"] and not result.rejects


def test_local_files_without_a_local_builder_are_refused(tmp_path):
    import pytest

    with pytest.raises(ValueError, match=r"data.sources.x: data_files needs hub_id one of"):
        download("x", "org/name", None, "train", tmp_path / "o", [str(tmp_path / "a.json")])


def test_model_snapshot_pins_the_resolved_commit_and_records_file_hashes(tmp_path, monkeypatch):
    """The Hub is out of reach here: its two calls are replaced, the recording logic is real."""
    from types import SimpleNamespace

    import huggingface_hub

    sha = "a" * 40
    seen = {}

    class FakeApi:
        def model_info(self, repo_id, revision=None, files_metadata=False):
            seen["info"] = (repo_id, revision, files_metadata)
            files = [
                SimpleNamespace(rfilename="model.safetensors", lfs=SimpleNamespace(sha256="f" * 64)),
                SimpleNamespace(rfilename="config.json", lfs=None),
            ]
            return SimpleNamespace(sha=sha, siblings=files)

    def fake_snapshot(repo_id, revision, local_dir):
        seen["snapshot"] = (repo_id, revision)
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / "config.json").write_text("{}")

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot)
    out = tmp_path / "Qwen--Qwen3-8B"
    from toolcall_repro.cli import main

    assert main(["stage", "download_model", "--config", '{"hub_id": "Qwen/Qwen3-8B"}', "--out", f"model={out}"]) == 0
    record = json.loads((out / "download.json").read_text())
    assert seen == {"info": ("Qwen/Qwen3-8B", None, True), "snapshot": ("Qwen/Qwen3-8B", sha)}
    assert record["resolved_revision"] == sha
    assert record["files_sha256"] == {"config.json": None, "model.safetensors": "f" * 64}
