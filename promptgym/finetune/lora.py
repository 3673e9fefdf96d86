"""LoRA adapters on a transformers model, through peft.

    model = add_lora(base_model, LoraSettings(r=8), seed=0)
    trainable, total = parameter_counts(model)
"""

from __future__ import annotations

import warnings
from typing import Any

from promptgym.finetune.settings import LoraSettings


class LoraTargetError(ValueError):
    """target_modules names layers the model doesn't have."""


def add_lora(model: Any, settings: LoraSettings, seed: int) -> Any:
    """A peft model with fresh adapters; their initial values are fixed by ``seed``."""
    import torch  # deferred: heavy, loaded when a job runs
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [name for name in settings.target_modules if name not in present]
    if missing or not settings.target_modules:
        linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                         if isinstance(module, torch.nn.Linear)})
        problem = f"the model has no layer named {missing}" if missing else "empty: no layer would be trained"
        raise LoraTargetError(f"lora.target_modules: {problem}; its linear layers are {linear}")
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=list(settings.target_modules), bias="none", task_type="CAUSAL_LM")
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)  # peft calls a transformers API renamed in v5
        return get_peft_model(model, config)


def parameter_counts(model: Any) -> tuple[int, int]:
    """(trainable, total) parameters."""
    trainable = sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
    return trainable, sum(parameter.numel() for parameter in model.parameters())


def adapter_state(model: Any) -> dict[str, Any]:
    """The adapter's tensors (what a checkpoint stores), detached copies keyed by peft's names."""
    from peft import get_peft_model_state_dict  # deferred: heavy, loaded when a job runs

    return {name: tensor.detach().clone().contiguous() for name, tensor in get_peft_model_state_dict(model).items()}


def load_adapter_state(model: Any, state: dict[str, Any]) -> None:
    from peft import set_peft_model_state_dict  # deferred: heavy, loaded when a job runs

    result = set_peft_model_state_dict(model, state)
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise ValueError(f"the checkpoint's adapter does not fit this model: unexpected tensors {unexpected[:5]}")
