"""Searches over a Lance table: native BM25 (LanceDB's own FTS index) and exact vector search.

    rows = store.locked(similarity_rows, store, "Document", [[0.1, 0.2]], "cosine", 10, embedder="given vectors")

Each function has the signature of its DuckDB counterpart (``fulltext``,
``vector_search``), so the adapter swaps one for the other and everything
above them (score scales, hybrid fusion) is shared; regex search is shared
whole (``regex_search``, with the store's ``regex_matches``). The
full-text index is LanceDB's native inverted index (``FTS(...)``, not
Tantivy, which recent LanceDB no longer needs); nothing is downloaded.
"""

from __future__ import annotations

from typing import Any

from promptgym.knowledge_bases.errors import ReadOnlyKnowledgeBaseError
from promptgym.knowledge_bases.fulltext import FulltextSettings
from promptgym.knowledge_bases.lance_filters import column, where
from promptgym.knowledge_bases.lance_store import LanceStore
from promptgym.knowledge_bases.ranking import best_per_key

NATIVE_METRICS = {"l2sq": "l2", "cosine": "cosine", "ip": "dot"}
SCORE_OFFSETS = {"l2sq": 0.0, "cosine": 0.0, "ip": -1.0}
"""LanceDB's ``dot`` distance is ``1 - <a, b>``; DuckDB's (and so ours) is ``-<a, b>``."""
LANGUAGES = {"arabic", "danish", "dutch", "english", "finnish", "french", "german", "greek", "hungarian", "italian",
             "norwegian", "portuguese", "romanian", "russian", "spanish", "swedish", "tamil", "turkish"}
"""The stemmers LanceDB's native tokenizer has (of DuckDB's: ``porter`` is English's)."""


def fts_config(settings: FulltextSettings) -> Any:
    """The native FTS index config for DuckDB-style text settings; what it cannot do is an error saying so."""
    from lancedb.index import FTS

    language = "english" if settings.stemmer == "porter" else settings.stemmer
    if language != "none" and language not in LANGUAGES:
        raise NotImplementedError(f"LanceDB's full-text index has no {settings.stemmer!r} stemmer (it has "
                                  f"{sorted(LANGUAGES)} and 'none'); use the DuckDB adapter for it")
    if settings.ignore is not None:
        raise NotImplementedError("LanceDB's full-text index has no `ignore=` pattern; use the DuckDB adapter")
    return FTS(language=language.capitalize() if language != "none" else "English", stem=language != "none",
               remove_stop_words=settings.stopwords != "none",
               ascii_folding=settings.strip_accents is not False, lower_case=settings.lower is not False)


def refresh_index(store: LanceStore, table: str, columns: list[tuple[str, str]], settings: FulltextSettings) -> bool:
    """Rebuild the table's inverted indexes if a write made them stale; False when it has no text to index."""
    text_columns = [name for name, kind in columns[1:] if kind == "VARCHAR"]
    if not text_columns:
        return False
    if table in store.fresh_fulltext:
        return True
    handle = store.open(table)
    indexed = {tuple(index.columns) for index in handle.list_indices()}
    if store.read_only:
        if all((name,) in indexed for name in text_columns):
            return True
        raise ReadOnlyKnowledgeBaseError(
            f"knowledge base {store.uri} is open read-only and table {table!r} has no full-text index yet (building "
            "it writes the directory); build it once with it open for writing: "
            f"`await kb.adapter.refresh_fulltext_index(table_name={table!r})`")
    config = fts_config(settings)
    for name in text_columns:
        handle.create_index(name, config=config, replace=True)
    store.fresh_fulltext.add(table)
    return True


def fulltext_rows(store: LanceStore, table: str, texts: list[Any], settings: FulltextSettings, k: int, *,
                  conjunctive: bool = False, bm25_b: float | None = None, bm25_k: float | None = None,
                  filters: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
    """The ``k`` best rows by raw BM25 score over all ``texts`` (each row's best); None: no text to index."""
    from lancedb.query import FullTextOperator, MultiMatchQuery

    if bm25_b is not None or bm25_k is not None:
        raise NotImplementedError("LanceDB's full-text index scores with fixed BM25 parameters: `bm25_b=` and "
                                  "`bm25_k=` need the DuckDB adapter")
    columns = store.require_columns(table)
    text_columns = [name for name, kind in columns[1:] if kind == "VARCHAR"]
    if not text_columns:
        return None
    if not store.count(table):
        return []
    refresh_index(store, table, columns, settings)
    condition = where(table, columns, filters)
    operator = FullTextOperator.AND if conjunctive else FullTextOperator.OR
    found = []
    for text in texts:
        query = store.open(table).search(MultiMatchQuery(str(text), text_columns, operator=operator),
                                         query_type="fts")
        if condition:
            query = query.where(condition, prefilter=True)
        for row in store.rows(table, query.limit(k).to_arrow()):
            found.append({**row, "score": row.pop("_score")})
    return best_per_key(found, columns[0][0], k)


def similarity_rows(store: LanceStore, table: str, vectors: list[list[float]], metric: str, k: int, *,
                    embedder: str, threshold: float | None = None,
                    filters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The ``k`` nearest rows over all query vectors (exact: the index is bypassed), each at its smallest distance."""
    columns = store.require_columns(table)
    if store.vector_dimension(table) is None:
        return []  # nothing embedded yet
    store.check_query_embedder(table, len(vectors[0]), embedder)
    condition = where(table, columns, filters, f"{column(store.vss_key)} IS NOT NULL")
    offset = SCORE_OFFSETS[metric]
    found = []
    for vector in vectors:
        query = (store.open(table).search(vector, vector_column_name=store.vss_key)
                 .distance_type(NATIVE_METRICS[metric]).bypass_vector_index().where(condition, prefilter=True))
        for row in store.rows(table, query.limit(k).to_arrow()):
            distance = float(row.pop("_distance")) + offset
            if threshold is None or distance < threshold:
                found.append({**row, "score": distance})
    return best_per_key(found, columns[0][0], k, lower_is_better=True)
