"""A complete weight optimizer on the kit: LoRA SFT of each Generator's model on the labels; keep it if it wins."""

import asyncio
import json
from pathlib import Path
from typing import Any

import promptgym as pg
from promptgym.finetune import SFTSettings, sft
from promptgym.modules.model_choice import MODELS_KEY, current_models
from promptgym.optimizers.base import FitSizes, Optimizer, StageEstimate
from promptgym.optimizers.kit import OptimizerContext
from promptgym.optimizers.selection import race_on_validation


@pg.saving.register_synalinks_serializable()
class LabelSFT(Optimizer):
    """At the first epoch's end, fine-tune the Generators' model on the labelled examples, in the messages the
    program sends; the tuned program then races the start on validation, and wins only when it is ahead."""

    def __init__(self, base_model: str, output_dir: str = "runs/label-sft", sft: dict[str, Any] | None = None,
                 seed: int | None = 0) -> None:
        super().__init__(seed=seed)
        self.base_model, self.output_dir, self.sft = base_model, output_dir, dict(sft or {})
        self.model_id: str | None = None

    def build(self, program: Any) -> None:
        super().build(program)  # the start records its models, so that falling back to it restores them
        self.start.variables.setdefault(MODELS_KEY, current_models(program))

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        return {}  # the labels are the data: nothing to run per batch

    async def on_epoch_end(self, ctx: OptimizerContext, epoch: int) -> None:
        if self.model_id is None:  # saved with the state: a resumed fit does not train again
            train_file = Path(self.output_dir) / "train.jsonl"
            train_file.parent.mkdir(parents=True, exist_ok=True)
            train_file.write_text("".join(json.dumps({"messages": row}) + "\n" for row in self.label_rows(ctx)))
            settings = SFTSettings(base_model=self.base_model, train_file=str(train_file), **self.sft)
            result = await asyncio.to_thread(sft, settings, self.output_dir, "label-sft", self.seed)  # torch: a thread
            self.model_id = result.model_id
            models = {**self.start.variables[MODELS_KEY], **{s.module_name: self.model_id for s in self.prompts}}
            tuned = self.add_candidate({**self.start.variables, MODELS_KEY: models}, parent=self.start.id,
                                       origin="label_sft")
            await race_on_validation(self, ctx, [tuned])  # accepts it only when it is ahead on validation
        await super().on_epoch_end(ctx, epoch)

    def label_rows(self, ctx: OptimizerContext) -> list[list[dict[str, str]]]:
        """For each labelled example: what each Generator that writes the output sends, and the label as its answer."""
        rows = []
        for state in self.prompts:
            for index, x in enumerate(ctx.rollouts.inputs("train")):
                target = ctx.rollouts.target_json("train", index)
                answer = {name: target[name] for name in sorted(state.answer_fields or ()) if name in target}
                if answer:
                    messages = state.module.messages(x.get_json(), [], input_schema=x.get_schema())
                    rows.append([*messages, {"role": "assistant", "content": json.dumps(answer)}])
        return rows

    def estimate(self, program: Any, sizes: FitSizes) -> list[StageEstimate]:
        return [StageEstimate("LabelSFT", lm_calls=2 * sizes.val, training_runs=0,
                              note=f"SFT of {self.base_model} on {sizes.train} rows")]

    def get_config(self) -> dict[str, Any]:
        return {"base_model": self.base_model, "output_dir": self.output_dir, "sft": self.sft, "seed": self.seed}

    def get_extra_state(self) -> dict[str, Any]:
        return {"model_id": self.model_id}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.model_id = state.get("model_id")
