"""Download ACEBench's English data at a pinned commit (paper scale; a local rule on the submit host).

GitHub serves any commit of a public repository as a tarball (`<repo>/archive/<commit>.tar.gz`); we take
`data_all/data_en/` out of it, write the commit into `COMMIT` beside it (the card's benchmark_version),
and `source.json` with the URL and the archive's sha256. The folder appears only when complete.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from toolcall_repro.eval.acebench.data import CATEGORIES, category_files

_COMMIT_RE = re.compile(r"\A[0-9a-f]{40}\Z")
DATA_SUBDIR = "data_all/data_en"


def archive_url(repo: str, commit: str) -> str:
    """`https://github.com/<owner>/<name>` (or any URL an archive path can follow) -> tarball URL."""
    if not _COMMIT_RE.match(commit):
        raise ValueError(f"ACEBench commit must be a full 40-hex sha, got {commit!r}")
    return f"{repo.rstrip('/').removesuffix('.git')}/archive/{commit}.tar.gz"


def download_acebench(repo: str, commit: str, out_dir: str | Path, timeout: float = 300) -> dict:
    """Fetch the tarball, unpack `data_all/data_en` into `out_dir`; returns the source record."""
    url = archive_url(repo, commit)
    out = Path(out_dir)
    if out.exists():
        raise FileExistsError(f"{out} exists; remove it to download again")
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        archive = Path(tmp) / "acebench.tar.gz"
        with urllib.request.urlopen(url, timeout=timeout) as response, open(archive, "wb") as f:
            shutil.copyfileobj(response, f)
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        staged = Path(tmp) / "data_en"
        staged.mkdir()
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                # GitHub archives hold one top folder `<name>-<commit>/`; keep data_all/data_en below it
                parts = Path(member.name).parts
                inner = Path(*parts[1:]) if len(parts) > 1 else None
                if inner is None or not inner.as_posix().startswith(DATA_SUBDIR + "/") or not member.isfile():
                    continue
                target = staged / inner.relative_to(DATA_SUBDIR)
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, open(target, "wb") as dst:  # type: ignore[union-attr]
                    shutil.copyfileobj(src, dst)
        missing = [str(p) for c in CATEGORIES for p in category_files(staged, c) if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"{url} lacks ACEBench files: {missing[:5]}")
        (staged / "COMMIT").write_text(commit + "\n", encoding="utf-8")
        record = {"repo": repo, "commit": commit, "url": url, "archive_sha256": digest}
        (staged / "source.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staged), out)
    return record
