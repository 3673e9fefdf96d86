"""``RetrieveKnowledge``: an LM writes search queries for the input, the knowledge base answers them.

    inputs = Input(data_model=Query)
    found = await RetrieveKnowledge(knowledge_base=kb, language_model=lm, k=5)(inputs)
    # {"tables": [...], "search": [...], "result": [{row}, ...], ..the input's fields..}

Without a ``language_model`` the input's own text is the search, as DSPy's
``Embeddings`` retriever searches with the question: no model call, so a
RAG program answers in one call instead of two, and the search is exactly
what ``FineTune(target="embedder")`` tuned the query side on. A small
model's queries can be no better than the question and too degenerate to
tune the embedder on (docs/benchmarks.md, the RAG sections).

The input's fields come last, after the rows: the next Generator then reads
the question right before it answers. With the question first, the embedded
0.5B model copied a whole retrieved profile as its answer instead of the few
words asked for (docs/benchmarks.md, "RAG: where the question goes").

The query writer is a Generator: its instructions and examples are the
trainable variable an optimizer rewrites, like any Generator's. The search
settings (``k``, ``search_type``, the thresholds, ``k_rank``) live in a
second variable, ``settings``, read at every call and saved with the
program; a value outside its range is refused when it is set. A third,
``query_adapter`` (off by default), is a linear map on the query vectors of
vector and hybrid searches that ``EmbedderTuning`` trains
(:mod:`promptgym.modules.knowledge.query_adapter`). A fourth,
``query_embedder`` (null by default: the knowledge base's own), names the
model that embeds the search terms, such as the tuned e5 that
``EmbedderTuning`` writes (:mod:`promptgym.modules.knowledge.query_embedder`);
the adapter, if on, applies to its vectors. Documents keep their vectors.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, get_args

from pydantic import StringConstraints

from promptgym.core.data_model import DataModel, Field
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.modules.generator import Generator
from promptgym.modules.knowledge.query_adapter import OFF, apply_adapter, check_adapter
from promptgym.modules.knowledge.query_embedder import BASE, QueryEmbedders, check_query_embedder
from promptgym.modules.knowledge.read_only import KnowledgeBaseWriteRefused
from promptgym.modules.knowledge.search_results import search_results, search_results_spec
from promptgym.modules.knowledge.search_settings import count_problem
from promptgym.modules.knowledge.update_knowledge import knowledge_base_of
from promptgym.modules.knowledge.values import as_json_data_model
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.modules.tracing import record_step

SearchType = Literal["similarity", "fulltext", "hybrid_fts", "regex", "hybrid_regex"]
SEARCH_TYPES: list[str] = list(get_args(SearchType))
_ALIASES = {"hybrid": "hybrid_fts"}
_DESCENDING = ("fulltext", "hybrid_fts", "hybrid_regex")
_ADAPTED = ("similarity", "hybrid_fts", "hybrid_regex")
"""The search types with a vector branch: those the query adapter changes."""


def default_retriever_instructions(tables: list[str], search_type: str = "hybrid_fts") -> str:
    """synalinks' instructions for the query writer: which tables, and what to put in ``search`` (and ``patterns``)."""
    if search_type == "regex":
        guidance = ("The `search` field should be a list of regular-expression patterns (RE2 syntax) to match against "
                    "the text fields of the chosen tables. Prefer anchors, character classes, and alternation over "
                    "natural-language phrasing; the patterns are matched literally, not interpreted.")
    elif search_type == "hybrid_regex":
        guidance = ("Emit **both** a natural-language `search` list (for vector similarity over the chosen tables) AND "
                    "a `patterns` list of regular-expression patterns (RE2 syntax) that capture the exact textual "
                    "shape of what you are looking for (anchors, character classes, alternation). The two signals are "
                    "merged by Reciprocal Rank Fusion, so it is OK for each list to err on the side of recall.")
    else:
        guidance = "The `search` field should be a list of natural language search queries for the information to look for."
    return (f"Your task is to retrieve information among the following tables: {tables}.\n"
            "First, decide step-by-step which tables you need, then use the `search` to\nperform a lookup.\n"
            f"{guidance}")


