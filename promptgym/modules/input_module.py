"""``InputModule``: the module behind ``Input(...)``, a program's entry point."""

from __future__ import annotations

from typing import Any

from promptgym.core.data_model import DataModel
from promptgym.core.schema import deserialize_data_model, serialize_data_model
from promptgym.core.serialization import register_builtin
from promptgym.modules.module import Module
from promptgym.modules.symbolic import CallNode, SymbolicDataModel


@register_builtin
class InputModule(Module):
    """Holds the symbolic data model a program starts from; passes its value through."""

    def __init__(self, data_model: type[DataModel] | None = None, schema: dict[str, Any] | None = None,
                 name: str | None = None, description: str | None = None, trainable: bool = True,
                 input_data_model: SymbolicDataModel | None = None) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if input_data_model is not None and data_model is None and schema is None:  # synalinks' keyword
            schema = input_data_model.get_schema()
        node = CallNode(self, None)
        self.output = SymbolicDataModel(data_model=data_model, schema=schema, name=self.name, node=node)
        node.outputs = self.output
        self.built = True

    @property
    def data_model(self) -> type[DataModel]:
        return self.output.data_model

    def get_schema(self) -> dict[str, Any]:
        """The JSON schema of what this input takes."""
        return self.output.get_schema()

    async def call(self, inputs: Any, training: bool = False) -> Any:
        return inputs

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return SymbolicDataModel(data_model=self.output)

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "data_model": serialize_data_model(self.data_model)}
        if self._auto_named:  # an automatic name depends on what else the process built: saves stay equal
            config["name"] = None
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "InputModule":
        config = dict(config)
        config["data_model"] = deserialize_data_model(config["data_model"])
        return cls(**config)
