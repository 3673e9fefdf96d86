"""Trace recording: every language-model call as one JSON line (synalinks' ``record_traces``).

    import promptgym as synalinks
    synalinks.record_traces(base_dir="./traces")   # before the calls to record
    ...                                            # run the program
    # ./traces/<program>/<module>/traces.jsonl: one line per LM call

Each line holds the model, the messages sent, the JSON schema asked for, the
answer's text (and reasoning), why it stopped, the tokens, the latency and
whether the cache answered. Calls made outside a module (a bare
``await lm(...)``) go to ``<base_dir>/_/_/traces.jsonl``. Secrets never
appear: API keys are not part of a request.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from promptgym.core.call_scope import current_call_names

_state: dict[str, Any] = {"dir": None}
_lock = threading.Lock()


def promptgym_home() -> str:
    """``$PROMPTGYM_HOME``, else the user data folder (``~/.local/share/promptgym`` on Linux)."""
    import platformdirs

    return os.environ.get("PROMPTGYM_HOME") or platformdirs.user_data_dir("promptgym")


def record_traces(base_dir: str | os.PathLike[str] | None = None) -> None:
    """Record every language-model call from now on under ``base_dir`` (default :func:`promptgym_home`)."""
    _state["dir"] = Path(base_dir) if base_dir is not None else Path(promptgym_home())


def stop_recording_traces() -> None:
    """Stop what :func:`record_traces` started."""
    _state["dir"] = None


def is_trace_recording_enabled() -> bool:
    return _state["dir"] is not None


def trace_recording_dir() -> str:
    """Where traces are written: the folder given to :func:`record_traces`, else :func:`promptgym_home`."""
    return str(_state["dir"] if _state["dir"] is not None else promptgym_home())


def _folder_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


def record_call(model: str, request: Any, response: Any, latency_s: float, cached: bool,
                cost_usd: float | None = 0.0) -> None:
    """Append one call to its module's trace file (does nothing unless recording); ``cost_usd`` None: unpriced."""
    base = _state["dir"]
    if base is None:
        return
    root, module = current_call_names() or ("", "")
    record = {
        "time": time.time(), "model": model, "program": root or None, "module": module or None,
        "messages": request.messages, "schema": request.schema, "temperature": request.temperature,
        "max_tokens": request.max_tokens, "content": response.content, "reasoning": response.reasoning,
        "finish_reason": response.finish_reason, "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens, "latency_s": round(latency_s, 6), "cached": cached,
        "cost_usd": cost_usd,
    }
    folder = Path(base) / _folder_name(root or "_") / _folder_name(module or "_")
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    with _lock:  # one line per write: concurrent calls never interleave inside a line
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "traces.jsonl", "a", encoding="utf-8") as handle:
            handle.write(line)
