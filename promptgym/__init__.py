"""promptgym: train LM programs without touching weights.

    import promptgym as synalinks   # the synalinks API, offline on a CPU

    class Question(synalinks.DataModel):
        question: str = synalinks.Field(description="A question")
"""

import importlib
import logging
from typing import Any

from promptgym import metrics, optimizers, rewards, saving, tree
from promptgym.core.data_model import DataModel, Field
from promptgym.core.serialization import register_synalinks_serializable
from promptgym.lm import (
    EmbeddingModel,
    LanguageModel,
    Price,
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
    is_strictly_chat_message,
    is_strictly_chat_messages,
    is_tool_call,
)
from promptgym.core.chat_completions import (
    ChatCompletionChoice,
    ChatCompletionCompletionTokensDetails,
    ChatCompletionFunctionCall,
    ChatCompletionJsonSchema,
    ChatCompletionMessage,
    ChatCompletionPromptTokensDetails,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatCompletionResponseFormat,
    ChatCompletionTool,
    ChatCompletionToolCall,
    ChatCompletionToolFunction,
    ChatCompletionUsage,
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
    Action,
    And,
    Branch,
    ChainOfThought,
    Concat,
    Concatenate,
    Decision,
    EmbedKnowledge,
    Factorize,
    FullTextSearch,
    FunctionCallingAgent,
    Generator,
    HybridFTSSearch,
    HybridRegexSearch,
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
    RegexSearch,
    RetrieveKnowledge,
    RRFReranker,
    SelfCritique,
    SimilaritySearch,
    StampKnowledge,
    Suffix,
    SymbolicDataModel,
    Text2SQL,
    Tool,
    UpdateKnowledge,
    Variable,
    Xor,
)
from promptgym.config import (
    default_embedding_model,
    default_language_model,
    is_observability_enabled,
    is_trace_recording_enabled,
    record_traces,
    synalinks_home,
    trace_recording_dir,
)
from promptgym.initializers import Initializer
from promptgym.metrics import BatchMetric, GapK, Metric, PassAtK, PassHatK
from promptgym.modules.generator import default_prompt_template
from promptgym.optimizers import OMEGA, Budget
from promptgym.modules.mcp_tools import MultiServerMCPClient
from promptgym.programs import Program, ProgramAsJudge, Sequential
from promptgym.rewards import BatchReward, CosineSimilarity, ExactMatch, LMAsJudge, Reward
from promptgym.rollouts.executor import get_default_executor, set_default_executor
from promptgym.session import clear_session, enable_logging, enable_observability, get_seed, set_seed

logging.getLogger("promptgym").addHandler(logging.NullHandler())

rewards.ProgramAsJudge = ProgramAsJudge  # type: ignore[attr-defined]  # where synalinks users look for it

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("backend", "callbacks", "config", "datasets", "embedding_models", "initializers", "knowledge_bases",
                    "language_models", "ops", "testing", "tracing", "training", "utils")
_LAZY_NAMES = {"KnowledgeBase": "promptgym.knowledge_bases", "set_default_knowledge_base": "promptgym.knowledge_bases",
               "default_knowledge_base": "promptgym.knowledge_bases"}
"""Names whose module imports DuckDB: loaded on first use, so ``import promptgym`` stays light."""

ToolCalling = ToolCall  # synalinks exports ToolCall under both names


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"promptgym.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    raise AttributeError(f"module 'promptgym' has no attribute {name!r}")


__all__ = [
    "EmbedKnowledge", "KnowledgeBase", "RetrieveKnowledge", "FullTextSearch", "HybridFTSSearch", "HybridRegexSearch",
    "RegexSearch", "RRFReranker", "SimilaritySearch", "StampKnowledge", "Text2SQL", "UpdateKnowledge", "Action", "And", "Branch", "ChainOfThought", "Decision", "MultiDecision", "SelfCritique", "Concat", "Concatenate", "DataModel", "EmbeddingModel", "Factorize", "Field", "FunctionCallingAgent", "Generator",
    "Identity", "InMask", "Input", "InputModule", "JsonDataModel", "Lambda", "LanguageModel", "Price", "Budget", "Module", "Not", "Or",
    "OutMask", "Prefix", "Program", "Sequential", "Suffix", "SymbolicDataModel", "Tool", "MultiServerMCPClient", "Variable", "Xor", "clear_session",
    "enable_logging", "enable_observability", "get_default_embedding_model", "get_default_executor",
    "set_default_executor", "ChatMessage", "ChatMessages", "ChatRole", "ToolCall", "ToolCallFunction", "Embedding",
    "EmbeddingRequest", "Embeddings", "GenericInputs", "GenericIO", "GenericOutputs", "GenericResult", "Instructions",
    "Prediction", "Stamp", "Trainable", "FineScore", "Rating", "Rating10", "Rating20", "Score", "name_scope",
    "get_seed", "set_seed", "is_chat_message", "is_chat_messages", "is_tool_call", "is_embedded", "is_embedding",
    "is_embeddings", "is_instructions", "is_prediction", "is_stamped", "is_trainable", "from_chat_completion_message",
    "from_chat_completion_messages", "to_chat_completion_message", "to_chat_completion_messages",
    "to_chat_completion_request",
    "get_default_language_model", "register_synalinks_serializable", "saving", "tree", "set_default_embedding_model",
    "set_default_language_model", "metrics", "optimizers", "rewards", *_LAZY_SUBMODULES,
    "ChatCompletionChoice", "ChatCompletionCompletionTokensDetails", "ChatCompletionFunctionCall",
    "ChatCompletionJsonSchema", "ChatCompletionMessage", "ChatCompletionPromptTokensDetails", "ChatCompletionRequest",
    "ChatCompletionResponse", "ChatCompletionResponseFormat", "ChatCompletionTool", "ChatCompletionToolCall",
    "ChatCompletionToolFunction", "ChatCompletionUsage", "ToolCalling", "is_strictly_chat_message",
    "is_strictly_chat_messages", "default_embedding_model", "default_language_model", "is_observability_enabled",
    "is_trace_recording_enabled", "record_traces", "synalinks_home", "trace_recording_dir", "Initializer",
    "BatchMetric", "GapK", "Metric", "PassAtK", "PassHatK", "default_prompt_template", "OMEGA", "BatchReward",
    "CosineSimilarity", "ExactMatch", "LMAsJudge", "Reward", "version",
]


def version() -> str:
    """promptgym's version (``synalinks.version()``)."""
    return __version__
