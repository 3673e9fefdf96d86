"""A program's state as data, with Keras'/synalinks' names: ``to_json``, ``get_state_tree``, ``get_variable``...

    program.get_state_tree()["trainable_variables"]["generator"]["state"]   # the Generator's prompt
    program.get_variable(index=0)                                          # a Variable
    text = program.to_json(); twin = promptgym.programs.program_from_json(text)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from promptgym.core.serialization import deserialize_object
from promptgym.modules.variable import Variable
from promptgym.programs import saving
from promptgym.programs.synalinks_files import is_synalinks_file


T = TypeVar("T")


def by_name_or_index(items: Sequence[T], name: str | None, index: int | None, kind: str, program: str) -> T:
    """``items[index]`` when ``index`` is given, else the item called ``name`` (a module, a variable of ``program``).

    >>> from types import SimpleNamespace as Item
    >>> by_name_or_index([Item(name="a"), Item(name="b")], "b", None, "module", "qa").name
    'b'
    """
    if index is not None:
        if not -len(items) <= index < len(items):
            raise ValueError(f"{program}: no {kind} at index {index}; the program has {len(items)} {kind}s")
        return items[index]
    for item in items:
        if item.name == name:  # type: ignore[attr-defined]
            return item
    raise ValueError(f"{program}: no {kind} named {name!r}; {kind}s: {', '.join(i.name for i in items)}")  # type: ignore[attr-defined]


def _nested(variables: list[Variable]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for variable in variables:
        node = tree
        *path, leaf = variable.name.split("/")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = variable.get_json()
    return tree


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"generator/state": {...}}`` from a nested tree (a variable's value is the first dict without dicts only)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}/{key}" if prefix else key
        if isinstance(value, dict) and value and all(isinstance(item, dict) for item in value.values()):
            flat.update(_flat(value, name))
        else:
            flat[name] = value
    return flat


class ProgramState:
    """Mixed into Program (which provides ``variables``, ``training_setup``, ``save`` and friends)."""

    variables: list[Variable]
    trainable_variables: list[Variable]
    non_trainable_variables: list[Variable]
    training_setup: Any

    def get_variable(self, name: str | None = None, index: int | None = None) -> Variable:
        """A variable by name (``"generator/state"``) or by position in ``variables``."""
        if (name is None) == (index is None):
            raise ValueError(f"give either a variable name or an index, got name={name!r}, index={index!r}")
        return by_name_or_index(self.variables, name, index, "variable", self.name)  # type: ignore[attr-defined]

    def get_state_tree(self) -> dict[str, Any]:
        """The variables' values nested by name: trainable, non-trainable, and the optimizer's state."""
        tree = {"trainable_variables": _nested(self.trainable_variables),
                "non_trainable_variables": _nested(self.non_trainable_variables)}
        if self.training_setup is not None:
            tree["optimizer_variables"] = self.training_setup.optimizer.get_state()
        return tree

    def set_state_tree(self, state_tree: dict[str, Any]) -> None:
        """Assign the values of a :meth:`get_state_tree` tree (names must match)."""
        by_name = {variable.name: variable for variable in self.variables}
        for group in ("trainable_variables", "non_trainable_variables"):
            for name, value in _flat(state_tree.get(group, {})).items():
                if name not in by_name:
                    raise ValueError(f"set_state_tree: {group}: no variable named {name!r}")
                by_name[name].assign(value)
        if "optimizer_variables" in state_tree and self.training_setup is not None:
            self.training_setup.optimizer.set_state(state_tree["optimizer_variables"])

    def to_json(self, **kwargs: Any) -> str:
        """The program file's content (architecture, variables, compile state) as a JSON string."""
        return json.dumps(saving.program_to_dict(self), ensure_ascii=False, **kwargs)  # type: ignore[arg-type]


def program_from_json(json_string: str | dict[str, Any], custom_objects: Any = None) -> Any:
    """A program from :meth:`ProgramState.to_json`'s text (or a program file's dict); nothing in it runs.

    An architecture alone (``{"class_name": ..., "config": ...}``, as ``serialize_object`` writes it) is
    rebuilt with fresh variables. A file synalinks wrote (``synalinks_version`` at the top) is a ValueError
    saying how to take its trained variables (``program.load_variables``): promptgym never rebuilds a program
    from synalinks' architecture configs. ``custom_objects`` is accepted for synalinks code: register your
    classes with ``register_synalinks_serializable``.
    """
    source = "program_from_json"
    data = json.loads(json_string) if isinstance(json_string, (str, bytes)) else json_string
    if isinstance(data, dict) and "format" not in data and "class_name" in data and not is_synalinks_file(data):
        try:
            return deserialize_object(data, expected="program class")
        except Exception as error:  # noqa: BLE001 - a bad architecture: say where in it, never a bare KeyError
            raise ValueError(f"{source}: {saving.load_problem(data, 'program', error, source)}") from None
    return saving.program_from_dict(data, source=source)
