"""Atomic file writes: a reader sees the old file or the new one, never half."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], binary: bool = False) -> Iterator[IO[Any]]:
    """A file handle whose content replaces ``path`` only when the block succeeds.

    Writes go to a temp file in the same folder (created if needed), which is
    synced and renamed over ``path``; on an error the temp file is removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename."""
    with atomic_writer(path) as handle:
        handle.write(text)
    return Path(path)


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file with an error that names the file and the position."""
    source = Path(path)
    if not source.exists():
        raise FileNotFoundError(f"{source}: no such file")
    try:
        return json.loads(source.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{source}: line {error.lineno}, column {error.colno}: invalid JSON ({error.msg})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{source}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start})") from None
    except RecursionError:
        raise ValueError(f"{source}: JSON nested too deeply to read") from None
