"""A persistent response cache: a rerun at temperature 0 costs nothing.

One SQLite file under the user's cache dir; the key is a hash of the whole
request (model, messages, schema, sampling options).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import platformdirs


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
    """Key-value store of model responses, safe to share between threads."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else cache_dir() / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._connection.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._connection.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._connection.execute(
                "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, json.dumps(value))
            )
            self._connection.commit()


_shared: dict[Path, ResponseCache] = {}


def shared_cache() -> ResponseCache:
    """The process-wide cache for the current cache dir."""
    path = cache_dir() / "responses.sqlite"
    if path not in _shared:
        _shared[path] = ResponseCache(path)
    return _shared[path]
