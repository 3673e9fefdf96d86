"""A persistent response cache: a rerun at temperature 0 costs nothing.

One SQLite file under the user's cache dir; the key is a hash of the whole
request (model, messages, schema, sampling options).
"""

from __future__ import annotations

import asyncio
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
        self._pending: dict[str, dict[str, Any]] = {}
        self.broken: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            with self._lock:
                self._connection.execute("PRAGMA journal_mode=WAL")
                # a cache: a power cut may lose its last answers, never corrupt it (WAL), and a commit
                # needs no fsync
                self._connection.execute("PRAGMA synchronous=NORMAL")
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
                if key in self._pending:  # written behind, not yet committed
                    return self._pending[key]
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

    async def put_off_loop(self, key: str, value: dict[str, Any]) -> None:
        """``put`` in a worker thread: a commit waits for the disk, and the event loop serves others meanwhile."""
        await asyncio.to_thread(self.put, key, value)

    def put_behind(self, key: str, value: dict[str, Any]) -> None:
        """``put`` in a worker thread, not waited for (the end of a stream, which can't await), or at once
        when no event loop runs. ``get`` sees the value at once; ``asyncio.run`` waits for the write."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.put(key, value)
            return
        with self._lock:
            self._pending[key] = value
        loop.run_in_executor(None, self._write_pending, key, value)

    def _write_pending(self, key: str, value: dict[str, Any]) -> None:
        try:
            self.put(key, value)
        finally:
            with self._lock:
                if self._pending.get(key) is value:
                    del self._pending[key]


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
