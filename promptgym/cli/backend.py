"""Deprecated name of :mod:`promptgym.cli.execution` (``--backend``: where a run executes)."""

from promptgym.cli.execution import (  # noqa: F401 - re-exported under the old names
    BackendError, BackendSpec, ExecutionError, ExecutionSpec, parse_backend, parse_execution,
)
