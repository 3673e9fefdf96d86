"""``LanceDBAdapter``: DataModels in a LanceDB directory, for a knowledge base that outgrew one DuckDB file.

    adapter = LanceDBAdapter(uri="lancedb://./kb.lance", data_models=[Document])
    await adapter.update(Document(id="1", text="hello").to_json_data_model())
    rows = await adapter.fulltext_search("hello", table_name="Document")

LanceDB keeps each table as a versioned columnar dataset (many files, read
lazily), so tables larger than memory, or than one file comfortably holds,
stay searchable. It is the DuckDB adapter with another engine underneath:
the public methods, score scales, errors and hybrid fusion are
:class:`~promptgym.knowledge_bases.duckdb_adapter.DuckDBAdapter`'s; only the
store (:mod:`~promptgym.knowledge_bases.lance_store`), the writes
(:mod:`~promptgym.knowledge_bases.lance_writes`) and the searches
(:mod:`~promptgym.knowledge_bases.lance_search`) differ. Full-text search
uses LanceDB's native inverted index (BM25, no Tantivy); vector search is
exact (no ANN index is built); regex search is Lance's ``regexp_like`` (Rust
regex: linear time, like RE2). What LanceDB cannot do raises an error saying
so: encryption, renaming a table, ``bm25_b``/``bm25_k``, SQL that writes.

Requires the ``lancedb`` extra: ``pip install 'promptgym[lancedb]'``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import duckdb
import pyarrow as pa

from promptgym.knowledge_bases import lance_search, lance_writes
from promptgym.knowledge_bases.duckdb_adapter import DuckDBAdapter, _require_select
from promptgym.knowledge_bases.errors import KnowledgeBaseError
from promptgym.knowledge_bases.lance_store import LanceStore
from promptgym.knowledge_bases.naming import sanitize_identifier
from promptgym.knowledge_bases.results import format_search_results
from promptgym.lm.traces import promptgym_home as synalinks_home

SCHEME = "lancedb://"
EXTRA_HINT = "pip install 'promptgym[lancedb]'"


def is_lancedb_uri(uri: str | None) -> bool:
    """Whether a knowledge base's uri names a LanceDB directory (``lancedb://path``).

    >>> is_lancedb_uri("lancedb://./kb"), is_lancedb_uri("duckdb://kb.db"), is_lancedb_uri(":memory:")
    (True, False, False)
    """
    return isinstance(uri, str) and uri.startswith(SCHEME)


def connect(path: str, read_only: bool) -> Any:
    """A LanceDB connection to a local directory; a clear error naming the extra when lancedb is absent."""
    try:
        import lancedb  # deferred: a heavy dependency only LanceDB knowledge bases need
    except ImportError:
        raise ImportError(f"a lancedb:// knowledge base needs the `lancedb` extra: {EXTRA_HINT}") from None
    if read_only and not os.path.isdir(path):
        raise KnowledgeBaseError(f"knowledge base {path}: no such directory (read_only=True opens an existing one)")
    return lancedb.connect(path)


class LanceDBAdapter(DuckDBAdapter):
    """The LanceDB store of a :class:`~promptgym.knowledge_bases.KnowledgeBase` (synalinks' LanceDB adapter).

    Takes :class:`DuckDBAdapter`'s arguments; ``uri`` is ``"lancedb://dir"`` (None puts ``<name or database>.lance``
    under synalinks_home). ``encryption_key`` is refused: LanceDB does not encrypt local directories.
    """

    _write_rows = staticmethod(lance_writes.write_rows)
    _delete_keys = staticmethod(lance_writes.delete_keys)
    _load_rows = staticmethod(lance_writes.load_rows)
    _fulltext_rows = staticmethod(lance_search.fulltext_rows)
    _similarity_rows = staticmethod(lance_search.similarity_rows)
    _refresh_index = staticmethod(lance_search.refresh_index)
    _store: LanceStore  # type: ignore[assignment]

    @staticmethod
    def resolve_uri(uri: str | None, name: str | None) -> str:
        if uri:
            return uri[len(SCHEME):] if is_lancedb_uri(uri) else uri
        if name is not None:
            sanitize_identifier(name)  # it becomes a directory name: no "../"
        return os.path.join(synalinks_home(), f"{name or 'database'}.lance")

    def _open_store(self, encryption_key: str | None) -> LanceStore:  # type: ignore[override]
        if encryption_key is not None:
            raise NotImplementedError("LanceDB does not encrypt a local directory: `encryption_key=` needs the "
                                      "DuckDB adapter (duckdb://)")
        return LanceStore(connect(self.uri, self.read_only), self.uri, vss_key=self.vss_key,
                          read_only=self.read_only)

    # -- what differs from DuckDB -------------------------------------------------------

    async def sql(self, sql: str, *, params: Any = None, read_only: bool = True, output_format: str = "json",
                  **_: Any) -> Any:
        """SELECT statements over the tables they name, run by DuckDB on a copy in memory (LanceDB has no SQL engine)."""
        if not read_only:
            raise NotImplementedError("LanceDB has no SQL engine: sql() runs SELECT statements (through DuckDB, over "
                                      "a copy in memory); write with update() and delete()")
        _require_select(sql)
        store = self._store

        def run() -> pa.Table:
            con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                     "autoload_known_extensions": False})
            try:
                for table in store.tables():  # only the tables the statement names are read into memory
                    if re.search(rf"\b{table}\b", sql, re.IGNORECASE):
                        con.register(table, store.scan(table, None))
                con.execute("SET enable_external_access=false;")
                return con.execute(sql, params or []).arrow().read_all()
            finally:
                con.close()

        return format_search_results(await store.call(run), output_format)
