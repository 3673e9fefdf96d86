"""Merging modules: join the outputs of parallel branches into one data model.

| inputs            | Concat (``+``) | And (``&``) | Or (``|``)  | Xor (``^``) |
|-------------------|----------------|-------------|-------------|-------------|
| all data          | merged         | merged      | merged      | None (2+)   |
| some None         | error          | None        | the others, merged | the one, if only one |
| all None          | error          | None        | None        | None        |

Merged fields keep their names; a name already used gets a numeric suffix
(``answer``, ``answer_1``). A branch that was not taken outputs None, so
``Or`` is how two exclusive branches (``Branch``) come back together::

    easy, hard = await Branch(question=..., labels=["easy", "hard"], branches=[...])(inputs)
    outputs = await Or()([easy, hard])          # or: easy | hard
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import register_builtin
from promptgym.modules.json_operation import MergeOperation


@register_builtin
class Concat(MergeOperation):
    """Every input's fields in one data model; an input that is None is an error."""

    def merge(self, values: list[Any]) -> Any:
        for index, value in enumerate(values):
            if value is None:
                shown = ", ".join(f"x{i + 1}={'None' if v is None else type(v).__name__}" for i, v in enumerate(values))
                raise ValueError(f"{self.name}: Received x{index + 1}=None ({shown}); Concat needs every input "
                                 "(use And to get None, or Or to skip missing branches)")
        return self.concatenated(values)


@register_builtin
class And(MergeOperation):
    """Every input's fields in one data model, or None if any input is None."""

    def merge(self, values: list[Any]) -> Any:
        return None if any(value is None for value in values) else self.concatenated(values)


@register_builtin
class Or(MergeOperation):
    """The inputs that are not None, merged; None if all are. Its symbolic output has the first input's schema."""

    schema_rule = "first"

    def merge(self, values: list[Any]) -> Any:
        present = [value for value in values if value is not None]
        return self.concatenated(present) if present else None


@register_builtin
class Xor(MergeOperation):
    """The only input that is not None; None if several or none are. Symbolically: the first input's schema."""

    schema_rule = "first"

    def merge(self, values: list[Any]) -> Any:
        present = [value for value in values if value is not None]
        return self.concatenated(present) if len(present) == 1 else None


Concatenate = Concat