MAX_QUERIES = 5
"""The most queries (and patterns) one call writes. Unbounded, a small model at temperature 0 can go on
listing variations of its query ("..., his instrument, his instrument's instrument, ...") until
``max_tokens`` cuts the JSON, and its retries repeat the same answer: with the bound the grammar (and
a server's structured output) closes the list."""
MAX_TABLES = 16
Query = Annotated[str, StringConstraints(max_length=120)]
"""One query or pattern: a question's worth of words (the same run-on, inside one string, is cut here)."""


class SearchQuery(DataModel):
    tables: list[str] = Field(description="The tables to lookup", max_length=MAX_TABLES)
    search: list[Query] = Field(description="The list of similarity search request", max_length=MAX_QUERIES)


class InputSearch(DataModel):
    search: list[str] = Field(description="The input's own text, searched as it is")


class HybridRegexSearchQuery(DataModel):
    tables: list[str] = Field(description="The tables to lookup", max_length=MAX_TABLES)
    search: list[Query] = Field(description="Natural-language queries for vector similarity", max_length=MAX_QUERIES)
    patterns: list[Query] = Field(description="Regex patterns (RE2 syntax) for exact-shape matching",
                                max_length=MAX_QUERIES)


def check_settings(settings: dict[str, Any]) -> str | None:
    """What is wrong with a ``settings`` value (the variable refuses it), or None."""
    if settings.get("search_type") not in SEARCH_TYPES:
        return f"search_type must be one of {SEARCH_TYPES}, got {settings.get('search_type')!r}"
    return count_problem(settings, ("k", "k_rank"))


