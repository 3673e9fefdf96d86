"""One DuckDB connection per knowledge-base file per process, opened offline and locked against the host's files.

    shared, key = acquire("kb.db", read_only=False, encryption_key=None)
    with shared.lock:
        shared.con.execute("SELECT 1")
    release(shared, key)

DuckDB gives two connections to one file in one process the same database
underneath, but a key deleted through one and re-inserted through the other
then fails as a duplicate (seen on 1.4.4): sharing one connection avoids
that, and serializes all of the process's writes to the file.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from promptgym.knowledge_bases import extensions
from promptgym.knowledge_bases.errors import KnowledgeBaseError
from promptgym.knowledge_bases.naming import sanitize_identifier
from promptgym.knowledge_bases.vector_matrix import VectorMatrix
from promptgym.lm.traces import promptgym_home as synalinks_home

META = "promptgym_kb"
"""The schema of the adapter's own bookkeeping (kept out of ``main`` so it never shows as a user table)."""


@dataclass
class SharedConnection:
    """A file's connection, its lock, how many adapters use it, and what they cache about its tables."""

    con: duckdb.DuckDBPyConnection
    lock: threading.RLock
    read_only: bool = False
    users: int = 0
    columns: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Each table's (column, type) list: information_schema costs milliseconds a query. Cleared on any DDL."""
    fresh_fulltext: set[str] = field(default_factory=set)
    """Tables whose BM25 index is known to be up to date (so a search skips asking the database)."""
    vectors: dict[str, VectorMatrix] = field(default_factory=dict)
    """Each table's vectors in memory for unfiltered vector search; dropped when the table is written."""
    embedders: dict[str, str] = field(default_factory=dict)
    """Each table's embedder a search has already been checked against (so the check costs one query per table)."""


_SHARED: dict[str, SharedConnection] = {}
# reentrant: a forgotten adapter's __del__ (garbage collection) may release inside acquire's critical section
_SHARED_LOCK = threading.RLock()


def resolve_path(uri: str | None, name: str | None = None) -> str:
    """``duckdb://path`` -> ``path``; None -> ``<synalinks_home>/<name or 'database'>.db``."""
    if uri:
        return uri.replace("duckdb://", "", 1)
    if name is not None:
        sanitize_identifier(name)  # it becomes a file name: no "../"
    return os.path.join(synalinks_home(), f"{name or 'database'}.db")


def acquire(uri: str, read_only: bool, encryption_key: str | None) -> tuple[SharedConnection, str | None]:
    """This process's connection to ``uri`` (opened on first use) and the key to :func:`release` it by.

    DuckDB refuses a second connection to a file with another configuration in one process, so a read-only
    user shares a writable connection already open (its adapter refuses writes itself); a writer while the
    file is open read-only here is an error saying so.
    """
    key = None if uri == ":memory:" else f"{os.path.realpath(uri)}|{encryption_key is not None}"
    with _SHARED_LOCK:
        shared = _SHARED.get(key) if key is not None else None
        if shared is not None and shared.read_only and not read_only:
            raise KnowledgeBaseError(f"knowledge base {uri} is open read-only in this process ({shared.users} "
                                     "user(s)); close those knowledge bases before opening it for writing")
        if shared is None:
            shared = SharedConnection(open_connection(uri, read_only, encryption_key), threading.RLock(), read_only)
            if key is not None:
                _SHARED[key] = shared
        shared.users += 1
    return shared, key


def release(shared: SharedConnection, key: str | None) -> None:
    """One user fewer; the last one closes the connection."""
    with _SHARED_LOCK:
        shared.users -= 1
        if shared.users > 0:
            return
        if key is not None:
            _SHARED.pop(key, None)
    with shared.lock:
        try:
            shared.con.close()
        except duckdb.Error:
            pass


def open_connection(uri: str, read_only: bool, encryption_key: str | None) -> duckdb.DuckDBPyConnection:
    """A connection with ``fts`` and ``vss`` loaded from their pip packages; a clear error for a locked/bad file."""
    if uri != ":memory:":
        if read_only and not os.path.exists(uri):
            raise KnowledgeBaseError(f"knowledge base {uri}: no such file (read_only=True opens an existing one)")
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    try:
        con = _connect(uri, read_only, encryption_key)
    except duckdb.IOException as error:
        text = str(error)
        if "lock" in text.lower():
            raise KnowledgeBaseError(
                f"knowledge base {uri} is locked by another process that has it open for writing; close it, "
                f"or open both with read_only=True ({text})") from None
        raise KnowledgeBaseError(f"knowledge base {uri} cannot be opened: {text}") from None
    except duckdb.Error as error:
        raise KnowledgeBaseError(
            f"knowledge base {uri} cannot be opened (not a DuckDB file of version {duckdb.__version__}, or "
            f"damaged): {error}") from None
    extensions.load_extensions(con, ["fts", "vss"])
    # Lock the connection against the host's files: SQL from an LM (Text2SQL, sql()) must not read_csv('/etc/passwd').
    con.execute("SET enable_external_access=false;")
    if not read_only:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {META};")
        con.execute(f"CREATE TABLE IF NOT EXISTS {META}.tables (name VARCHAR PRIMARY KEY, fts_stale BOOLEAN, "
                    "embedding_model VARCHAR, dimension INTEGER);")
        con.execute(f"CREATE TABLE IF NOT EXISTS {META}.settings (key VARCHAR PRIMARY KEY, value VARCHAR);")
    return con


def _connect(uri: str, read_only: bool, encryption_key: str | None) -> duckdb.DuckDBPyConnection:
    if encryption_key is None:
        return extensions.connect(uri, read_only=read_only)
    con = extensions.connect(":memory:")
    extensions.load_extensions(con, ["httpfs"])  # DuckDB writes encrypted files with httpfs's OpenSSL
    options = ["ENCRYPTION_KEY ?"] + (["READ_ONLY"] if read_only else [])
    con.execute(f"ATTACH '{uri.replace(chr(39), chr(39) * 2)}' AS kb ({', '.join(options)})", [encryption_key])
    con.execute("USE kb")
    return con
