"""Hybrid search: a lexical ranking (BM25 or regex) and a vector ranking fused by Reciprocal Rank Fusion.

    rows = await hybrid_fts(adapter, ["capital of France"], [vector], table_name="Document", k=5)

Each query is fused on its own; the fused rows of all queries are then
merged, each key at its best fused score. Both branches fetch ``5 * k``
rows so that fusion has candidates beyond the top ``k`` of either.
"""

from __future__ import annotations

from typing import Any, Protocol

from promptgym.knowledge_bases.ranking import best_per_key
from promptgym.knowledge_bases.results import reciprocal_rank_fusion

CANDIDATES_PER_RESULT = 5


class Searches(Protocol):
    """The single-ranking searches hybrid search fuses (either adapter's: DuckDB or LanceDB)."""

    async def fulltext_search(self, text_or_texts: Any, *, table_name: str, k: int = 10,
                              threshold: float | None = None, **kwargs: Any) -> Any: ...

    async def similarity_search(self, text_or_texts: Any = None, *, table_name: str, vector_or_vectors: Any = None,
                                k: int = 10, threshold: float | None = None, **kwargs: Any) -> Any: ...

    async def regex_search(self, pattern: str, *, table_name: str, k: int = 10, **kwargs: Any) -> Any: ...


async def hybrid_fts(searches: Searches, words: list[Any], vectors: list[list[float]], *, table_name: str,
                     id_key: str, k: int, k_rank: int, similarity_threshold: float | None,
                     fulltext_threshold: float | None, bm25: dict[str, Any],
                     filters: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per (keywords, vector) pair: BM25 and vector rankings fused (no BM25 branch where the keywords are None)."""
    if len(words) != len(vectors):
        raise ValueError(f"`keywords` must align with the vector-branch queries: got {len(words)} keyword(s) vs "
                         f"{len(vectors)} quer(ies).")
    candidates = k * CANDIDATES_PER_RESULT
    fused: list[dict[str, Any]] = []
    for vector, word in zip(vectors, words):
        lexical = await searches.fulltext_search(word, table_name=table_name, k=candidates,
                                                 threshold=fulltext_threshold, filters=filters, **bm25) if word else []
        semantic = await searches.similarity_search(table_name=table_name, vector_or_vectors=vector, k=candidates,
                                                    threshold=similarity_threshold, filters=filters)
        fused += reciprocal_rank_fusion([lexical, semantic], id_key, k, k_rank)
    return best_per_key(fused, id_key, k)


async def regex_matches(searches: Searches, patterns: list[str], *, table_name: str, id_key: str, k: int,
                        fields: list[str] | None, case_sensitive: bool,
                        filters: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The rows any pattern matches, each once, in the order the patterns found them."""
    rows: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for pattern in patterns:
        for row in await searches.regex_search(pattern, table_name=table_name, fields=fields,
                                               case_sensitive=case_sensitive, k=k * CANDIDATES_PER_RESULT,
                                               filters=filters):
            if row[id_key] not in seen:
                seen.add(row[id_key])
                rows.append(row)
    return rows


async def hybrid_regex(searches: Searches, regex_rows: list[dict[str, Any]], vectors: list[list[float]], *,
                       table_name: str, id_key: str, k: int, k_rank: int, similarity_threshold: float | None,
                       filters: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per vector: its ranking fused with the regex matches."""
    fused: list[dict[str, Any]] = []
    for vector in vectors:
        semantic = await searches.similarity_search(table_name=table_name, vector_or_vectors=vector,
                                                    k=k * CANDIDATES_PER_RESULT, threshold=similarity_threshold,
                                                    filters=filters)
        fused += reciprocal_rank_fusion([semantic, regex_rows], id_key, k, k_rank)
    return best_per_key(fused, id_key, k)