def _signature(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def input_text(fields: dict[str, Any]) -> str:
    """The search a retriever without a language model runs: the input's non-empty field values, one per line
    (a value that is not a string as JSON).

    >>> input_text({"question": "Where was Ada born?", "hint": ""})
    'Where was Ada born?'
    """
    return "\n".join(value if isinstance(value, str) else json.dumps(value, default=str)
                     for value in fields.values() if value not in (None, "", [], {}))


@register_builtin
class RetrieveKnowledge(Module):
    """Write search queries with an LM (or, without one, search with the input's text), run them on the knowledge
    base's tables, output the rows found.

    Args:
        knowledge_base: the KnowledgeBase to search.
        language_model: writes the queries; None searches with the input's own text (one search per call, no
            model call, no query prompt to train).
        data_models: the tables it may search (default: every table of the knowledge base).
        search_type: ``"hybrid_fts"`` (default; ``"hybrid"`` is accepted), ``"similarity"``, ``"fulltext"``,
            ``"regex"`` or ``"hybrid_regex"``.
        k: how many rows at most; ``similarity_threshold``, ``fulltext_threshold``, ``k_rank``, ``fields``,
            ``case_sensitive``: passed to the search.
        instructions, examples, seed_instructions, prompt_template, temperature, ...: the query writer's (a Generator).
        return_inputs, return_query: keep the input's fields / the queries in the output (both default True).
    """

    def __init__(self, *, knowledge_base: Any = None, language_model: Any = None, data_models: Any = None,
                 search_type: str = "hybrid_fts", k: int = 10, similarity_threshold: float | None = None,
                 fulltext_threshold: float | None = None, k_rank: int = 60, fields: list[str] | None = None,
                 case_sensitive: bool = True, prompt_template: str | None = None, examples: list[Any] | None = None,
                 instructions: str | None = None, seed_instructions: Any = None, temperature: float | None = None,
                 max_tokens: int | None = None, top_p: float | None = None, top_k: int | None = None,
                 use_inputs_schema: bool = False, use_outputs_schema: bool = False, return_inputs: bool = True,
                 return_query: bool = True, name: str | None = None, description: str | None = None,
                 trainable: bool = True) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        search_type = _ALIASES.get(search_type, search_type)
        if search_type not in SEARCH_TYPES:
            raise ValueError(f"`search_type` must be one of {SEARCH_TYPES}, got '{search_type}'")
        if language_model is None and search_type in ("regex", "hybrid_regex"):
            raise ValueError(f"search_type='{search_type}' needs a language_model to write the patterns: without "
                             "one the input's text is the search, and a question is not a regular expression")
        self.knowledge_base = knowledge_base_of(knowledge_base)
        self.language_model = language_model
        self.data_models = list(data_models) if data_models else self.knowledge_base.get_symbolic_data_models()
        tables = [model.get_schema().get("title") for model in self.data_models]
        self.instructions = instructions or default_retriever_instructions(tables, search_type)
        self.fields = fields
        self.case_sensitive = case_sensitive
        self.return_inputs = return_inputs
        self.return_query = return_query
        self._generator_options = {"prompt_template": prompt_template, "seed_instructions": seed_instructions,
                                   "temperature": temperature, "max_tokens": max_tokens, "top_p": top_p,
                                   "top_k": top_k, "use_inputs_schema": use_inputs_schema,
                                   "use_outputs_schema": use_outputs_schema}
        self.settings = self.add_variable("settings", {
            "search_type": search_type, "k": k, "k_rank": k_rank, "similarity_threshold": similarity_threshold,
            "fulltext_threshold": fulltext_threshold}, description="the search settings", trainable=False,
            check=check_settings)
        # not trainable: prompt optimizers leave it alone; EmbedderTuning assigns it (docs/knowledge.md)
        self.query_adapter = self.add_variable("query_adapter", dict(OFF), trainable=False, check=check_adapter,
                                               description="a linear map on the query vectors (null: off)")
        self.query_embedder = self.add_variable("query_embedder", dict(BASE), trainable=False,
                                                check=check_query_embedder,
                                                description="the model that embeds the queries (null: the "
                                                            "knowledge base's own)")
        self._query_embedders = QueryEmbedders()
        self.search_query_generator = None if language_model is None else Generator(
            data_model=HybridRegexSearchQuery if search_type == "hybrid_regex" else SearchQuery,
            language_model=language_model, instructions=self.instructions, examples=examples,
            # the retriever's own name: its trace steps are then the retriever's, which is where optimizers look
            # for the demonstrations of its prompt_variable
            return_inputs=False, name=self.name, **self._generator_options)

    labels_are_demonstrations = False
    """A program's label shows no search query: the query writer's demonstrations come from well-scored runs."""

    @property
    def prompt_variable(self) -> Any:
        """The query writer's prompt (instructions, examples): what optimizers train (None without one)."""
        return None if self.search_query_generator is None else self.search_query_generator.state

    # the settings, read from the variable at every call
    @property
    def search_type(self) -> str:
        return self.settings.value["search_type"]

    @property
    def k(self) -> int:
        return self.settings.value["k"]

    @property
    def k_rank(self) -> int:
        return self.settings.value["k_rank"]

    @property
    def similarity_threshold(self) -> float | None:
        return self.settings.value.get("similarity_threshold")

    @property
    def fulltext_threshold(self) -> float | None:
        return self.settings.value.get("fulltext_threshold")

    async def query_vectors(self, terms: list[str]) -> list[list[float]] | None:
        """The query vectors of ``terms``: by the ``query_embedder`` when one is named, then through the adapter
        when it is on (None with neither: the search embeds them with the knowledge base's model)."""
        model = self.query_embedder.value.get("model")
        if not terms or (model is None and self.query_adapter.value.get("matrix") is None):
            return None
        if model is None:
            vectors = await self.knowledge_base.adapter.embed_texts(terms)
        else:
            tables = [str(data_model.get_schema().get("title")) for data_model in self.data_models]
            vectors = await self._query_embedders.embed(model, terms, self.knowledge_base, tables)
        return apply_adapter(self.query_adapter.value, vectors)

    async def _search_table(self, table: str, terms: list[str], patterns: list[str],
                            vectors: list[list[float]] | None = None) -> list[dict[str, Any]]:
        kb, kind, k = self.knowledge_base, self.search_type, self.k
        if kind == "similarity":
            if vectors is not None:
                return await kb.similarity_search(table_name=table, vector_or_vectors=vectors, k=k,
                                                  threshold=self.similarity_threshold)
            return await kb.similarity_search(terms, table_name=table, k=k, threshold=self.similarity_threshold)
        if kind == "fulltext":
            return await kb.fulltext_search(terms, table_name=table, k=k, threshold=self.fulltext_threshold)
        if kind == "regex":
            rows: dict[str, dict[str, Any]] = {}
            for pattern in terms:
                for row in await kb.regex_search(pattern, table_name=table, fields=self.fields,
                                                 case_sensitive=self.case_sensitive, k=k):
                    rows.setdefault(_signature(row), row)
            return list(rows.values())
        if kind == "hybrid_regex":
            return await kb.hybrid_regex_search(None if vectors is not None else terms, vector_or_vectors=vectors,
                                                pattern_or_patterns=patterns or None, table_name=table, k=k,
                                                k_rank=self.k_rank, similarity_threshold=self.similarity_threshold,
                                                fields=self.fields, case_sensitive=self.case_sensitive)
        if vectors is not None:  # the words go to BM25, the adapted vectors to the vector branch
            return await kb.hybrid_fts_search(keywords=terms, vector_or_vectors=vectors, table_name=table, k=k,
                                              k_rank=self.k_rank, similarity_threshold=self.similarity_threshold,
                                              fulltext_threshold=self.fulltext_threshold)
        return await kb.hybrid_fts_search(terms, table_name=table, k=k, k_rank=self.k_rank,
                                          similarity_threshold=self.similarity_threshold,
                                          fulltext_threshold=self.fulltext_threshold)

    async def search(self, terms: list[str], patterns: list[str] | None = None, tables: list[str] | None = None,
                     vectors: list[list[float]] | None = None) -> list[dict[str, Any]]:
        """The top-``k`` rows for these queries over the chosen tables (all of them when none is known).

        ``vectors`` (one per term) are searched instead of the terms' own query vectors: how EmbedderTuning
        scores an embedder it is still training."""
        targets = [model.get_schema().get("title") for model in self.data_models]
        chosen = [table for table in targets if table in (tables or [])] or targets
        found: dict[str, dict[str, Any]] = {}
        if self.search_type not in _ADAPTED:
            vectors = None
        elif vectors is None:
            vectors = await self.query_vectors(terms)
        for table in chosen:
            try:
                rows = await self._search_table(table, terms, patterns or [], vectors)
            except KnowledgeBaseWriteRefused:
                raise  # a read-only (served) knowledge base that can't search as set up: say so, don't answer empty
            except (ValueError, LookupError, RuntimeError):  # one table failing (no text, no vectors) is not fatal
                rows = []
            for row in rows:
                found.setdefault(_signature(row), row)
        merged = list(found.values())
        if self.search_type == "similarity":
            merged.sort(key=lambda row: row.get("score", float("inf")))
        elif self.search_type in _DESCENDING:
            merged.sort(key=lambda row: row.get("score", float("-inf")), reverse=True)
        return merged[: self.k]

    async def write_query(self, inputs: Any, training: bool = False) -> Any:
        """The query writer's output for ``inputs``, or, without a language model, the input's text as the one
        search (recorded in the trace as the writer's step would be: ``EmbedderTuning`` reads it there)."""
        if self.search_query_generator is not None:
            return await self.search_query_generator(inputs, training=training)
        fields = as_json_data_model(inputs).get_json()
        text = input_text(fields)
        if not text.strip():
            return None
        record_step(self.name, fields, {"search": [text]})
        return JsonDataModel(json={"search": [text]}, schema=InputSearch.get_schema(), name="search_" + self.name)

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if not inputs:
            return None
        query = await self.write_query(inputs, training=training)
        if not query:
            return None
        query_json = query.get_json()
        terms = [str(term) for term in query_json.get("search") or []]
        patterns = [str(pattern) for pattern in query_json.get("patterns") or []]
        if not terms and not (self.search_type == "hybrid_regex" and patterns):
            return None
        rows = await self.search(terms, patterns, query_json.get("tables"))
        return search_results(rows, query, inputs, return_query=self.return_query, return_inputs=self.return_inputs,
                              name="retrieval_results_" + self.name)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        query = SymbolicDataModel(schema=InputSearch.get_schema()) if self.search_query_generator is None else \
            await self.search_query_generator(inputs, training=training)
        return search_results_spec(query, inputs, return_query=self.return_query, return_inputs=self.return_inputs,
                                   name="retrieval_results_" + self.name)

    def get_config(self) -> dict[str, Any]:
        state = {} if self.search_query_generator is None else self.search_query_generator.state.value
        return {**self.settings.value, "fields": self.fields, "case_sensitive": self.case_sensitive,
                "instructions": state.get("instructions", self.instructions), **self._generator_options,
                "return_inputs": self.return_inputs, "return_query": self.return_query,
                "knowledge_base": serialize_object(self.knowledge_base),
                "language_model": serialize_object(self.language_model) if self.language_model is not None else None,
                "data_models": [{"schema": model.get_schema()} for model in self.data_models],
                **super().get_config()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "RetrieveKnowledge":
        config = dict(config)
        if isinstance(config.get("language_model"), dict):
            config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        config["data_models"] = [SymbolicDataModel(schema=item["schema"]) for item in config.get("data_models") or []]
        return cls(**config)
