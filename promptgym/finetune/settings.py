"""Settings of the weight flows, as pydantic models: the ``[sft]`` config section and the Python API share them.

    settings = SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl",
                           lora=LoraSettings(r=8), n_epochs=2)
    budgeted = SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl",
                           n_epochs="auto", max_train_seconds=1200)     # fill 20 minutes

Unknown keys are errors, so a typo in a config never goes unnoticed. Importing this
module imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from promptgym.finetune.auto_epochs import PATIENCE, AutoBudget
from promptgym.finetune.device import DEVICE_PATTERN, Precision

DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraSettings(Settings):
    """Low-rank adapters on the named linear layers (peft's ``LoraConfig``)."""

    r: int = Field(16, ge=1)
    alpha: float = Field(32.0, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGET_MODULES))


class ExportSettings(Settings):
    """What the run leaves behind for llama.cpp: a merged model and/or the adapter alone."""

    merged: Literal["q8_0", "f16", "none"] = "q8_0"
    adapter: bool = True

    @model_validator(mode="after")
    def _something(self) -> "ExportSettings":
        if self.merged == "none" and not self.adapter:
            raise ValueError("merged = 'none' and adapter = false export nothing: the run would leave no usable model")
        return self


class WeightTrainingSettings(Settings):
    """What every weight flow (SFT, RL) needs: the base model, the adapter, the optimiser, checkpoints, export."""

    base_model: str = Field(..., min_length=1, description="a local/... chat model or a Hugging Face format folder")
    lora: LoraSettings = Field(default_factory=LoraSettings)
    learning_rate: float = Field(2e-4, gt=0)
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float | None = Field(1.0, gt=0)
    gradient_checkpointing: bool = Field(False, description="recompute each decoder layer's activations in the "
                                         "backward pass: far less memory on long rows, about a third more time")
    save_steps: int = Field(50, ge=1)
    device: str = Field("auto", pattern=DEVICE_PATTERN,
                        description="'auto' (CUDA when torch sees a GPU, else the CPU), 'cpu', 'cuda' or 'cuda:N'")
    precision: Precision = Field("auto", description="format of the frozen base and of autocast: 'auto' (bf16 on a "
                                 "GPU, fp16 where it has no bf16, bf16 on a CPU that computes it natively, else "
                                 "fp32), 'fp32', 'bf16' or 'fp16' (GPU only); LoRA weights stay fp32")
    seed: int | None = Field(None, description="default: the job's seed")
    export: ExportSettings = Field(default_factory=ExportSettings)
    model_name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                                   description="name of the fine-tuned model (default: ft-<job name>-<id>)")


class SFTSettings(WeightTrainingSettings):
    """Supervised fine-tuning from chat JSONL (``{"messages": [...]}`` or ``{"prompt", "completion"}`` rows)."""

    train_file: str = Field(..., min_length=1)
    validation_file: str | None = None
    validation_split: float = Field(0.1, ge=0, lt=1, description="held out from train_file when no validation_file")
    examples: int | None = Field(None, ge=1, description="keep only the first N training rows")
    n_epochs: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        1, description="passes over the training rows; 'auto': as many steps as fill max_train_seconds, planned "
        "from the first steps, stopped early when the validation loss stops falling, the best checkpoint exported")
    max_train_seconds: float | None = Field(None, gt=0, description="the time budget that n_epochs = 'auto' fills")
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimiser steps (the last epoch "
                                  "ends partway, on rows drawn from its own shuffle); None: n_epochs whole epochs")
    batch_size: int = Field(4, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(512, ge=8)
    eval_steps: int | None = Field(None, ge=1, description="also evaluate every N steps (always before and after)")
    early_stopping_patience: int | None = Field(
        None, ge=1, description="stop when this many evaluations in a row (every eval_steps) are not below the best "
        "validation loss so far; None: train every planned step")
    keep_best: bool = Field(False, description="export the adapter of the lowest validation loss (the evaluation "
                            "before training included), not the last one")
    train_on: Literal["assistant", "all"] = "assistant"
    skip_invalid_rows: bool = False
    loss_chunk_size: int = Field(512, ge=16, description="positions per chunk of the output layer in the loss")
    share_prefix: bool | Literal["auto"] = Field(
        "auto", description="encode the prefix every row of a batch shares (a program's system message) once per "
        "batch: same loss and gradients, fewer tokens computed; 'auto': on the CPU, where compute sets the pace, "
        "not on a GPU, where the second pass costs more than the tokens it saves")
    summary_samples: int = Field(3, ge=0, description="validation prompts answered by base and tuned model in summary.md")

    @property
    def time_budget(self) -> AutoBudget | None:
        """What ``n_epochs = "auto"`` fills (its early stop's patience from ``early_stopping_patience``), or None."""
        if self.n_epochs != "auto" or self.max_train_seconds is None:
            return None
        return AutoBudget(seconds=self.max_train_seconds, patience=self.early_stopping_patience or PATIENCE)

    @model_validator(mode="after")
    def _a_budget_to_fill(self) -> "SFTSettings":
        if self.n_epochs == "auto":
            if self.max_train_seconds is None:
                raise ValueError("n_epochs = 'auto' fills a time budget: set max_train_seconds (seconds of training) too")
            if self.max_steps is not None or self.eval_steps is not None:
                raise ValueError("n_epochs = 'auto' plans its own steps and evaluations: drop max_steps and eval_steps")
            if not self.validation_file and self.validation_split == 0:
                raise ValueError("n_epochs = 'auto' stops on the validation loss: set validation_file or "
                                 "validation_split > 0")
        elif self.max_train_seconds is not None:
            raise ValueError(f"max_train_seconds is the budget that n_epochs = 'auto' fills (n_epochs is "
                             f"{self.n_epochs}): set n_epochs = 'auto', or cap a fixed run with max_steps")
        return self

    @model_validator(mode="after")
    def _evaluations_to_watch(self) -> "SFTSettings":
        for name in ("early_stopping_patience", "keep_best"):
            if getattr(self, name) and self.eval_steps is None and self.n_epochs != "auto":
                raise ValueError(f"{name} watches the validation loss every eval_steps: set eval_steps too")
            if getattr(self, name) and not self.validation_file and self.validation_split == 0:
                raise ValueError(f"{name} needs validation rows: set validation_file or validation_split > 0")
        return self
