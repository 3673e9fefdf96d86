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

from promptgym.core.chat import ChatMessage, ChatMessages
from promptgym.core.data_model import DataModel, is_data_model_class
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.json_ops import concatenate_schema, inline_schema
from promptgym.core.operators import compute
from promptgym.core.schema import (
    DEFAULT_MAX_STRING_LENGTH,
    bounded_schema,
    data_model_from_schema,
    describe_schema_fields,
    deserialize_data_model,
    schema_of_value,
    serialize_data_model,
)
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.lm.defaults import get_default_language_model
from promptgym.lm.errors import LMOutputError
from promptgym.lm.language_model import LanguageModel
from promptgym.modules.field_stream import active_tap, streamed_answer, streamed_chat
from promptgym.modules.model_choice import active_language_model
from promptgym.modules.module import Module
from promptgym.modules.prompt_layout import (
    MAX_CACHED_LAYOUTS,
    PROMPT_TEMPLATE,
    PromptLayout,
    example_turns,
    structured_system_prompt,
)
from promptgym.lm.chat_calls import wire_messages
from promptgym.modules.retrieval import retrieved_examples
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.modules.tracing import record_step
from promptgym.modules.variable import Variable, prompt_state_problem

DEFAULT_INSTRUCTIONS = "Read the input and answer with the output fields."

