"""The package's file I/O at the edges: atomic writes and JSON lines (stdlib only; both envs import it).

Every file a job writes goes through :func:`atomic_path`: written to a temporary file in the same folder,
flushed to disk, then renamed over the target (``os.replace``), so a killed job leaves the old file or none,
never half a file. JSON is written with sorted keys so reruns compare byte for byte. JSON lines are read by
:func:`iter_jsonl` / :func:`read_jsonl`, which name the file and line of anything malformed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def compact_json(obj: object) -> str:
    """One line of JSON with sorted keys and no spaces: the form a job spec travels in (params.job)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


class JsonlError(ValueError):
    """A line that is not a JSON object; `detail` says why without the file and line."""

    def __init__(self, source: str, number: int, what: str, detail: str):
        super().__init__(f"{source}:{number}: {what} ({detail})")
        self.source, self.number, self.detail = source, number, detail


# ----------------------------------------------------------------------------------------------- writing
@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block ends without error, fsync it and rename it
    over `path` (the folder is created). On error the temporary file is removed and `path` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_write_json(
    path: str | Path,
    obj: object,
    *,
    indent: int | None = 2,
    ensure_ascii: bool = False,
    allow_nan: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> Path:
    """`obj` as JSON (sorted keys, `indent`, a final newline), atomically."""
    text = json.dumps(
        obj, indent=indent, sort_keys=True, ensure_ascii=ensure_ascii, allow_nan=allow_nan, default=default
    )
    return atomic_write_text(path, text + "\n")


def write_jsonl(
    rows: Iterable[object],
    path: str | Path,
    *,
    sort_keys: bool = True,
    ensure_ascii: bool = False,
    allow_nan: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> int:
    """One JSON document a line, atomically (streamed: `rows` may be a generator); returns the count."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(
                json.dumps(
                    row, sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=allow_nan, default=default
                )
                + "\n"
            )
            n += 1
    return n


# ----------------------------------------------------------------------------------------------- reading
def iter_json_lines(
    lines: Iterable[str], *, source: str, error: type[Exception] = JsonlError, keep_malformed: bool = False
) -> Iterator[tuple[int, dict | JsonlError]]:
    """(line number from 1, object) for each non-blank line of `lines`.

    A line that is not a JSON object raises `error` naming `source` and the line; with `keep_malformed` it
    is yielded as a :class:`JsonlError` instead (for a reader that counts bad lines and goes on).
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            bad = JsonlError(source, number, "not JSON", f"{e}; line starts {line[:120]!r}")
        else:
            if isinstance(row, dict):
                yield number, row
                continue
            bad = JsonlError(
                source, number, "not a JSON object", f"line holds a {type(row).__name__}, not an object"
            )
        if not keep_malformed:
            raise (bad if error is JsonlError else error(str(bad))) from None
        yield number, bad


def iter_jsonl(
    path: str | Path, *, error: type[Exception] = JsonlError, keep_malformed: bool = False
) -> Iterator[tuple[int, dict | JsonlError]]:
    """:func:`iter_json_lines` of a file (read as UTF-8, streamed)."""
    with open(path, encoding="utf-8") as f:
        yield from iter_json_lines(f, source=str(path), error=error, keep_malformed=keep_malformed)


def read_jsonl(path: str | Path, *, error: type[Exception] = JsonlError) -> list[dict]:
    """Every object of a JSON-lines file; a malformed line raises `error` naming file and line."""
    return [row for _, row in iter_jsonl(path, error=error)]  # type: ignore[misc]
