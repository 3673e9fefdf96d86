"""``RegexSearch``: the LM writes one RE2 pattern, the rows of one table whose text matches it come back."""

from __future__ import annotations

from typing import Any, Unpack

from promptgym.core.serialization import register_builtin
from promptgym.modules.retrievers.queries import RegexSearchInput
from promptgym.modules.retrievers.table_search import Setting, TableSearch, TableSearchOptions


@register_builtin
class RegexSearch(TableSearch):
    """Regex matching (RE2: linear time, so an LM's pattern is safe) on one table's string fields.

    Args:
        fields: the fields to match (default: every string field). case_sensitive: default True.
        **options: every retriever's (:class:`~promptgym.modules.retrievers.table_search.TableSearch`).

    The fields its Generator writes (a whole program: :mod:`promptgym.modules.retrievers`):

    >>> import promptgym as synalinks
    >>> list(synalinks.RegexSearch.query_model.model_fields)
    ['regex_search']
    """

    query_model = RegexSearchInput
    fields = Setting()
    case_sensitive = Setting()

    def __init__(self, *, fields: list[str] | None = None, case_sensitive: bool = True,
                 **options: Unpack[TableSearchOptions]) -> None:
        super().__init__(settings={"fields": list(fields) if fields is not None else None,
                                   "case_sensitive": case_sensitive}, **options)

    async def search(self, query: dict[str, Any], table_name: str) -> Any:
        return await self.knowledge_base.regex_search(
            query["regex_search"], table_name=table_name, fields=self.fields, case_sensitive=self.case_sensitive,
            k=self.k, output_format=self.output_format)
