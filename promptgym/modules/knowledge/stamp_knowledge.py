"""``StampKnowledge``: add a ``created_at`` timestamp to each record (before storing it).

    stamped = await StampKnowledge()(record)   # record's fields + "created_at": "2026-...T..."
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from promptgym.core.base_models import Stamp
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.json_ops import concatenate_json, concatenate_schema
from promptgym.core.serialization import register_builtin
from promptgym.core.tree import flatten, map_structure, pack_as
from promptgym.modules.knowledge.values import as_json_data_model, value_name
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel


@register_builtin
class StampKnowledge(Module):
    """Append ``created_at`` (now, ISO 8601) to each input record."""

    def __init__(self, name: str | None = None, description: str | None = None, trainable: bool = False) -> None:
        super().__init__(name=name, description=description, trainable=trainable)

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if not inputs:
            return None

        def stamp(leaf: Any) -> Any:
            if leaf is None:
                return None
            leaf = as_json_data_model(leaf)
            return JsonDataModel(json=concatenate_json(leaf.get_json(), {"created_at": datetime.now().isoformat()}),
                                 schema=concatenate_schema(leaf.get_schema(), Stamp.get_schema()),
                                 name="stamped_" + (value_name(leaf) or self.name))

        return pack_as(inputs, [stamp(leaf) for leaf in flatten(inputs)])

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return map_structure(lambda spec: SymbolicDataModel(
            schema=concatenate_schema(spec.get_schema(), Stamp.get_schema()),
            name="stamped_" + (value_name(spec) or self.name)), inputs)
