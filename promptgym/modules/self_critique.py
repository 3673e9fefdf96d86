"""``SelfCritique``: a Generator that critiques its input and grades it with a reward in 0..1.

    checked = await SelfCritique(language_model=lm, score_type=Rating)(answer)
    # {..the input's fields.., "critique": "...", "reward": 0.75}

The model picks the grade on a named scale (``score_type``: ``Score`` by
default, ``FineScore``, ``Rating``, ``Rating10``, ``Rating20``, or any Enum of
numbers); the output's ``reward`` is that grade mapped to 0..1.
"""

from __future__ import annotations

import copy
from typing import Any

from promptgym.core.data_model import DataModel, Field
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.scores import describe_scale, get_score_type, normalize_score
from promptgym.core.serialization import deserialize_object, register_builtin
from promptgym.modules.generator import Generator
from promptgym.modules.symbolic import SymbolicDataModel


class Critique(DataModel):
    critique: str = Field(description="The elaborated critique of the provided inputs")


NORMALIZED_REWARD = {"title": "Reward", "type": "number", "minimum": 0.0, "maximum": 1.0,
                     "description": "The reward, from 0.0 (very bad) to 1.0 (very good)"}


def critique_schema(score_type: Any, return_reward: bool) -> dict[str, Any]:
    """The schema the model answers with: the critique, and the reward on the scale's own values."""
    schema = copy.deepcopy(Critique.get_schema())
    if return_reward:
        scale = get_score_type(score_type)
        kind = "integer" if all(isinstance(member.value, int) for member in scale) else "number"
        schema["properties"]["reward"] = {"title": "Reward", "type": kind, "enum": [member.value for member in scale],
                                          "description": f"The grade ({describe_scale(scale)})"}
        schema["required"] = [*schema["required"], "reward"]
    return schema


def default_critique_instructions(score_type: Any, return_reward: bool = True) -> str:
    if not return_reward:
        return "Examine the inputs carefully and write an elaborated critique of them."
    return ("Examine the inputs carefully, write an elaborated critique of them, then grade them with a reward: "
            f"{describe_scale(score_type)}.")


def _normalized(schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    schema.setdefault("properties", {})["reward"] = dict(NORMALIZED_REWARD)
    return schema


@register_builtin
class SelfCritique(Generator):
    """Critique (and grade) the input; ``return_inputs`` (default True) keeps the input's fields first."""

    def __init__(self, language_model: Any = None, score_type: Any = None, return_reward: bool = True,
                 return_inputs: bool = True, instructions: str | None = None, **kwargs: Any) -> None:
        self.score_type = get_score_type(score_type if score_type is not None else "Score")
        self.return_reward = return_reward
        kwargs.pop("schema", None)
        kwargs.pop("data_model", None)
        super().__init__(schema=critique_schema(self.score_type, return_reward), language_model=language_model,
                         instructions=instructions or default_critique_instructions(self.score_type, return_reward),
                         return_inputs=return_inputs, **kwargs)

    async def call(self, inputs: Any, training: bool = False) -> Any:
        output = await super().call(inputs, training=training)
        if output is None or not self.return_reward:
            return output
        json = output.get_json()
        if json.get("reward") is not None:
            json["reward"] = normalize_score(json["reward"], self.score_type)
        return JsonDataModel(json=json, schema=_normalized(output.get_schema()), name=self.name)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        spec = await super().compute_output_spec(inputs, training)
        return SymbolicDataModel(schema=_normalized(spec.get_schema()), name=self.name) if self.return_reward else spec

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.pop("data_model", None)
        return {**config, "score_type": self.score_type.__name__, "return_reward": self.return_reward,
                "return_inputs": self.return_inputs, "instructions": self.instructions}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "SelfCritique":
        config = dict(config)
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)
