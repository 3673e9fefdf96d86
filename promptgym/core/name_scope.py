"""Nested name scopes (``name_scope("outer")`` / ``current_path()`` -> ``"outer/inner"``), kept per task."""

from __future__ import annotations

import contextvars
from typing import Any

_path: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("promptgym_name_scope", default=())


class name_scope:
    """A context manager that appends ``name`` to the current path.

    ``caller=`` makes re-entering the same name from the same object a no-op;
    ``override_parent="/a/b"`` starts from that path instead of the current one.
    """

    def __init__(self, name: str, caller: Any = None, override_parent: str | None = None) -> None:
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"a name scope's name must be a string without '/', got {name!r}")
        self.name = name
        self.caller = caller
        self.override_parent = override_parent
        self._token: contextvars.Token[tuple[str, ...]] | None = None

    def __enter__(self) -> "name_scope":
        path = _path.get()
        if self.override_parent is not None:
            path = tuple(part for part in self.override_parent.split("/") if part)
        elif self.caller is not None and path and path[-1] == self.name:
            return self
        self._token = _path.set((*path, self.name))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._token is not None:
            _path.reset(self._token)
            self._token = None


def current_path() -> str:
    return "/".join(_path.get())
