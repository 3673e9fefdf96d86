"""``Generator``: one LM call from an input DataModel to an output DataModel.

    inputs = Input(data_model=Question)
    outputs = await Generator(data_model=Answer, language_model=lm)(inputs)

The prompt is built from the module's trainable variable (instructions and
few-shot examples) and the output schema; decoding is constrained to the
schema. Everything before the input is identical across a batch, so the
local engine reuses its KV cache for that prefix. A variable with a
``"retrieval"`` entry (see :mod:`promptgym.modules.retrieval`, set by
``KNNFewShot``) also shows the pool examples nearest to each input, after
the fixed ones.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic

from promptgym.core.data_model import DataModel, is_data_model_class
from promptgym.core.schema import (
    DEFAULT_MAX_STRING_LENGTH,
    bounded_schema,
    data_model_from_schema,
    describe_fields,
    deserialize_data_model,
    serialize_data_model,
)
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.lm.defaults import get_default_language_model
from promptgym.lm.errors import LMOutputError
from promptgym.lm.language_model import LanguageModel
from promptgym.modules.module import Module
from promptgym.modules.retrieval import retrieved_examples
from promptgym.modules.tracing import record_step
from promptgym.modules.variable import Variable, prompt_state_problem

DEFAULT_INSTRUCTIONS = "Read the input and answer with the output fields."


def as_json(value: Any) -> dict[str, Any]:
    """The JSON dict of a DataModel, a JsonDataModel or a plain dict."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return value
    if callable(getattr(value, "get_json", None)):
        return value.get_json()
    raise TypeError(f"expected a DataModel or a dict, got {type(value).__name__}")


def check_settings(name: str | None, instructions: Any, temperature: Any, max_tokens: Any, max_string_length: Any) -> None:
    """A clear error for a setting of the wrong type or range (a hand-edited program file, a typo)."""
    def is_number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    problems = []
    if instructions is not None and not isinstance(instructions, str):
        problems.append(f"instructions must be a string, got {type(instructions).__name__}")
    if temperature is not None and not (is_number(temperature) and temperature >= 0):
        problems.append(f"temperature must be a number >= 0, got {temperature!r}")
    if max_tokens is not None and not (isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1):
        problems.append(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if not (isinstance(max_string_length, int) and not isinstance(max_string_length, bool) and max_string_length >= 1):
        problems.append(f"max_string_length must be an integer >= 1, got {max_string_length!r}")
    if problems:
        raise ValueError(f"Generator {name!r}: " + "; ".join(problems))


@register_builtin
class Generator(Module):
    """Ask a language model for an output DataModel.

    Args:
        data_model: the output DataModel class (or ``schema=``, a JSON schema).
        language_model: a LanguageModel; defaults to ``set_default_language_model``'s.
        instructions: the starting instructions (trainable).
        examples: starting few-shot examples, ``[(input, output), ...]`` (trainable).
        temperature: overrides the language model's temperature.
        max_string_length: bound on every unbounded string field of the output.
    """

    def __init__(
        self,
        data_model: type[DataModel] | None = None,
        schema: dict[str, Any] | None = None,
        language_model: LanguageModel | None = None,
        instructions: str | None = None,
        examples: list[Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        max_string_length: int = DEFAULT_MAX_STRING_LENGTH,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
    ) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if data_model is None and schema is None:
            raise ValueError(f"{type(self).__name__}() needs data_model= (a DataModel class) or schema= (a JSON schema)")
        if data_model is not None and not is_data_model_class(data_model) and callable(getattr(data_model, "get_schema", None)):
            schema, data_model = data_model.get_schema(), None  # a symbolic data model (e.g. `Query + Answer`)
        if data_model is not None and not is_data_model_class(data_model):
            raise TypeError(f"data_model must be a DataModel class, got {data_model!r}")
        check_settings(self.name, instructions=instructions, temperature=temperature, max_tokens=max_tokens,
                       max_string_length=max_string_length)
        self.data_model = self._output_model(data_model or data_model_from_schema(schema or {}))
        self.language_model = language_model or get_default_language_model(f"Generator {self.name!r}")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_string_length = max_string_length
        self.state = self.add_variable(
            "state",
            {
                "instructions": instructions or description or DEFAULT_INSTRUCTIONS,
                "examples": [self._example(example) for example in examples or []],
            },
            description="instructions and few-shot examples",
            check=prompt_state_problem,
        )
        self._schema = bounded_schema(self.data_model.get_schema(), max_string_length)

    def _output_model(self, data_model: type[DataModel]) -> type[DataModel]:
        """The class this module answers with (ChainOfThought adds ``thinking``)."""
        return data_model

    @staticmethod
    def _example(example: Any) -> dict[str, Any]:
        if isinstance(example, dict) and set(example) == {"inputs", "outputs"}:
            return {"inputs": as_json(example["inputs"]), "outputs": as_json(example["outputs"])}
        inputs, outputs = example
        return {"inputs": as_json(inputs), "outputs": as_json(outputs)}

    # -- prompt ---------------------------------------------------------------------------

    @property
    def prompt_variable(self) -> Variable:
        return self.state

    @property
    def instructions(self) -> str:
        return self.state.get("instructions", "")

    @property
    def examples(self) -> list[dict[str, Any]]:
        return self.state.get("examples", [])

    def system_prompt(self) -> str:
        return (
            f"{self.instructions}\n\nAnswer with a JSON object with these fields:\n"
            f"{describe_fields(self.data_model)}"
        )

    async def demonstrations(self, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """What the prompt shows for ``inputs``: the fixed examples, then the retrieved ones (if any)."""
        retrieval = self.state.get("retrieval")
        if not retrieval:
            return self.examples
        return [*self.examples, *await retrieved_examples(retrieval, inputs, f"variable {self.state.name!r}")]

    def messages(self, inputs: dict[str, Any], examples: list[dict[str, Any]] | None = None) -> list[dict[str, str]]:
        """The chat messages for one input: system, examples as turns (default: the fixed ones), then the input."""
        messages = [{"role": "system", "content": self.system_prompt()}]
        for example in self.examples if examples is None else examples:
            messages.append({"role": "user", "content": json.dumps(example["inputs"], ensure_ascii=False)})
            messages.append({"role": "assistant", "content": json.dumps(example["outputs"], ensure_ascii=False)})
        messages.append({"role": "user", "content": json.dumps(inputs, ensure_ascii=False)})
        return messages

    # -- calling --------------------------------------------------------------------------

    def output_data_model(self, input_data_model: type[DataModel]) -> type[DataModel]:
        return self.data_model

    async def call(self, inputs: Any, training: bool = False) -> DataModel:
        input_json = as_json(inputs)
        answer = await self.language_model(
            self.messages(input_json, await self.demonstrations(input_json)),
            schema=self._schema,
            validation_schema=self.data_model.get_schema(),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        try:
            output = self.data_model.model_validate(answer)
        except pydantic.ValidationError as error:
            raise LMOutputError(f"{self.name}: answer does not match {self.data_model.__name__}: {error}") from None
        record_step(self.name, input_json, output.model_dump(mode="json"))
        return output

    # -- serialization --------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "data_model": serialize_data_model(self._base_data_model()),
            "language_model": serialize_object(self.language_model),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_string_length": self.max_string_length,
        }

    def _base_data_model(self) -> type[DataModel]:
        return self.data_model

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Generator":
        config = dict(config)
        config["data_model"] = deserialize_data_model(config["data_model"])
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)
