"""Checks a logger runs before training starts: can it write where it was told to.

A TensorBoard folder or an MLflow file store that can't be written used to fail at the first
scalar with a bare ``NotADirectoryError`` naming neither the callback nor the option. The
loggers call :func:`ensure_writable_folder` from ``on_train_begin`` (before the first epoch)
and the CLI before the run starts, so the error says which logger, which option, and why.

    >>> import tempfile
    >>> folder = ensure_writable_folder(tempfile.mkdtemp(), "callbacks.TensorBoard(log_dir=...)")
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class LoggerSetupError(ValueError):
    """A logger can't write where its option says; the message names the logger and the option."""


def folder_problem(path: str | Path) -> str | None:
    """Why ``path`` can't be a folder a logger writes to, without creating anything (None: it can).

    >>> folder_problem("/dev/null/logs")
    "'/dev/null' is a file, not a folder; give a folder path"
    """
    folder = Path(path).expanduser().absolute()
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            if not candidate.is_dir():
                return f"{str(candidate)!r} is a file, not a folder; give a folder path"
            if not os.access(candidate, os.W_OK | os.X_OK):
                return f"{str(candidate)!r} is not writable (permission denied); give a folder you can write"
            return None
    return None


def ensure_writable_folder(path: str | Path, where: str) -> Path:
    """``path`` created if missing and written to once, or a LoggerSetupError naming ``where`` and the cause."""
    folder = Path(path).expanduser()
    problem = folder_problem(folder)
    if problem is None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".promptgym-write-check-"):
                pass
        except OSError as error:
            problem = folder_problem(folder) or f"{type(error).__name__}: {error.strerror or error}"
    if problem is not None:
        raise LoggerSetupError(f"{where}: cannot write to {str(folder)!r}: {problem}")
    return folder
