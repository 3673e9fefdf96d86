"""Every module of a program, nested ones included: what serving and export look through.

    [module.name for module in iter_modules(program)]
"""

from __future__ import annotations

from typing import Any, Iterator

from promptgym.modules.module import Module


def iter_modules(program: Any) -> Iterator[Module]:
    """Each module of ``program`` once (depth first), programs inside it and their modules too."""
    seen: set[int] = set()
    stack = list(getattr(program, "modules", None) or []) + list(getattr(program, "submodules", None) or [])
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield module
        stack.extend(getattr(module, "submodules", None) or [])
        nested = getattr(module, "modules", None)  # a program inside the program
        if isinstance(nested, list):
            stack.extend(nested)
