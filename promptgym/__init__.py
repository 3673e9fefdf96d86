"""promptgym: train LM programs without touching weights.

    import promptgym as synalinks   # the synalinks API, offline on a CPU

    class Question(synalinks.DataModel):
        question: str = synalinks.Field(description="A question")
"""

import importlib
import logging
from typing import Any

from promptgym import metrics, optimizers, rewards, saving
from promptgym.core.data_model import DataModel, Field
from promptgym.core.serialization import register_synalinks_serializable
from promptgym.lm import (
    EmbeddingModel,
    LanguageModel,
    get_default_embedding_model,
    get_default_language_model,
    set_default_embedding_model,
    set_default_language_model,
)
from promptgym.core.base_models import (
    Embedding,
    EmbeddingRequest,
    Embeddings,
    GenericInputs,
    GenericIO,
    GenericOutputs,
    GenericResult,
    Instructions,
    Prediction,
    Stamp,
    Trainable,
    is_embedded,
    is_embedding,
    is_embeddings,
    is_instructions,
    is_prediction,
    is_stamped,
    is_trainable,
)
from promptgym.core.chat import (
    ChatMessage,
    ChatMessages,
    ChatRole,
    ToolCall,
    ToolCallFunction,
    is_chat_message,
    is_chat_messages,
    is_tool_call,
)
from promptgym.core.chat_completions import (
    from_chat_completion_message,
    from_chat_completion_messages,
    to_chat_completion_message,
    to_chat_completion_messages,
    to_chat_completion_request,
)
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.name_scope import name_scope
from promptgym.core.scores import FineScore, Rating, Rating10, Rating20, Score
from promptgym.modules import (
    And,
    Branch,
    ChainOfThought,
    Concat,
    Concatenate,
    Decision,
    Factorize,
    Generator,
    Identity,
    InMask,
    Input,
    InputModule,
    Lambda,
    Module,
    MultiDecision,
    Not,
    Or,
    OutMask,
    Prefix,
    SelfCritique,
    Suffix,
    SymbolicDataModel,
    Variable,
    Xor,
)
from promptgym.programs import Program, ProgramAsJudge, Sequential
from promptgym.rollouts.executor import get_default_executor, set_default_executor
from promptgym.session import clear_session, enable_logging, enable_observability, get_seed, set_seed

logging.getLogger("promptgym").addHandler(logging.NullHandler())

rewards.ProgramAsJudge = ProgramAsJudge  # type: ignore[attr-defined]  # where synalinks users look for it

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("backend", "callbacks", "datasets", "ops", "testing", "training", "utils")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"promptgym.{name}")
    raise AttributeError(f"module 'promptgym' has no attribute {name!r}")


__all__ = [
    "And", "Branch", "ChainOfThought", "Decision", "MultiDecision", "SelfCritique", "Concat", "Concatenate", "DataModel", "EmbeddingModel", "Factorize", "Field", "Generator",
    "Identity", "InMask", "Input", "InputModule", "JsonDataModel", "Lambda", "LanguageModel", "Module", "Not", "Or",
    "OutMask", "Prefix", "Program", "Sequential", "Suffix", "SymbolicDataModel", "Variable", "Xor", "clear_session",
    "enable_logging", "enable_observability", "get_default_embedding_model", "get_default_executor",
    "set_default_executor", "ChatMessage", "ChatMessages", "ChatRole", "ToolCall", "ToolCallFunction", "Embedding",
    "EmbeddingRequest", "Embeddings", "GenericInputs", "GenericIO", "GenericOutputs", "GenericResult", "Instructions",
    "Prediction", "Stamp", "Trainable", "FineScore", "Rating", "Rating10", "Rating20", "Score", "name_scope",
    "get_seed", "set_seed", "is_chat_message", "is_chat_messages", "is_tool_call", "is_embedded", "is_embedding",
    "is_embeddings", "is_instructions", "is_prediction", "is_stamped", "is_trainable", "from_chat_completion_message",
    "from_chat_completion_messages", "to_chat_completion_message", "to_chat_completion_messages",
    "to_chat_completion_request",
    "get_default_language_model", "register_synalinks_serializable", "saving", "set_default_embedding_model",
    "set_default_language_model", "metrics", "optimizers", "rewards", *_LAZY_SUBMODULES,
]
