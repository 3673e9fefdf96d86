"""synalinks' rerankers: merging the ranked results of several retrievers."""

from promptgym.modules.rerankers.rrf_reranker import RRFReranker

__all__ = ["RRFReranker"]
