"""A persistent response cache: a rerun at temperature 0 costs nothing.

One SQLite file under the user's cache dir; the key is a hash of the whole
request (model, messages, schema, sampling options).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import platformdirs

logger = logging.getLogger("promptgym")


def cache_dir() -> Path:
    """``$PROMPTGYM_CACHE_DIR`` or the platform's user cache dir for promptgym."""
    path = Path(os.environ.get("PROMPTGYM_CACHE_DIR") or platformdirs.user_cache_dir("promptgym"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    """Where assembled model weights live: ``$PROMPTGYM_MODELS_DIR`` or ``<cache dir>/models``."""
    path = Path(os.environ.get("PROMPTGYM_MODELS_DIR") or cache_dir() / "models")
    path.mkdir(parents=True, exist_ok=True)
    return path


def request_key(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ResponseCache:
    """Key-value store of model responses, safe to share between threads.

    A cache that can't be used (not a database, truncated, read-only, in a folder
    that can't be written) is not an error: it says so once, naming the file, and
    every call goes on uncached.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else cache_dir() / "responses.sqlite"
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self.broken: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            with self._lock:
                self._connection.execute("PRAGMA journal_mode=WAL")
                self._connection.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                self._connection.commit()
        except (sqlite3.Error, OSError) as error:
            self._give_up(error)

    def _give_up(self, error: BaseException) -> None:
        if self.broken is None:
            self.broken = f"{type(error).__name__}: {error}"
            logger.warning("response cache %s can't be used (%s); going on without a cache. Delete the file "
                           "(or set PROMPTGYM_CACHE_DIR, or cache=False) to stop this warning.", self.path, self.broken)
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None

    def get(self, key: str) -> dict[str, Any] | None:
        if self._connection is None:
            return None
        try:
            with self._lock:
                row = self._connection.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            return json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError, AttributeError) as error:
            self._give_up(error)
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self._connection is None:
            return
        try:
            with self._lock:
                self._connection.execute(
                    "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, json.dumps(value))
                )
                self._connection.commit()
        except (sqlite3.Error, AttributeError) as error:
            self._give_up(error)


_shared: dict[Path, ResponseCache] = {}


def shared_cache() -> ResponseCache:
    """The process-wide cache for the current cache dir (one that warns and stores nothing when unusable)."""
    try:
        path = cache_dir() / "responses.sqlite"
    except OSError:
        path = Path(os.environ.get("PROMPTGYM_CACHE_DIR") or platformdirs.user_cache_dir("promptgym")) / "responses.sqlite"
    if path not in _shared:
        _shared[path] = ResponseCache(path)
    return _shared[path]
