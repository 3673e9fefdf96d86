"""synalinks' single-table retrievers: an LM writes the query, one table of a KnowledgeBase answers it.

The graph retrievers (entities, relations, paths, local/global graph search) need a graph store,
which promptgym does not have.
"""

from promptgym.modules.retrievers.fulltext_search import FullTextSearch
from promptgym.modules.retrievers.hybrid_search import HybridFTSSearch, HybridRegexSearch
from promptgym.modules.retrievers.regex_search import RegexSearch
from promptgym.modules.retrievers.similarity_search import SimilaritySearch

__all__ = ["FullTextSearch", "HybridFTSSearch", "HybridRegexSearch", "RegexSearch", "SimilaritySearch"]
