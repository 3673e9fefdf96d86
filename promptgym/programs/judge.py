"""``ProgramAsJudge``: a reward whose grader is another program (it lives beside programs, which it saves).

    judge = ProgramAsJudge(program=grader)      # grader's output has a numeric ``reward`` field
    program.compile(reward=judge, optimizer="randomfewshot")
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

from promptgym.core.serialization import register_builtin
from promptgym.programs.saving import FORMAT_VERSION, PROGRAM_FORMAT, program_from_dict, program_to_dict
from promptgym.rewards.base import JsonView, Reward, RewardResult

logger = logging.getLogger("promptgym")


@register_builtin
class ProgramAsJudge(Reward):
    """Another program grades the prediction.

    The judge's input DataModel receives ``{"ground_truth": ..., "prediction": ...}``
    (as JSON strings when its fields are strings); its output must have a
    numeric ``reward`` field, and may have ``critique`` or ``feedback``.
    """

    def __init__(self, program: Any = None, in_mask: list[str] | None = None, out_mask: list[str] | None = None,
                 name: str | None = None, **mask_patterns: Any) -> None:
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name, **mask_patterns)
        if program is None:
            raise ValueError("ProgramAsJudge needs program=, a Program whose output has a 'reward' field")
        self.program = program

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        fields = getattr(self.program.input_data_model, "model_fields", {})
        payload: dict[str, Any] = {"ground_truth": y_true, "prediction": y_pred}
        if fields and all(fields[k].annotation is str for k in payload if k in fields):
            payload = {k: json.dumps(v, ensure_ascii=False) for k, v in payload.items()}
        verdict = await self.program(payload)
        if verdict is None:
            warnings.warn(f"ProgramAsJudge {self.name}: the judge program returned None; scoring 0", RuntimeWarning,
                          stacklevel=2)
            return RewardResult(0.0, "the judge gave no verdict")
        data = verdict.get_json() if hasattr(verdict, "get_json") else dict(verdict)
        if data.get("reward") is None:
            logger.warning("ProgramAsJudge %s: the judge's output has no 'reward' field (got %s); scoring 0",
                           self.name, sorted(data))
            return RewardResult(0.0, "the judge gave no grade")
        return RewardResult(float(data["reward"]), str(data.get("critique", data.get("feedback", ""))))

    def get_config(self) -> dict[str, Any]:
        if not hasattr(self.program, "get_variables"):  # not a promptgym program (a test double): its own config
            return {**super().get_config(), "program": {"class_name": type(self.program).__name__,
                                                        "config": self.program.get_config()}}
        saved = program_to_dict(self.program)
        return {**super().get_config(), "program": {**saved["program"], "variables": saved["variables"]}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ProgramAsJudge":
        saved = config["program"]
        if "format" not in saved:  # {"class_name", "config", "variables"}
            saved = {"format": PROGRAM_FORMAT, "version": FORMAT_VERSION,
                     "program": {key: saved[key] for key in ("class_name", "config")},
                     "variables": saved.get("variables", {})}
        return cls(**{**config, "program": program_from_dict(saved, source="ProgramAsJudge")})
