"""``promptgym.config``: process-wide settings, under the names synalinks gives them.

    import promptgym as synalinks
    synalinks.config.set_seed(42)
    synalinks.config.set_default_language_model("local/qwen2.5-coder-0.5b-instruct")
    synalinks.config.record_traces(base_dir="./traces")

promptgym has no hosted platform and no MLflow tracing: ``api_base``,
``api_key`` and ``mlflow_*`` have no counterpart (see docs/synalinks.md).
"""

from __future__ import annotations

from typing import Any

from promptgym.backend import backend, epsilon, floatx, is_observability_enabled, set_backend, set_epsilon, set_floatx
from promptgym.lm.defaults import (
    default_embedding_model,
    default_language_model,
    set_default_embedding_model,
    set_default_language_model,
)
from promptgym.lm.traces import (
    is_trace_recording_enabled,
    promptgym_home,
    record_traces,
    stop_recording_traces,
    trace_recording_dir,
)
from promptgym.session import enable_logging, enable_observability, get_seed, set_seed

synalinks_home = promptgym_home
"""synalinks' name for :func:`promptgym_home` (where traces go by default)."""


def enable_unsafe_deserialization(*_: Any) -> None:
    """Nothing to enable: promptgym never runs code from a file (a Lambda's function is looked up by its
    registered name, see docs/synalinks.md)."""


__all__ = ["backend", "default_embedding_model", "default_language_model", "enable_logging",
           "enable_observability", "enable_unsafe_deserialization", "epsilon", "floatx", "get_seed",
           "is_observability_enabled", "is_trace_recording_enabled", "promptgym_home", "record_traces", "set_backend",
           "set_default_embedding_model", "set_default_language_model", "set_epsilon", "set_floatx", "set_seed",
           "stop_recording_traces", "synalinks_home", "trace_recording_dir"]
