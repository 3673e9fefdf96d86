"""Which module call is running here (per asyncio task), for what lower layers record (LM call traces).

    with module_call("generator"):      # Module.__call__ does this
        current_call_names()            # ("generator", "generator"): (outermost, innermost)
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_names: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("promptgym_call_names", default=None)


def current_call_names() -> tuple[str, str] | None:
    """``(outermost module, innermost module)`` of the module call running here, or None outside one."""
    return _names.get()


def enter_module_call(name: str) -> contextvars.Token[tuple[str, str] | None]:
    """Mark ``name`` as the innermost module call here; give the token to :func:`exit_module_call`."""
    outer = _names.get()
    return _names.set((outer[0] if outer else name, name))


def exit_module_call(token: contextvars.Token[tuple[str, str] | None]) -> None:
    _names.reset(token)


@contextlib.contextmanager
def module_call(name: str) -> Iterator[None]:
    token = enter_module_call(name)
    try:
        yield
    finally:
        exit_module_call(token)
