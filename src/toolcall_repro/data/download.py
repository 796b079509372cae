"""Download one raw source with `datasets` at a pinned revision and write it as JSONL in the source's own
schema (the same files the synthetic twins write), plus a sidecar recording what was read.

The download_model job snapshots a Hub model (base, filter policy) into the results tree instead.
These are the only steps that touch the network (the download_source and download_model jobs; by hand
`toolcall-repro stage download_source --describe`).

Sidecar ``<out>.source.json``: hub id, requested and resolved revision, split, row count, columns, the
sha256 of the JSONL written, and the sha256 of every file `datasets` read from its cache. For a source
that is not on the Hub (e.g. Tool-N1's RL file) the config names a builder and local files instead:
``{"hub_id": "json", "data_files": ["path/to/tool_n1.json"]}``.
"""

from __future__ import annotations

from pathlib import Path

from toolcall_repro.io import atomic_write_json, write_jsonl
from toolcall_repro.provenance import sha256_file

LOCAL_BUILDERS = ("json", "parquet", "csv")


def resolve_revision(hub_id: str, revision: str) -> str | None:
    """The commit sha a branch or tag name points at now (None when offline or not a Hub dataset)."""
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(hub_id, revision=revision).sha
    except Exception:  # offline, gated or unknown: the requested revision is still recorded
        return None


class GatedDataset(RuntimeError):
    """A gated repository without an accepted licence or a token: one line saying what to do."""


def _load_hub(load_dataset, source: str, hub_id: str, revision: str | None, split: str):
    """load_dataset at the revision; a gated repository's 401 becomes one line naming its page."""
    from huggingface_hub.errors import GatedRepoError

    try:
        return load_dataset(hub_id, revision=revision, split=split)
    except Exception as exc:  # datasets wraps the hub's GatedRepoError in its own DatasetNotFoundError
        if isinstance(exc, GatedRepoError) or "gated" in str(exc).lower():
            from toolcall_repro.hub_lock import page

            raise GatedDataset(
                f"data.sources.{source}: {hub_id} is gated: accept its terms at {page('dataset', hub_id)} with the"
                " account whose token this host uses (HF_TOKEN, or `hf auth login`), then run again"
            ) from exc
        raise


def write_rows_jsonl(rows, out: str | Path) -> int:
    """Raw rows as the source has them (key order kept; values JSON cannot hold written as strings)."""
    return write_jsonl(rows, out, sort_keys=False, default=str)


def download(
    source: str,
    hub_id: str,
    revision: str | None,
    split: str,
    out: str | Path,
    data_files: list[str] | None = None,
) -> dict:
    from datasets import load_dataset

    if data_files:
        if hub_id not in LOCAL_BUILDERS:
            raise ValueError(
                f"data.sources.{source}: data_files needs hub_id one of {LOCAL_BUILDERS} (a local builder), "
                f"got {hub_id!r}"
            )
        dataset = load_dataset(hub_id, data_files=data_files, split=split)
        read = {str(p): sha256_file(p) for p in data_files}
        resolved = None
    else:
        dataset = _load_hub(load_dataset, source, hub_id, revision, split)
        read = {c["filename"]: sha256_file(c["filename"]) for c in dataset.cache_files}
        resolved = resolve_revision(hub_id, revision) if revision else None
    rows = write_rows_jsonl(dataset, out)
    record = {
        "source": source,
        "hub_id": hub_id,
        "revision": revision,
        "resolved_revision": resolved,
        "split": split,
        "rows": rows,
        "columns": list(dataset.column_names),
        "out": str(out),
        "out_sha256": sha256_file(out),
        "files_read_sha256": read,
        "download_checksums": getattr(dataset.info, "download_checksums", None),
    }
    atomic_write_json(sidecar_path(out), record)
    return record


def sidecar_path(out: str | Path) -> Path:
    return Path(f"{out}.source.json")


MODEL_RECORD = "download.json"


def snapshot_model(hub_id: str, revision: str | None, out: str | Path) -> dict:
    """Snapshot a Hub model into the results tree; record the commit and each file's LFS sha256."""
    from huggingface_hub import HfApi, snapshot_download

    info = HfApi().model_info(hub_id, revision=revision, files_metadata=True)
    snapshot_download(repo_id=hub_id, revision=info.sha, local_dir=str(out))
    files = {
        f.rfilename: (f.lfs.sha256 if f.lfs is not None else None)
        for f in sorted(info.siblings or [], key=lambda f: f.rfilename)
    }
    record = {"hub_id": hub_id, "revision": revision, "resolved_revision": info.sha, "files_sha256": files}
    atomic_write_json(Path(out) / MODEL_RECORD, record)
    return record


def download_model(j) -> None:
    """The download_model job (toolcall_repro.job): config {"hub_id", "revision"} (revision may be null)."""
    out = j.out("model")
    record = snapshot_model(j.config["hub_id"], j.config.get("revision"), out)
    print(f"{j.config['hub_id']}@{record['resolved_revision']}: {len(record['files_sha256'])} files in {out}")


def download_source(j) -> None:
    """The download_source job (toolcall_repro.job): config is data.sources.<source> (hub_id, revision,
    split, optional data_files)."""
    cfg = j.config
    files = cfg.get("data_files")
    record = download(
        j.option("source"), cfg["hub_id"], cfg.get("revision"), cfg.get("split", "train"), j.out("raw"),
        [files] if isinstance(files, str) else files,
    )  # fmt: skip
    print(f"{j.option('source')}: {record['rows']} rows from {cfg['hub_id']}@{record['resolved_revision']}")
