"""``Text2SQL``: an LM writes one read-only SELECT for the request; the knowledge base runs it.

    outputs = await Text2SQL(knowledge_base=kb, language_model=lm, k=50)(inputs)
    # {"sql_query": "SELECT ...", "result": [{row}, ...]}

The knowledge base's schema (tables, columns, types, descriptions) is added to
the input at every call, so a table added later is seen. Safety is the
knowledge base's: ``sql(read_only=True)`` parses the query with DuckDB's own
parser and refuses anything but SELECT, and its connection cannot read files.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.data_model import DataModel, Field
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.json_ops import concatenate_json, concatenate_schema
from promptgym.core.serialization import register_builtin, serialize_object, with_objects
from promptgym.modules.generator import Generator
from promptgym.modules.knowledge.update_knowledge import knowledge_base_of
from promptgym.modules.knowledge.values import as_json_data_model
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel


def default_text2sql_instructions() -> str:
    return """Your task is to translate the user request into a single read-only SQL
query against the tables described in the `database_schema` field.

Constraints:
- Emit exactly one `SELECT` statement. `INSERT`, `UPDATE`, `DELETE`,
  `DROP`, `ALTER`, `COPY ... TO`, and multi-statement queries are
  rejected by the engine.
- Table and column names are case-sensitive: tables are PascalCase
  (e.g. ``Customer``), columns are snake_case (e.g. ``customer_id``).
- Use the `database_schema` field already provided in the input to
  pick the right tables and columns; do not invent identifiers.
- When the user asks for "the top N" or "a few", add an explicit
  ``LIMIT`` clause; result sets are capped server-side anyway."""


def format_schema(knowledge_base: Any) -> str:
    """Each table with its columns, their types and descriptions, as text for the prompt."""
    sections = []
    for model in knowledge_base.get_symbolic_data_models():
        schema = model.get_schema()
        columns = [f"  - {name} ({spec.get('type', 'unknown')}): {spec.get('description', '')}"
                   for name, spec in schema.get("properties", {}).items()]
        sections.append(f"Table: {schema.get('title', 'Unknown')}\n" + "\n".join(columns))
    return "\n\n".join(sections)


_format_schema = format_schema  # synalinks' name


class DatabaseSchema(DataModel):
    database_schema: str = Field(description="The available tables and their columns")


class SQLQuery(DataModel):
    sql_query: str = Field(description="A single read-only SELECT SQL query")


class SQLQueryResult(DataModel):
    sql_query: str = Field(description="The SQL query that was executed")
    result: list[Any] = Field(description="The rows returned by the query")


@register_builtin
class Text2SQL(Module):
    """Translate a request into SQL and run it read-only; ``k`` caps the rows (None: the query as written)."""

    def __init__(self, *, knowledge_base: Any = None, language_model: Any = None, k: int | None = 50,
                 output_format: str = "json", prompt_template: str | None = None, examples: list[Any] | None = None,
                 instructions: str | None = None, seed_instructions: Any = None, temperature: float | None = None,
                 max_tokens: int | None = None, top_p: float | None = None, top_k: int | None = None,
                 reasoning_effort: str | None = None, use_inputs_schema: bool = False,
                 use_outputs_schema: bool = False, return_inputs: bool = False, name: str | None = None,
                 description: str | None = None, trainable: bool = True) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if output_format not in ("json", "csv"):
            raise ValueError(f"`output_format` must be 'json' or 'csv', got {output_format!r}")
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise ValueError(f"`k` must be a positive integer or None, got {k!r}")
        self.knowledge_base = knowledge_base_of(knowledge_base)
        self.language_model = language_model
        self.k = k
        self.output_format = output_format
        self.instructions = instructions or default_text2sql_instructions()
        self.return_inputs = return_inputs
        self._generator_options = {"prompt_template": prompt_template, "seed_instructions": seed_instructions,
                                   "temperature": temperature, "max_tokens": max_tokens, "top_p": top_p,
                                   "top_k": top_k, "reasoning_effort": reasoning_effort,
                                   "use_inputs_schema": use_inputs_schema, "use_outputs_schema": use_outputs_schema}
        self.generator = Generator(data_model=SQLQuery, language_model=language_model, instructions=self.instructions,
                                   examples=examples, return_inputs=False, name="generator_" + self.name,
                                   **self._generator_options)

    def _with_schema(self, inputs: Any) -> JsonDataModel:
        given = as_json_data_model(inputs)
        return JsonDataModel(json=concatenate_json(given.get_json(),
                                                   {"database_schema": format_schema(self.knowledge_base)}),
                             schema=concatenate_schema(given.get_schema(), DatabaseSchema.get_schema()),
                             name="inputs_with_schema_" + self.name)

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if not inputs:
            return None
        query = await self.generator(self._with_schema(inputs), training=training)
        if not query:
            return None
        sql = str(query.get_json().get("sql_query", "")).strip()
        body = sql.rstrip(";").strip()
        rows: Any = []
        if body:
            executed = body if self.k is None else f"SELECT * FROM ({body}) LIMIT {self.k}"
            try:
                rows = await self.knowledge_base.sql(executed, read_only=True, output_format=self.output_format)
            except Exception as error:  # noqa: BLE001 - a bad query is data for the program, not a crash
                rows = [{"error": str(error)}]
        json_value, schema = {"sql_query": sql, "result": rows}, SQLQueryResult.get_schema()
        if self.return_inputs:
            given = as_json_data_model(inputs)
            json_value = concatenate_json(given.get_json(), json_value)
            schema = concatenate_schema(given.get_schema(), schema)
        return JsonDataModel(json=json_value, schema=schema, name=self.name)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        await self.generator(SymbolicDataModel(schema=concatenate_schema(inputs.get_schema(),
                                                                         DatabaseSchema.get_schema())),
                             training=training)
        schema = SQLQueryResult.get_schema()
        if self.return_inputs:
            schema = concatenate_schema(inputs.get_schema(), schema)
        return SymbolicDataModel(schema=schema, name=self.name)

    def get_config(self) -> dict[str, Any]:
        return {"k": self.k, "output_format": self.output_format,
                "instructions": self.generator.state.value.get("instructions", self.instructions),
                "return_inputs": self.return_inputs, **self._generator_options,
                "knowledge_base": serialize_object(self.knowledge_base),
                "language_model": serialize_object(self.language_model) if self.language_model is not None else None,
                **super().get_config()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Text2SQL":
        return cls(**with_objects(config, language_model="language model"))
