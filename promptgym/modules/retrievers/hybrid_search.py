"""``HybridFTSSearch`` and ``HybridRegexSearch``: the vector ranking of one table fused with BM25 or regex by RRF."""

from __future__ import annotations

from typing import Any, Unpack

from promptgym.core.serialization import register_builtin
from promptgym.modules.retrievers.queries import HybridFTSSearchInput, HybridRegexSearchInput
from promptgym.modules.retrievers.table_search import Setting, TableSearch, TableSearchOptions


class HybridSearch(TableSearch):
    """The options both hybrids share: ``k_rank`` (RRF's constant), ``similarity_threshold``, ``ef_search``."""

    k_rank = Setting()
    similarity_threshold = Setting()
    ef_search = Setting()

    def __init__(self, *, settings: dict[str, Any], k_rank: int = 60, similarity_threshold: float | None = None,
                 ef_search: int | None = None, **options: Unpack[TableSearchOptions]) -> None:
        super().__init__(settings={"k_rank": k_rank, "similarity_threshold": similarity_threshold,
                                   "ef_search": ef_search, **settings}, **options)

    def has_query(self, query: dict[str, Any]) -> bool:
        return bool(query.get("similarity_search"))  # the vector branch is what the fusion is of


@register_builtin
class HybridFTSSearch(HybridSearch):
    """BM25 and vector rankings of one table fused by Reciprocal Rank Fusion (``score``: the fused value).

    BM25 reads ``keywords`` when the LM writes them, else the ``similarity_search`` queries.

    Args:
        k_rank: RRF's constant (default 60). similarity_threshold, fulltext_threshold: each branch's.
        ef_search: HNSW search depth. conjunctive, bm25_b, bm25_k: as :class:`FullTextSearch`'s.
        **options: every retriever's (:class:`~promptgym.modules.retrievers.table_search.TableSearch`).

    The fields its Generator writes (a whole program: :mod:`promptgym.modules.retrievers`):

    >>> import promptgym as synalinks
    >>> list(synalinks.HybridFTSSearch.query_model.model_fields)
    ['similarity_search', 'keywords']
    """

    query_model = HybridFTSSearchInput
    fulltext_threshold = Setting()
    conjunctive = Setting()
    bm25_b = Setting()
    bm25_k = Setting()

    def __init__(self, *, k_rank: int = 60, similarity_threshold: float | None = None,
                 fulltext_threshold: float | None = None, ef_search: int | None = None, conjunctive: bool = False,
                 bm25_b: float | None = None, bm25_k: float | None = None,
                 **options: Unpack[TableSearchOptions]) -> None:
        super().__init__(settings={"fulltext_threshold": fulltext_threshold, "conjunctive": conjunctive,
                                   "bm25_b": bm25_b, "bm25_k": bm25_k}, k_rank=k_rank,
                         similarity_threshold=similarity_threshold, ef_search=ef_search, **options)

    async def search(self, query: dict[str, Any], table_name: str) -> Any:
        return await self.knowledge_base.hybrid_fts_search(
            query["similarity_search"], keywords=query.get("keywords") or None, table_name=table_name, k=self.k,
            k_rank=self.k_rank, similarity_threshold=self.similarity_threshold,
            fulltext_threshold=self.fulltext_threshold, ef_search=self.ef_search, conjunctive=self.conjunctive,
            bm25_b=self.bm25_b, bm25_k=self.bm25_k, output_format=self.output_format)


@register_builtin
class HybridRegexSearch(HybridSearch):
    """Vector ranking and regex matches of one table fused by Reciprocal Rank Fusion.

    Without ``regex_patterns`` in the LM's query it is plain vector similarity.

    Args:
        k_rank: RRF's constant (default 60). similarity_threshold: the vector branch's. ef_search: HNSW depth.
        fields, case_sensitive: as :class:`RegexSearch`'s.
        **options: every retriever's (:class:`~promptgym.modules.retrievers.table_search.TableSearch`).

    The fields its Generator writes (a whole program: :mod:`promptgym.modules.retrievers`):

    >>> import promptgym as synalinks
    >>> list(synalinks.HybridRegexSearch.query_model.model_fields)
    ['similarity_search', 'regex_patterns']
    """

    query_model = HybridRegexSearchInput
    fields = Setting()
    case_sensitive = Setting()

    def __init__(self, *, k_rank: int = 60, similarity_threshold: float | None = None, ef_search: int | None = None,
                 fields: list[str] | None = None, case_sensitive: bool = True,
                 **options: Unpack[TableSearchOptions]) -> None:
        super().__init__(settings={"fields": list(fields) if fields is not None else None,
                                   "case_sensitive": case_sensitive}, k_rank=k_rank,
                         similarity_threshold=similarity_threshold, ef_search=ef_search, **options)

    def has_query(self, query: dict[str, Any]) -> bool:
        return bool(query.get("similarity_search") or query.get("regex_patterns"))  # either signal will do

    async def search(self, query: dict[str, Any], table_name: str) -> Any:
        return await self.knowledge_base.hybrid_regex_search(
            query.get("similarity_search") or None, pattern_or_patterns=query.get("regex_patterns") or None,
            table_name=table_name, k=self.k, k_rank=self.k_rank, similarity_threshold=self.similarity_threshold,
            ef_search=self.ef_search, fields=self.fields, case_sensitive=self.case_sensitive,
            output_format=self.output_format)
