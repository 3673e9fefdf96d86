"""synalinks' single-table retrievers: an LM writes the query, one table of a KnowledgeBase answers it.

Each retriever's Generator writes its query fields from whatever comes in, one search of one table runs
with them, and the output is the query, ``result`` (the rows) and the input's fields. The graph
retrievers (entities, relations, paths, local/global graph search) need a graph store, which promptgym
does not have.

>>> import asyncio, tempfile, promptgym as synalinks
>>> from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel
>>> class Log(synalinks.DataModel):
...     id: str
...     text: str
>>> QUERIES = {"similarity_search": ["login failed"], "fulltext_search": ["login"], "regex_search": r"error \\d+",
...            "keywords": ["login"], "regex_patterns": [r"error \\d+"]}
>>> def writes(request):  # the scripted LM fills in whichever query fields it is asked for
...     return {field: QUERIES[field] for field in request.schema["properties"]}
>>> async def main():
...     kb = synalinks.KnowledgeBase(uri=tempfile.mkdtemp() + "/kb.db", data_models=[Log],
...                                  embedding_model=HashEmbeddingModel())
...     await kb.update([Log(id="a", text="error 404 on login"), Log(id="b", text="login ok"),
...                      Log(id="c", text="disk full")])
...     found = {}
...     for name in ("SimilaritySearch", "FullTextSearch", "RegexSearch", "HybridFTSSearch", "HybridRegexSearch"):
...         retriever = getattr(synalinks, name)(knowledge_base=kb, language_model=ScriptedLanguageModel(
...             respond=writes), data_model=Log, k=2)
...         found[name] = await retriever(Log(id="q", text="why do logins fail?"))
...     fused = await synalinks.RRFReranker(id_key="id", k=1)(list(found.values()))
...     return {name: [row["id"] for row in value.get("result")] for name, value in found.items()}, fused
>>> found, fused = asyncio.run(main())
>>> found
{'SimilaritySearch': ['b', 'a'], 'FullTextSearch': ['b', 'a'], 'RegexSearch': ['a'], 'HybridFTSSearch': ['b', 'a'], 'HybridRegexSearch': ['a', 'b']}
>>> [row["id"] for row in fused.get("result")]  # "a" is in all five lists, "b" in four
['a']
"""

from promptgym.modules.retrievers.fulltext_search import FullTextSearch
from promptgym.modules.retrievers.hybrid_search import HybridFTSSearch, HybridRegexSearch
from promptgym.modules.retrievers.regex_search import RegexSearch
from promptgym.modules.retrievers.similarity_search import SimilaritySearch

__all__ = ["FullTextSearch", "HybridFTSSearch", "HybridRegexSearch", "RegexSearch", "SimilaritySearch"]
