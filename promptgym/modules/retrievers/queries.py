"""The query DataModels the single-table retrievers' Generators fill in (synalinks' field names).

Lists are bounded as :class:`~promptgym.modules.knowledge.RetrieveKnowledge`'s
are (``MAX_QUERIES`` items of at most 120 characters): unbounded, a small
model at temperature 0 can go on listing variations of its query until
``max_tokens`` cuts the JSON.
"""

from __future__ import annotations

from pydantic import ConfigDict

from promptgym.core.data_model import DataModel, Field
from promptgym.modules.knowledge.retrieve_knowledge import MAX_QUERIES, Query


class RetrieverQuery(DataModel):
    """A query that ignores the keys it does not name (the schema the LM sees still forbids them).

    The retriever reads only its own fields, so an answer that also carries another retriever's
    (one reply serving two query writers, as in synalinks' RRFReranker test) is not refused.
    """

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})


class SimilaritySearchInput(RetrieverQuery):
    """Input shape for `SimilaritySearch`."""

    similarity_search: list[Query] = Field(description="Natural-language queries for vector similarity",
                                           max_length=MAX_QUERIES)


class FullTextSearchInput(RetrieverQuery):
    """Input shape for `FullTextSearch`."""

    fulltext_search: list[Query] = Field(description="Keyword queries for BM25 full-text search",
                                         max_length=MAX_QUERIES)


class RegexSearchInput(RetrieverQuery):
    """Input shape for `RegexSearch`."""

    regex_search: Query = Field(description="Regex pattern (RE2 syntax) to match against the table's string fields")


class HybridFTSSearchInput(RetrieverQuery):
    """Input shape for `HybridFTSSearch` (without ``keywords``, BM25 reads the vector side's queries)."""

    similarity_search: list[Query] = Field(description="Natural-language queries for the vector branch",
                                           max_length=MAX_QUERIES)
    keywords: list[Query] | None = Field(default=None, description="Optional keyword queries for the BM25 branch",
                                         max_length=MAX_QUERIES)


class HybridRegexSearchInput(RetrieverQuery):
    """Input shape for `HybridRegexSearch` (without ``regex_patterns``, it is plain vector similarity)."""

    similarity_search: list[Query] = Field(description="Natural-language queries for the vector branch",
                                           max_length=MAX_QUERIES)
    regex_patterns: list[Query] | None = Field(default=None,
                                               description="Regex patterns (RE2 syntax) for the regex branch",
                                               max_length=MAX_QUERIES)
