"""What a retriever outputs: the LM's query (optional), ``result`` (the rows), then the input's fields (optional).

The input's fields come last, after the rows: the next Generator then reads
the question right before it answers (docs/benchmarks.md, "RAG: where the
question goes"). :class:`RetrieveKnowledge` and the single-table retrievers
(:mod:`promptgym.modules.retrievers`) both output this shape.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.base_models import GenericResult
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.json_ops import concatenate_json, concatenate_schema
from promptgym.modules.knowledge.values import as_json_data_model
from promptgym.modules.symbolic import SymbolicDataModel


def search_results(rows: Any, query: Any, inputs: Any, *, return_query: bool, return_inputs: bool,
                   name: str) -> JsonDataModel:
    """The output value of a search whose query (a JsonDataModel) found ``rows`` for ``inputs``."""
    json_value: dict[str, Any] = {"result": rows}
    schema = GenericResult.get_schema()
    if return_query:
        json_value, schema = concatenate_json(query.get_json(), json_value), concatenate_schema(query.get_schema(), schema)
    if return_inputs:
        given = as_json_data_model(inputs)
        json_value = concatenate_json(json_value, given.get_json())
        schema = concatenate_schema(schema, given.get_schema())
    return JsonDataModel(json=json_value, schema=schema, name=name)


def search_results_spec(query: Any, inputs: Any, *, return_query: bool, return_inputs: bool,
                        name: str) -> SymbolicDataModel:
    """The symbolic output of :func:`search_results` for symbolic ``query`` and ``inputs``."""
    schema = GenericResult.get_schema()
    if return_query:
        schema = concatenate_schema(query.get_schema(), schema)
    if return_inputs:
        schema = concatenate_schema(schema, inputs.get_schema())
    return SymbolicDataModel(schema=schema, name=name)
