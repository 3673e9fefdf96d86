"""``synalinks.backend``: the data-model layer's names in one place (DataModel, JsonDataModel, schemas, chat
messages, score scales, numeric settings)."""

from __future__ import annotations

from promptgym.core.base_models import *  # noqa: F403  (its __all__)
from promptgym.core.chat import *  # noqa: F403  (its __all__)
from promptgym.core.chat import ToolCall as ToolCalling  # noqa: F401  (synalinks' other name for it)
from promptgym.core.chat_completions import *  # noqa: F403  (its __all__)
from promptgym.core.data_model import DataModel, Field, is_meta_class  # noqa: F401
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.json_ops import (  # noqa: F401
    concatenate_json,
    concatenate_schema,
    contains_schema,
    factorize_json,
    factorize_schema,
    in_mask_json,
    in_mask_schema,
    is_schema_equal,
    out_mask_json,
    out_mask_schema,
    prefix_json,
    prefix_schema,
    standardize_schema,
    suffix_json,
    suffix_schema,
)
from promptgym.core.name_scope import current_path, name_scope  # noqa: F401
from promptgym.core.scores import FineScore, Rating, Rating10, Rating20, Score, get_score_type, normalize_score  # noqa: F401
from promptgym.modules.symbolic import SymbolicDataModel, any_symbolic, is_symbolic_data_model  # noqa: F401
from promptgym.lm.traces import is_trace_recording_enabled, record_traces, trace_recording_dir  # noqa: F401
from promptgym.session import clear_session, enable_logging, enable_observability, get_seed, set_seed  # noqa: F401

_settings = {"epsilon": 1e-7, "floatx": "float32"}


def is_json_data_model(value: object) -> bool:
    return isinstance(value, JsonDataModel)


def backend() -> str:
    """The data-model backend's name (promptgym has one: pydantic)."""
    return "pydantic"


def epsilon() -> float:
    """The small number used to avoid dividing by zero in metrics."""
    return _settings["epsilon"]  # type: ignore[return-value]


def set_epsilon(value: float) -> None:
    _settings["epsilon"] = float(value)


def floatx() -> str:
    return _settings["floatx"]  # type: ignore[return-value]


def set_floatx(value: str) -> None:
    _settings["floatx"] = str(value)


def set_backend(name: str) -> None:
    """promptgym has one data-model backend, ``"pydantic"``; any other name is an error."""
    if name != "pydantic":
        raise ValueError(f"set_backend({name!r}): promptgym's only backend is 'pydantic'")


def is_observability_enabled() -> bool:
    """Always False: promptgym has no MLflow tracing."""
    return False
