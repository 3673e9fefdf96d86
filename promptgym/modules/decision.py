"""``Decision`` and ``MultiDecision``: a Generator that picks label(s) for its input.

    choice = await Decision(question="How hard is this query?", labels=["easy", "hard"],
                            language_model=lm)(inputs)        # {"thinking": ..., "choice": "easy"}

The question is added to the input; the answer is constrained to the
labels. Both are Generators, so their instructions and examples train like
any other's. ``Branch`` routes the input to the module of the chosen label.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.data_model import DataModel, Field
from promptgym.core.json_ops import dynamic_enum, dynamic_enum_array
from promptgym.core.serialization import deserialize_object, register_builtin
from promptgym.modules.generator import Generator, as_json
from promptgym.modules.symbolic import SymbolicDataModel


class DecisionAnswer(DataModel):
    thinking: str = Field(description="Your step by step thinking to choose the correct label.")
    choice: str = Field(description="The chosen label.")


class MultiDecisionAnswer(DataModel):
    thinking: str = Field(description="Your step by step thinking to choose the correct labels.")
    choices: list[str] = Field(description="The chosen labels (one or more).")


def default_decision_instructions(labels: list[str], several: bool = False) -> str:
    what = "one or more of" if several else "one of"
    return f"Answer the question about the input step by step, then choose {what} these labels: {labels}"


@register_builtin
class Decision(Generator):
    """Choose one of ``labels`` to answer ``question`` about the input (other arguments: see Generator)."""

    several = False

    def __init__(self, question: str | None = None, labels: list[str] | None = None, language_model: Any = None,
                 instructions: str | None = None, inline: bool = True, **kwargs: Any) -> None:
        if not question:
            raise ValueError(f"{type(self).__name__}() needs question= (what to decide)")
        if not labels or not isinstance(labels, list):
            raise ValueError(f"{type(self).__name__}() needs labels= (a list of strings to choose from)")
        self.question, self.labels, self.inline = question, list(labels), inline
        kwargs.pop("schema", None)
        kwargs.pop("data_model", None)
        super().__init__(schema=self.answer_schema(), language_model=language_model,
                         instructions=instructions or default_decision_instructions(self.labels, self.several),
                         **kwargs)

    def answer_schema(self) -> dict[str, Any]:
        return dynamic_enum(DecisionAnswer.get_schema(), "choice", self.labels, inline=self.inline)

    def _question(self, inputs: Any) -> dict[str, Any]:
        return {**as_json(inputs), "question": self.question}

    async def call(self, inputs: Any, training: bool = False) -> Any:
        return await super().call(self._question(inputs), training=training)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return SymbolicDataModel(schema=self.schema, name=self.name)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.pop("data_model", None)
        return {**config, "question": self.question, "labels": self.labels, "inline": self.inline,
                "instructions": self.instructions}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Decision":
        config = dict(config)
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)


@register_builtin
class MultiDecision(Decision):
    """Choose one or more of ``labels`` (``choices``: a list)."""

    several = True

    def answer_schema(self) -> dict[str, Any]:
        return dynamic_enum_array(MultiDecisionAnswer.get_schema(), "choices", self.labels, inline=self.inline)