def default_prompt_template() -> str:
    """The system prompt a Generator with an output DataModel sends, with its ``{placeholders}``.

    Examples follow as user/assistant turns, then the input, each a JSON
    object. A Generator that chats sends its instructions alone (and the
    input fields with ``use_inputs_schema=True``).

    >>> print(default_prompt_template().splitlines()[-1])
    Objective: given {input_names}, produce {output_names}. {instructions}
    """
    return PROMPT_TEMPLATE


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
        data_model: the output DataModel class (or ``schema=``, a JSON schema). Without
            either, the Generator chats: it answers with an assistant ``ChatMessage``.
        language_model: a LanguageModel; defaults to ``set_default_language_model``'s.
        instructions: the starting instructions (trainable).
        examples: starting few-shot examples, ``[(input, output), ...]`` (trainable).
        temperature: overrides the language model's temperature.
        max_string_length: bound on every unbounded string field of the output.
        return_inputs: output the inputs' fields followed by the answer's.
        streaming: in chat mode, return a ``StreamingIterator`` when called on its own.
        reasoning_effort, top_p, top_k: sent to the model with each call (servers
            that take them use them; the embedded engine uses top_p/top_k).
        use_inputs_schema: a Generator that chats describes its input fields too (one with an output
            DataModel always does).

    ``prompt_template``, ``seed_instructions`` and ``use_outputs_schema`` are
    accepted for synalinks code: promptgym's prompt is fixed (instructions,
    the output fields, examples as turns) and always describes the outputs.
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
        *,
        return_inputs: bool = False,
        streaming: bool = False,
        reasoning_effort: str | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        use_inputs_schema: bool = False,
        use_outputs_schema: bool = False,
        prompt_template: str | None = None,
        seed_instructions: list[str] | None = None,
    ) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if data_model is not None and not is_data_model_class(data_model) and callable(getattr(data_model, "get_schema", None)):
            schema, data_model = data_model.get_schema(), None  # a symbolic data model (e.g. `Query + Answer`)
        if data_model is not None and not is_data_model_class(data_model):
            raise TypeError(f"data_model must be a DataModel class, got {data_model!r}")
        check_settings(self.name, instructions=instructions, temperature=temperature, max_tokens=max_tokens,
                       max_string_length=max_string_length)
        chat = data_model is None and schema is None
        self.data_model: type[DataModel] | None = None if chat else \
            self._output_model(data_model or data_model_from_schema(schema or {}))
        self.language_model = language_model or get_default_language_model(f"Generator {self.name!r}")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_string_length = max_string_length
        self.return_inputs = return_inputs
        self.streaming = bool(streaming) and chat  # structured output needs the whole answer
        self.reasoning_effort = reasoning_effort
        self.top_p = top_p
        self.top_k = top_k
        self.use_inputs_schema = use_inputs_schema
        self.use_outputs_schema = use_outputs_schema
        self.prompt_template = prompt_template
        self.seed_instructions = seed_instructions
        self.state = self.add_variable(
            "state",
            {
                "instructions": instructions or description or DEFAULT_INSTRUCTIONS,
                "examples": [self._example(example) for example in examples or []],
            },
            description="instructions and few-shot examples",
            check=prompt_state_problem,
        )
        self._layouts: dict[str, PromptLayout] = {}  # by instructions; see _layout()
        self.schema: dict[str, Any] | None = None if chat else inline_schema(self.data_model.get_schema())
        self._schema = None if chat else bounded_schema(self.data_model.get_schema(), max_string_length)

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
    def generator(self) -> "Generator":
        """The Generator that does the call (itself; synalinks' ChainOfThought and SelfCritique hold one)."""
        return self

    @property
    def instructions(self) -> str:
        return self.state.get("instructions", "")

    @property
    def examples(self) -> list[dict[str, Any]]:
        return self.state.get("examples", [])

    def system_prompt(self, input_schema: dict[str, Any] | None = None) -> str:
        """:func:`default_prompt_template` filled in for inputs following ``input_schema``."""
        if self.data_model is not None:
            return structured_system_prompt(self.instructions, input_schema or {}, self.data_model.get_schema())
        fields = describe_schema_fields(input_schema) if self.use_inputs_schema and input_schema else ""
        return self.instructions + (f"\n\nThe input is a JSON object with these fields:\n{fields}" if fields else "")

    async def demonstrations(self, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """What the prompt shows for ``inputs``: the fixed examples, then the retrieved ones (if any)."""
        retrieval = self.state.get("retrieval")
        if not retrieval:
            return self.examples
        return [*self.examples, *await retrieved_examples(retrieval, inputs, f"variable {self.state.name!r}")]

    def messages(self, inputs: dict[str, Any], examples: list[dict[str, Any]] | None = None,
                 input_schema: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The chat messages for one input: system, examples as turns (default: the fixed ones), then the input.

        An input holding a conversation (a ``messages`` list) continues it: the
        fields before ``messages`` are shown first as one user turn, the fields
        after it (answers a previous step appended) are left out.
        """
        schema = input_schema or schema_of_value(inputs, title="Inputs")
        fixed = self.examples
        layout = self._layout(schema, fixed)
        messages: list[dict[str, Any]] = [{"role": "system", "content": layout.system}]
        if examples is None or examples is fixed:
            turns = layout.turns
        else:
            turns = example_turns(examples)
        for user, assistant in turns:
            messages.append({"role": "user", "content": user})
            messages.append({"role": "assistant", "content": assistant})
        if isinstance(inputs.get("messages"), list):
            keys = list(inputs)
            before = {key: inputs[key] for key in keys[:keys.index("messages")]}
            if before:
                messages.append({"role": "user", "content": json.dumps(before, ensure_ascii=False)})
            messages.extend(wire_messages({"messages": inputs["messages"]}))
        else:
            messages.append({"role": "user", "content": json.dumps(inputs, ensure_ascii=False)})
        return messages

    def _layout(self, input_schema: dict[str, Any], examples: list[dict[str, Any]]) -> PromptLayout:
        """The system message and example turns for these instructions, input schema and fixed examples.

        Built once and reused while they stay the same: each call compares the
        instructions, the schema and the examples with the layout's own copies
        (by value, so a variable assigned or edited in place, or overridden for
        one rollout, is never served a stale prompt).
        """
        instructions = self.instructions
        layout = self._layouts.get(instructions)
        if layout is not None and layout.matches(instructions, input_schema, examples):
            return layout
        if len(self._layouts) >= MAX_CACHED_LAYOUTS:
            self._layouts.clear()
        layout = PromptLayout.build(instructions, input_schema, examples, self.system_prompt(input_schema))
        if type(self).system_prompt is Generator.system_prompt:  # an override may read other state: never cached
            self._layouts[instructions] = layout
        return layout

    def format_messages(self, inputs: Any) -> ChatMessages:
        """The conversation this Generator sends for ``inputs`` (with its fixed examples), as ChatMessages."""
        input_json = as_json(inputs)
        schema = inputs.get_schema() if callable(getattr(inputs, "get_schema", None)) else None
        return ChatMessages(messages=[ChatMessage.model_validate(message)
                                      for message in self.messages(input_json, input_schema=schema)])

    # -- calling --------------------------------------------------------------------------

    def output_data_model(self, input_data_model: type[DataModel]) -> type[DataModel]:
        if self.data_model is None:
            return ChatMessage
        if self.return_inputs and input_data_model is not None:
            return data_model_from_schema(concatenate_schema(input_data_model.get_schema(), self.data_model.get_schema()))
        return self.data_model

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        output = SymbolicDataModel(data_model=self.data_model or ChatMessage, name=self.name)
        if self.return_inputs:
            return SymbolicDataModel(schema=concatenate_schema(inputs.get_schema(), output.get_schema()), name=self.name)
        return output

    def _sampling(self) -> dict[str, Any]:
        return {key: value for key, value in (("reasoning_effort", self.reasoning_effort), ("top_p", self.top_p),
                                              ("top_k", self.top_k)) if value is not None}

    async def call(self, inputs: Any, training: bool = False) -> Any:
        input_json = as_json(inputs)
        schema = inputs.get_schema() if callable(getattr(inputs, "get_schema", None)) else None
        messages = self.messages(input_json, await self.demonstrations(input_json), input_schema=schema)
        language_model = active_language_model(self)
        options = {"temperature": self.temperature, "max_tokens": self.max_tokens, **self._sampling()}
        tap = None if training else active_tap(self)  # program.stream(x) reads this call's last field as written
        if self.data_model is None:
            if self.streaming and not training and not self.return_inputs and tap is None:
                return language_model.stream(messages, **options)
            if tap is not None:
                content, reasoning = await streamed_chat(tap, language_model, messages, **options)
            else:
                answer = await language_model.respond(messages, **options)
                content, reasoning = answer.content, answer.reasoning
            output: Any = ChatMessage(role="assistant", content=content, reasoning_content=reasoning)
        else:
            if tap is not None:
                value, reasoning, model = await streamed_answer(tap, language_model, messages, self._schema,
                                                                self.data_model, **options)
            else:
                answer = await language_model.respond(messages, schema=self._schema,
                                                      validation_schema=self.data_model, **options)
                value, reasoning, model = answer.value, answer.reasoning, answer.model
            with_reasoning = self._with_reasoning(value, reasoning)
            # The LM layer validated the answer as this DataModel (once); only a merged reasoning needs another look.
            output = model if with_reasoning is value and isinstance(model, self.data_model) else \
                self._validated(with_reasoning)
        record_step(self.name, input_json, output.model_dump(mode="json"), schema)
        if self.return_inputs:
            if not callable(getattr(inputs, "get_schema", None)):
                inputs = JsonDataModel(json=input_json, schema=schema_of_value(input_json, title="Inputs"))
            return compute("concat", [inputs, output], name=self.name)
        return output

    def streamed_field(self) -> str:
        """The field ``program.stream(x)`` shows of this module's answer: the last one it writes."""
        if self._schema is None:
            return "content"
        return list(self._schema.get("properties") or {"": None})[-1]

    def _with_reasoning(self, value: dict[str, Any], reasoning: str | None) -> dict[str, Any]:
        """A ``thinking`` field is the model's own reasoning when the server returns it."""
        if reasoning and isinstance(value, dict) and "thinking" in self.data_model.model_fields:  # type: ignore[union-attr]
            return {**value, "thinking": reasoning}
        return value

    def _validated(self, answer: Any) -> DataModel:
        assert self.data_model is not None
        try:
            return self.data_model.model_validate(answer)
        except pydantic.ValidationError as error:
            raise LMOutputError(f"{self.name}: answer does not match {self.data_model.__name__}: {error}") from None

    # -- serialization --------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        base = self._base_data_model()
        config = {
            **super().get_config(),
            "data_model": serialize_data_model(base) if base is not None else None,
            "language_model": serialize_object(self.language_model),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_string_length": self.max_string_length,
        }
        for key in ("return_inputs", "streaming", "reasoning_effort", "top_p", "top_k", "use_inputs_schema"):
            value = getattr(self, key)
            if value:  # only what differs from the defaults, so older files and new ones read the same
                config[key] = value
        return config

    def _base_data_model(self) -> type[DataModel] | None:
        return self.data_model

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Generator":
        config = dict(config)
        config["data_model"] = deserialize_data_model(config["data_model"]) if config["data_model"] is not None else None
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)
