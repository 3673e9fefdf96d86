"""Masking modules: keep (``InMask``) or drop (``OutMask``) fields of data models.

Masks name fields by base name, so ``mask=["answer"]`` also covers the
``answer_1`` a concatenation made; ``pattern=`` takes a regular expression::

    outputs = await OutMask(mask=["thinking"])(answer_with_thinking)   # just the answer
    x = await InMask(mask=["text"])([doc_a, doc_b])                    # each input masked
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import register_builtin
from promptgym.modules.json_operation import UnaryOperation


class _Mask(UnaryOperation):
    def __init__(self, mask: list[str] | None = None, pattern: str | None = None, recursive: bool = True,
                 name: str | None = None, description: str | None = None, trainable: bool = True) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if mask is None and pattern is None:
            raise ValueError(f"{type(self).__name__}() needs mask=[field names] or pattern= (a regular expression)")
        self.mask = list(mask) if mask is not None else None
        self.pattern = pattern
        self.recursive = recursive

    def options(self) -> dict[str, Any]:
        return {"mask": self.mask, "pattern": self.pattern, "recursive": self.recursive}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.options()}


@register_builtin
class InMask(_Mask):
    """Only the fields named in ``mask`` (or matching ``pattern``)."""

    operation = "in_mask"


@register_builtin
class OutMask(_Mask):
    """Every field but those named in ``mask`` (or matching ``pattern``), nested objects included."""

    operation = "out_mask"
