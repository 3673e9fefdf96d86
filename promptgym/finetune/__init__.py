"""Weight flows on a CPU: supervised fine-tuning with LoRA, GGUF export, fine-tuned models as model strings.

    from promptgym.finetune import SFTSettings, sft
    result = sft(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"), "runs/my-sft")
    result.model_id        # "local/ft-sft-1a2b3c": usable as LanguageModel(model=...)

Importing this package is cheap: torch, transformers and peft load when a job starts.
"""

from __future__ import annotations

import importlib
from typing import Any

from promptgym.finetune.settings import ExportSettings, LoraSettings, SFTSettings, WeightTrainingSettings

_LAZY = {
    "sft": "promptgym.finetune.sft_run",
    "run_sft": "promptgym.finetune.sft_run",
    "SFTJob": "promptgym.finetune.sft_job",
    "SFTResult": "promptgym.finetune.sft_finish",
    "StopRequest": "promptgym.runs.stop",
    "TrainingInterrupted": "promptgym.runs.stop",
    "ChatDataError": "promptgym.finetune.chat_data",
    # the weight optimizer sits one layer up, in optimizers/ (it drives this package's SFT engine)
    "FineTune": "promptgym.optimizers.finetune",
    "FineTuneError": "promptgym.optimizers.finetune",
}

__all__ = ["ExportSettings", "LoraSettings", "SFTSettings", "WeightTrainingSettings", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'promptgym.finetune' has no attribute {name!r}")
