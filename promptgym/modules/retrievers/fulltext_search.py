"""``FullTextSearch``: the LM writes ``fulltext_search`` keywords, BM25 ranks one table's rows."""

from __future__ import annotations

from typing import Any, Unpack

from promptgym.core.serialization import register_builtin
from promptgym.modules.retrievers.queries import FullTextSearchInput
from promptgym.modules.retrievers.table_search import Setting, TableSearch, TableSearchOptions


@register_builtin
class FullTextSearch(TableSearch):
    """BM25 full-text search on one table; ``score`` in [0, 1], best first.

    Args:
        threshold: drop rows scoring below it. conjunctive: every term must match (default: any).
        bm25_b, bm25_k: BM25's ``b`` and ``k1`` (None: DuckDB's defaults).
        **options: every retriever's (:class:`~promptgym.modules.retrievers.table_search.TableSearch`).

    The fields its Generator writes (a whole program: :mod:`promptgym.modules.retrievers`):

    >>> import promptgym as synalinks
    >>> list(synalinks.FullTextSearch.query_model.model_fields)
    ['fulltext_search']
    """

    query_model = FullTextSearchInput
    threshold = Setting()
    conjunctive = Setting()
    bm25_b = Setting()
    bm25_k = Setting()

    def __init__(self, *, threshold: float | None = None, conjunctive: bool = False, bm25_b: float | None = None,
                 bm25_k: float | None = None, **options: Unpack[TableSearchOptions]) -> None:
        super().__init__(settings={"threshold": threshold, "conjunctive": conjunctive, "bm25_b": bm25_b,
                                   "bm25_k": bm25_k}, **options)

    async def search(self, query: dict[str, Any], table_name: str) -> Any:
        return await self.knowledge_base.fulltext_search(
            query["fulltext_search"], table_name=table_name, k=self.k, threshold=self.threshold,
            conjunctive=self.conjunctive, bm25_b=self.bm25_b, bm25_k=self.bm25_k, output_format=self.output_format)
