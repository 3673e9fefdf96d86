"""A third weight trainer on the skeleton (promptgym.finetune.weight_run): docs/writing_a_weight_trainer.md.

A toy trainer (next-token loss on fixed token rows) supplies only its loop, its started event and its
result; the optimiser, checkpoints, stop + resume, status, events, export, registry and summary come from
:class:`WeightRun`::

    result = ToyRun(toy_job("local/smollm2-135m-instruct"), "runs/toy").run()
    result.model_id                      # 'local/ft-toy-...', usable as LanguageModel(model=...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from promptgym.core.events import Event, TrainBegin
from promptgym.finetune.base_model import BaseModelSource, load_base_model, resolve_base_model
from promptgym.finetune.device import DevicePlan, plan_device
from promptgym.finetune.lora import add_lora
from promptgym.finetune.settings import ExportSettings, LoraSettings, WeightTrainingSettings
from promptgym.finetune.weight_run import WeightRun, WeightRunResult

STEPS = 6


@dataclass
class ToyJob:
    """What the skeleton needs of a job (the WeightJob protocol): settings, base model, adapters, device plan."""

    settings: WeightTrainingSettings
    source: BaseModelSource
    model: Any
    plan: DevicePlan
    seed: int = 0
    name: str = "toy"

    @property
    def total_steps(self) -> int:
        return STEPS

    def release(self) -> None:
        self.model = None


@dataclass(kw_only=True)
class ToyResult(WeightRunResult):
    steps: int
    final_loss: float | None


class ToyRun(WeightRun):
    method = "toy"

    def started_event(self, resume: bool) -> Event:
        return TrainBegin(epochs=1, steps=self.units, train_size=STEPS, val_size=0)

    def train_steps(self) -> None:
        import torch  # deferred: a heavy import, as in the real flows

        assert self.training is not None
        self.job.model.train()
        while self.progress.step < self.units:
            step = self.progress.step
            row = torch.tensor([[(7 * step + i) % 200 + 10 for i in range(12)]])
            loss = self.job.model(input_ids=row, labels=row).loss  # LoRA dropout draws from the RNG
            loss.backward()
            self.training.optimizer.step()
            self.training.scheduler.step()
            self.training.optimizer.zero_grad(set_to_none=True)
            self.progress.step, self.progress.loss = step + 1, float(loss.detach())
            self.record({"step": self.progress.step, "loss": self.progress.loss})
            self.stop_if_requested()
            self.save_if_due()

    def result(self, **base: Any) -> ToyResult:
        return ToyResult(steps=self.progress.step, final_loss=self.progress.loss, **base)


def toy_job(base_model: str) -> ToyJob:
    """A toy job on ``base_model`` (a Hugging Face folder or an embedded model name), LoRA r=4, on the CPU."""
    settings = WeightTrainingSettings(base_model=base_model, learning_rate=3e-2, save_steps=2, seed=0,
                                      lora=LoraSettings(r=4, alpha=8, dropout=0.1),
                                      export=ExportSettings(merged="q8_0", adapter=False))
    plan = plan_device("cpu", "fp32")
    source = resolve_base_model(settings.base_model)
    model, _ = load_base_model(source, plan=plan)
    return ToyJob(settings, source, add_lora(model, settings.lora, 0), plan)
