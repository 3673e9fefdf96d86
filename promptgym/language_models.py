"""``promptgym.language_models``: language models by identifier (synalinks' ``language_models`` package).

    lm = promptgym.language_models.get("local/qwen2.5-coder-0.5b-instruct")
    config = promptgym.language_models.serialize(lm)
    same = promptgym.language_models.deserialize(config)
"""

from __future__ import annotations

from promptgym.core.serialization import identifier_functions
from promptgym.lm.language_model import LanguageModel

get, serialize, deserialize = identifier_functions(LanguageModel, "language model")

__all__ = ["LanguageModel", "deserialize", "get", "serialize"]
