"""The shared part of synalinks' single-table retrievers: an LM writes the query fields, one table answers them.

    found = await SimilaritySearch(knowledge_base=kb, language_model=lm, data_model=Document, k=5)(inputs)
    # {"similarity_search": [...], "result": [{row}, ...], ..the input's fields..}

A subclass names its query DataModel (the fields its Generator writes) and
runs one :class:`~promptgym.knowledge_bases.KnowledgeBase` search with them;
:class:`TableSearch` does the rest as :class:`RetrieveKnowledge` does: the
query writer is a Generator named after the module (its trace steps are the
module's, where optimizers look for its demonstrations), its prompt is the
trainable variable, and the search options live in a ``settings`` variable
read at every call, checked when set and saved with the program. As there,
the input's fields come after the rows (the next Generator reads the
question right before it answers; docs/benchmarks.md) and query lists are
bounded (``MAX_QUERIES``).

With no ``table_name`` (nor a schema whose title names one), the Generator
also writes ``table_name``, one of the knowledge base's tables (an enum), per call.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypedDict

from pydantic import create_model

from promptgym.core.data_model import DataModel, Field
from promptgym.core.serialization import deserialize_object, serialize_object
from promptgym.modules.generator import Generator
from promptgym.modules.knowledge.search_results import search_results, search_results_spec
from promptgym.modules.knowledge.search_settings import count_problem
from promptgym.modules.knowledge.update_knowledge import knowledge_base_of
from promptgym.modules.module import Module

OUTPUT_FORMATS = ("json", "csv")


class TableSearchOptions(TypedDict, total=False):
    """The keyword arguments every single-table retriever takes (synalinks' names and defaults)."""

    knowledge_base: Any
    language_model: Any
    schema: dict[str, Any] | None
    data_model: Any
    table_name: str | None
    k: int
    output_format: str
    prompt_template: str | None
    examples: list[Any] | None
    instructions: str | None
    seed_instructions: Any
    temperature: float | None
    max_tokens: int | None
    top_p: float | None
    top_k: int | None
    use_inputs_schema: bool
    use_outputs_schema: bool
    return_inputs: bool
    return_query: bool
    name: str | None
    description: str | None
    trainable: bool


class Setting:
    """A search option read from the module's ``settings`` variable at every call (``module.threshold``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, module: Any, owner: type | None = None) -> Any:
        return self if module is None else module.settings.value.get(self.name)


def check_settings(settings: dict[str, Any]) -> str | None:
    """What is wrong with a ``settings`` value (the variable refuses it), or None."""
    if problem := count_problem(settings, ("k", "k_rank"), default=1):
        return problem
    for key in ("threshold", "similarity_threshold", "fulltext_threshold", "bm25_b", "bm25_k"):
        value = settings.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            return f"`{key}` must be a number or None, got {value!r}"
    return None


def table_names(knowledge_base: Any) -> list[str]:
    """The knowledge base's tables, sorted (those the Generator may pick from)."""
    return sorted({model.get_schema().get("title") for model in knowledge_base.get_symbolic_data_models()} - {None})


def with_table_choice(query_model: type[DataModel], tables: list[str]) -> type[DataModel]:
    """The query model plus a required ``table_name``: one of ``tables`` (an enum; a free string when none).

    A subclass, not a schema: a Generator given a schema rebuilds a model from it that drops the query
    lists' bounds, and writes a one-table enum as ``const``.
    """
    extra = {"enum": tables} if tables else None
    choice = Field(description="The knowledge-base table to search, chosen to best answer the inputs.",
                   json_schema_extra=extra)
    return create_model(query_model.__name__, __base__=query_model, table_name=(str, choice))


class TableSearch(Module):
    """Write this retriever's query fields with an LM, search one table with them, output the rows found.

    Args (every retriever's; see :class:`TableSearchOptions`):
        knowledge_base: the KnowledgeBase to search. language_model: writes the query.
        schema / data_model: the table's row; its title is the default ``table_name``.
        table_name: the table to search; None (and no schema): the LM picks one of the knowledge base's per call.
        k: how many rows at most (default 10). output_format: ``"json"`` (rows) or ``"csv"`` (one string).
        prompt_template, examples, instructions, seed_instructions, temperature, max_tokens, top_p, top_k,
            use_inputs_schema, use_outputs_schema: the query writer's (a Generator).
        return_inputs, return_query: keep the input's fields / the query in the output (both default True).
    """

    query_model: ClassVar[type[DataModel]]
    """The fields the query writer fills in."""
    labels_are_demonstrations = False
    """A program's label shows no search query: the query writer's demonstrations come from well-scored runs."""
    k = Setting()

    def __init__(self, *, settings: dict[str, Any], knowledge_base: Any = None, language_model: Any = None,
                 schema: dict[str, Any] | None = None, data_model: Any = None, table_name: str | None = None,
                 k: int = 10, output_format: str = "json", prompt_template: str | None = None,
                 examples: list[Any] | None = None, instructions: str | None = None, seed_instructions: Any = None,
                 temperature: float | None = None, max_tokens: int | None = None, top_p: float | None = None,
                 top_k: int | None = None, use_inputs_schema: bool = False, use_outputs_schema: bool = False,
                 return_inputs: bool = True, return_query: bool = True, name: str | None = None,
                 description: str | None = None, trainable: bool = True) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"`output_format` must be 'json' or 'csv', got {output_format!r}")
        self.knowledge_base = knowledge_base_of(knowledge_base)
        self.language_model = language_model
        self.schema = schema if schema is not None or data_model is None else data_model.get_schema()
        self.table_name = table_name or (self.schema or {}).get("title") or None
        self.output_format = output_format
        self.return_inputs = return_inputs
        self.return_query = return_query
        self.settings = self.add_variable("settings", {"k": k, **settings}, description="the search settings",
                                          trainable=False, check=check_settings)
        self._generator_options = {"prompt_template": prompt_template, "seed_instructions": seed_instructions,
                                   "temperature": temperature, "max_tokens": max_tokens, "top_p": top_p,
                                   "top_k": top_k, "use_inputs_schema": use_inputs_schema,
                                   "use_outputs_schema": use_outputs_schema}
        query_model = self.query_model
        if self.table_name is None:
            query_model = with_table_choice(query_model, table_names(self.knowledge_base))
        self.query_generator = Generator(data_model=query_model, language_model=language_model, instructions=instructions,
                                         examples=examples, return_inputs=False, name=self.name,
                                         **self._generator_options)

    @property
    def prompt_variable(self) -> Any:
        """The query writer's prompt (instructions, examples): what optimizers train."""
        return self.query_generator.state

    def has_query(self, query: dict[str, Any]) -> bool:
        """Whether the written query gives the search something to look for (else the output is None)."""
        return any(query.get(field) for field in self.query_model.model_fields)

    async def search(self, query: dict[str, Any], table_name: str) -> Any:
        """The rows of ``table_name`` this query finds (each subclass's one KnowledgeBase search)."""
        raise NotImplementedError

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if not inputs:
            return None
        query = await self.query_generator(inputs, training=training)
        if not query:
            return None
        query_json = query.get_json()
        table_name = self.table_name or query_json.get("table_name")
        if not table_name or not self.has_query(query_json):
            return None
        rows = await self.search(query_json, table_name)
        return search_results(rows, query, inputs, return_query=self.return_query, return_inputs=self.return_inputs,
                              name=self.name)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        query = await self.query_generator(inputs, training=training)
        return search_results_spec(query, inputs, return_query=self.return_query, return_inputs=self.return_inputs,
                                   name=self.name)

    def get_config(self) -> dict[str, Any]:
        state = self.query_generator.state.value
        return {**self.settings.value, "schema": self.schema, "table_name": self.table_name,
                "output_format": self.output_format, "instructions": state.get("instructions"),
                "examples": state.get("examples"), **self._generator_options,
                "return_inputs": self.return_inputs, "return_query": self.return_query,
                "knowledge_base": serialize_object(self.knowledge_base),
                "language_model": serialize_object(self.language_model) if self.language_model is not None else None,
                **super().get_config()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "TableSearch":
        config = dict(config)
        if isinstance(config.get("language_model"), dict):
            config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)
