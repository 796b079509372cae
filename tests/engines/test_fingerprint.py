"""One resume rule for both engines: the shared run fingerprint is the local engine's."""

from __future__ import annotations

from types import SimpleNamespace

from toolcall_repro.engines.fingerprint import run_fingerprint, weight_files


def test_the_shared_fingerprint_is_the_local_engines(tmp_path):
    from toolcall_repro.engines.local.grpo import fingerprint as local_fingerprint

    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    cfg = SimpleNamespace(to_dict=lambda: {"lr": 1e-3, "n": 4, "filter": None})
    records = [SimpleNamespace(id="a", prompt_ids=[1, 2, 3]), SimpleNamespace(id="b", prompt_ids=[4])]
    shared = run_fingerprint(cfg.to_dict(), 3, [(r.id, str(r.prompt_ids)) for r in records], tmp_path)
    assert shared == local_fingerprint(cfg, 3, records, tmp_path)
    # the digest itself is part of the checkpoint format: a change makes every saved run "another run's"
    assert shared == "35d2eebee1fa0fb118caad10f895d32541020e11c7d9383fc69e463931abcacd"


def test_every_shard_of_a_hub_model_counts(tmp_path):
    for name in ("model-00002-of-00002.safetensors", "model-00001-of-00002.safetensors", "config.json"):
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "model.safetensors.index.json").write_text("{}")
    (tmp_path / "tokenizer.json").write_text("{}")
    assert [p.name for p in weight_files(tmp_path)] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "config.json",
    ]
    before = run_fingerprint({}, 0, [], tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"changed")
    assert run_fingerprint({}, 0, [], tmp_path) != before
    assert run_fingerprint({}, 0, [("a", "x")], tmp_path) != run_fingerprint({}, 1, [("a", "x")], tmp_path)
