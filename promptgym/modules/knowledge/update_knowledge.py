"""``UpdateKnowledge``: upsert each input record into a knowledge base and pass it on.

    stored = await UpdateKnowledge(knowledge_base=kb)(embedded)   # kb.update(record); output: the record
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.core.tree import flatten, map_structure, pack_as
from promptgym.modules.knowledge.values import as_json_data_model, value_name
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel


def knowledge_base_of(value: Any) -> Any:
    """A knowledge base object, or one rebuilt from its saved config (the registry resolves the class)."""
    if isinstance(value, dict):
        return deserialize_object(value, expected="knowledge base")
    if value is None:
        raise ValueError("a knowledge module needs knowledge_base= (a KnowledgeBase)")
    return value


@register_builtin
class UpdateKnowledge(Module):
    """Store each input record (its first field is the key); outputs the records unchanged."""

    def __init__(self, *, knowledge_base: Any = None, name: str | None = None, description: str | None = None,
                 trainable: bool = False) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        self.knowledge_base = knowledge_base_of(knowledge_base)

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if not inputs:
            return None
        leaves = [None if leaf is None else as_json_data_model(leaf) for leaf in flatten(inputs)]
        records = [leaf for leaf in leaves if leaf is not None]
        if records:
            await self.knowledge_base.update(records)
        return pack_as(inputs, [None if leaf is None else leaf.clone(name="updated_" + (value_name(leaf) or self.name))
                                for leaf in leaves])

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return map_structure(lambda spec: SymbolicDataModel(schema=spec.get_schema(),
                                                            name="updated_" + (value_name(spec) or self.name)), inputs)

    def get_config(self) -> dict[str, Any]:
        return {"knowledge_base": serialize_object(self.knowledge_base), **super().get_config()}
