"""BM25 search with DuckDB's ``fts`` extension, its index rebuilt lazily once per batch of writes.

    settings = FulltextSettings(stemmer="porter")
    rows = store.locked(fulltext_rows, store, "Document", ["capital of France"], settings, 10)

A write marks the table stale (in its transaction); the next full-text search
rebuilds the index once, so ingesting in many small batches costs one
rebuild, not one per batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from promptgym.knowledge_bases.connection import META
from promptgym.knowledge_bases.errors import ReadOnlyKnowledgeBaseError
from promptgym.knowledge_bases.filters import where_clause
from promptgym.knowledge_bases.naming import q
from promptgym.knowledge_bases.ranking import best_per_key
from promptgym.knowledge_bases.tables import TableStore

STEMMERS = ("arabic", "basque", "catalan", "danish", "dutch", "english", "finnish", "french", "german", "greek",
            "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian", "porter",
            "portuguese", "romanian", "russian", "serbian", "spanish", "swedish", "tamil", "turkish", "none")


@dataclass(frozen=True)
class FulltextSettings:
    """The BM25 index's text processing (the options of ``PRAGMA create_fts_index``)."""

    stemmer: str = "porter"
    stopwords: str | None = None
    ignore: str | None = None
    strip_accents: bool | None = None
    lower: bool | None = None

    def pragma_options(self) -> str:
        options = [f"stemmer='{self.stemmer}'"]
        for key, value in (("stopwords", self.stopwords), ("ignore", self.ignore),
                           ("strip_accents", self.strip_accents), ("lower", self.lower)):
            if value is not None:
                options.append(f"{key}=" + (str(int(value)) if isinstance(value, bool) else
                                            "'" + str(value).replace("'", "''") + "'"))
        return ", ".join(options)


def refresh_index(store: TableStore, table: str, columns: list[tuple[str, str]], settings: FulltextSettings) -> bool:
    """Rebuild the BM25 index if a write made it stale; False when the table has no text to index."""
    if not [name for name, kind in columns[1:] if kind == "VARCHAR"]:
        return False
    fresh = store.shared.fresh_fulltext
    if table in fresh:
        return True
    meta = store.meta(table)
    con = store.connection()
    index_exists = con.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name=?",
                               [f"fts_main_{table}"]).fetchone()
    if index_exists and meta is not None and not meta[0]:
        fresh.add(table)
        return True
    if store.read_only:
        if index_exists:
            return True  # built before the last writes: a read-only reader searches what was indexed
        raise ReadOnlyKnowledgeBaseError(
            f"knowledge base {store.uri} is open read-only and table {table!r} has no full-text index yet (building "
            "it writes the file); build it once with the file open for writing: `promptgym kb add` does, or "
            f"`await kb.adapter.refresh_fulltext_index(table_name={table!r})`")
    con.execute(f"PRAGMA create_fts_index('main.{table}', '{columns[0][0]}', '*', {settings.pragma_options()}, "
                "overwrite=1);")
    con.execute(f"INSERT INTO {META}.tables VALUES (?, FALSE, NULL, NULL) ON CONFLICT (name) DO UPDATE "
                "SET fts_stale = FALSE", [table])
    fresh.add(table)
    return True


def fulltext_rows(store: TableStore, table: str, texts: list[Any], settings: FulltextSettings, k: int, *,
                  conjunctive: bool = False, bm25_b: float | None = None, bm25_k: float | None = None,
                  filters: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
    """The ``k`` best rows by raw BM25 score over all ``texts`` (each row's best); None: no text to index."""
    columns = store.require_columns(table)
    if not refresh_index(store, table, columns, settings):
        return None
    id_key = columns[0][0]
    extras = "".join(f", {name} := {float(value)}" for name, value in (("k", bm25_k), ("b", bm25_b))
                     if value is not None) + (", conjunctive := 1" if conjunctive else "")
    where, params = where_clause(table, columns, filters)
    sql = (f"SELECT * FROM (SELECT {store.select_list(table)}, fts_main_{table}.match_bm25({q(id_key)}, ?{extras}) "
           f"AS score FROM {table} WHERE TRUE{where}) WHERE score IS NOT NULL ORDER BY score DESC, {q(id_key)} "
           "LIMIT ?")
    found = [row for text in texts for row in store.fetch(table, sql, [str(text), *params, k])]
    return best_per_key(found, id_key, k)
