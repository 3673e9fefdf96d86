"""``Action``: the language model fills in a tool's arguments from the input, then the tool runs.

    x1 = await Action(tool=Tool(calculate), language_model=lm)(x0)
    # {"action": {"inputs": {"expression": "12 + 15"}, "outputs": {"result": 27.0}}}

A structured-output step (one Generator whose output is the tool's argument
schema, so its instructions and examples train like any Generator's) followed
by one tool call; a failing call is ``{"error": ...}`` in ``outputs``.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.base_models import GenericIO
from promptgym.core.data_model import DataModel, Field
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.modules.generator import Generator
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.modules.tool import Tool


class GenericAction(DataModel):
    """A tool call made: the arguments and what the tool answered."""

    action: GenericIO = Field(description="An action already performed")


@register_builtin
class Action(Module):
    """Ask the model for ``tool``'s arguments, call it, output both (synalinks' arguments).

    Args:
        tool: the Tool to call.
        language_model, instructions, examples, temperature, max_tokens, top_p, top_k,
            reasoning_effort: those of the Generator that writes the arguments.
    """

    def __init__(self, *, tool: Tool, language_model: Any = None, prompt_template: str | None = None,
                 examples: list[Any] | None = None, instructions: str | None = None,
                 seed_instructions: list[str] | None = None, temperature: float | None = None,
                 max_tokens: int | None = None, top_p: float | None = None, top_k: int | None = None,
                 reasoning_effort: str | None = None, use_inputs_schema: bool = False,
                 use_outputs_schema: bool = False, name: str | None = None, description: str | None = None,
                 trainable: bool = True) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if not hasattr(tool, "get_tool_schema"):
            raise TypeError(f"{self.name}: tool must be a Tool, got {type(tool).__name__}")
        self.tool = tool
        self.settings = {"prompt_template": prompt_template, "examples": examples, "instructions": instructions,
                         "seed_instructions": seed_instructions, "temperature": temperature,
                         "max_tokens": max_tokens, "top_p": top_p, "top_k": top_k,
                         "reasoning_effort": reasoning_effort}
        schema = {key: value for key, value in tool.get_tool_schema().items() if key != "description"}
        self.action = Generator(schema=schema, language_model=language_model, use_inputs_schema=use_inputs_schema,
                                use_outputs_schema=use_outputs_schema, name=f"generator_{self.name}",
                                **{key: value for key, value in self.settings.items()})
        self.language_model = self.action.language_model

    @property
    def prompt_variable(self) -> Any:
        return self.action.state

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if inputs is None:
            return None
        arguments = (await self.action(inputs, training=training)).get_json()
        tool = self.tool  # invoke(): the arguments in the tool's own namespace (one may be named `training`)
        result = await tool.invoke(arguments) if isinstance(tool, Tool) else await tool(**arguments)
        outputs = result.get_json() if hasattr(result, "get_json") else (result or {})
        return JsonDataModel(json={"action": {"inputs": arguments, "outputs": outputs}},
                             schema=GenericAction.get_schema(), name=self.name)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> SymbolicDataModel:
        return SymbolicDataModel(schema=GenericAction.get_schema(), name=self.name)

    def get_config(self) -> dict[str, Any]:
        return {**self.settings, "name": self.name, "description": self.description, "trainable": self.trainable,
                "tool": serialize_object(self.tool), "language_model": serialize_object(self.language_model)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Action":
        config = dict(config)
        config["tool"] = deserialize_object(config["tool"], expected="tool")
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)
