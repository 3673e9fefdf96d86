"""Language and embedding models: engines, cache, usage accounting."""

from promptgym.lm.defaults import (
    get_default_embedding_model,
    get_default_language_model,
    set_default_embedding_model,
    set_default_language_model,
)
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.errors import (
    ChecksumMismatchError,
    EngineMissingError,
    LMConnectionError,
    LMError,
    LMOutputError,
    UnknownModelError,
)
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.prices import Price, UnknownPriceWarning, set_prices
from promptgym.lm.spend import SpendCap, SpendCapReached
from promptgym.lm.usage import LEDGER, Usage, lm_phase

__all__ = [
    "LEDGER", "ChecksumMismatchError", "EmbeddingModel", "EngineMissingError", "LMConnectionError", "LMError",
    "LMOutputError", "LanguageModel", "Price", "SpendCap", "SpendCapReached", "UnknownModelError",
    "UnknownPriceWarning", "set_prices", "Usage", "get_default_embedding_model",
    "get_default_language_model", "lm_phase", "set_default_embedding_model", "set_default_language_model",
]
