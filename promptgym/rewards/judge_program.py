"""The program behind ``LMAsJudge``: a :class:`SelfCritique` of the prediction next to the gold answer."""

from __future__ import annotations

from typing import Any

from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.json_ops import concatenate_json, prefix_json
from promptgym.core.schema import schema_of_value
from promptgym.core.scores import describe_scale, get_score_type
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.modules.module import Module
from promptgym.modules.self_critique import SelfCritique


def default_judge_instructions(criteria: str, score_type: Any) -> str:
    return (f"Grade the prediction on {criteria}, against the reference answer when one is given (its fields are "
            f"prefixed with gold_). Write a short critique, then the reward: {describe_scale(score_type)}.")


@register_builtin
class LMAsJudgeProgram(Module):
    """``critique``: the SelfCritique that grades; ``judge(y_true, y_pred)`` runs it (None-safe)."""

    def __init__(self, language_model: Any = None, criteria: str = "accuracy and completeness",
                 instructions: str | None = None, score_type: Any = None, name: str | None = None,
                 description: str | None = None, trainable: bool = True, **generator_options: Any) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        self.score_type = get_score_type(score_type if score_type is not None else "Score")
        self.criteria = criteria
        self.critique = SelfCritique(language_model=language_model, score_type=self.score_type, return_inputs=False,
                                     instructions=instructions or default_judge_instructions(criteria, self.score_type),
                                     **generator_options)

    async def judge(self, y_true: dict[str, Any] | None, y_pred: dict[str, Any]) -> Any:
        """The critique's answer (``critique``, ``reward`` in 0..1) for this pair."""
        json = concatenate_json(prefix_json(dict(y_true), "gold"), dict(y_pred)) if y_true else dict(y_pred)
        return await self.critique(JsonDataModel(json=json, schema=schema_of_value(json, title="Judged")))

    async def call(self, inputs: Any, training: bool = False) -> Any:
        return await self.critique(inputs, training=training)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "score_type": self.score_type.__name__, "criteria": self.criteria,
                "instructions": self.critique.instructions,
                "language_model": serialize_object(self.critique.language_model)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "LMAsJudgeProgram":
        config = dict(config)
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)
