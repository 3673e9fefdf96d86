"""``SimilaritySearch``: the LM writes ``similarity_search`` queries, the nearest rows of one table come back."""

from __future__ import annotations

from typing import Any, Unpack

from promptgym.core.serialization import register_builtin
from promptgym.modules.retrievers.queries import SimilaritySearchInput
from promptgym.modules.retrievers.table_search import Setting, TableSearch, TableSearchOptions


@register_builtin
class SimilaritySearch(TableSearch):
    """Vector similarity search on one table; ``score`` is the distance (lower is closer).

    Args:
        threshold: drop rows farther than this distance. ef_search: HNSW search depth (None: the index's).
        **options: every retriever's (:class:`~promptgym.modules.retrievers.table_search.TableSearch`).

    The fields its Generator writes (a whole program: :mod:`promptgym.modules.retrievers`):

    >>> import promptgym as synalinks
    >>> list(synalinks.SimilaritySearch.query_model.model_fields)
    ['similarity_search']
    """

    query_model = SimilaritySearchInput
    threshold = Setting()
    ef_search = Setting()

    def __init__(self, *, threshold: float | None = None, ef_search: int | None = None,
                 **options: Unpack[TableSearchOptions]) -> None:
        super().__init__(settings={"threshold": threshold, "ef_search": ef_search}, **options)

    async def search(self, query: dict[str, Any], table_name: str) -> Any:
        return await self.knowledge_base.similarity_search(
            query["similarity_search"], table_name=table_name, k=self.k, threshold=self.threshold,
            ef_search=self.ef_search, output_format=self.output_format)
