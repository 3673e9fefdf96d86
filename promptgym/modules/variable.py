"""Trainable variables: the JSON texts and examples an optimizer evolves.

A rollout can run a program with other values for its variables without
changing the program: inside ``variable_values(...)``, each named variable
reads the given value. The override lives in a context variable, so two
rollouts with different values can run at the same time (each asyncio task
has its own context), and the program itself is never mutated::

    with variable_values({"generator/state": {"instructions": "Be brief.", "examples": []}}):
        answer = await program(x)      # the Generator reads "Be brief."
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import inspect
from typing import Any, Callable, Iterator, Mapping

from promptgym.core.schema import default_value, schema_of_value
from promptgym.modules.naming import unique_name

_overrides: contextvars.ContextVar[Mapping[str, dict[str, Any]] | None] = contextvars.ContextVar(
    "promptgym_variable_values", default=None)


def current_overrides() -> Mapping[str, Any] | None:
    """The values ``variable_values`` set for the running task (None outside such a block)."""
    return _overrides.get()


@contextlib.contextmanager
def variable_values(values: Mapping[str, dict[str, Any]] | None) -> Iterator[None]:
    """Inside the block (and the tasks it starts), variables named in ``values`` read those values."""
    if not values:
        yield
        return
    outer = _overrides.get()
    token = _overrides.set({**outer, **values} if outer else dict(values))
    try:
        yield
    finally:
        _overrides.reset(token)


def prompt_state_problem(value: dict[str, Any]) -> str | None:
    """What is wrong with a prompt variable's value (``instructions`` text, ``examples`` list), or None.

    >>> prompt_state_problem({"instructions": 12345, "examples": []})
    "'instructions' must be a string, got int"
    """
    missing = [key for key in ("instructions", "examples") if key not in value]
    if missing:
        return f"missing {' and '.join(repr(key) for key in missing)}"
    instructions, examples = value["instructions"], value["examples"]
    if not isinstance(instructions, str):
        return f"'instructions' must be a string, got {type(instructions).__name__}"
    if not isinstance(examples, list):
        return f"'examples' must be a list, got {type(examples).__name__}"
    for index, example in enumerate(examples):
        if not isinstance(example, dict) or not all(isinstance(example.get(key), dict) for key in ("inputs", "outputs")):
            return f"examples[{index}] must be an object with 'inputs' and 'outputs' objects, got {example!r:.80}"
    return None


class Variable:
    """A named JSON object owned by a module.

    A Generator's variable holds exactly ``{"instructions": str, "examples": [...]}``;
    each example is ``{"inputs": {...}, "outputs": {...}}``. ``check(value)`` says what
    is wrong with a value (None when nothing is): a value it objects to is never assigned.
    """

    def __init__(self, name: str | None = None, value: dict[str, Any] | None = None, trainable: bool = True,
                 description: str = "", data_model: Any = None,
                 check: Callable[[dict[str, Any]], str | None] | None = None, *, initializer: Any = None) -> None:
        self._schema: dict[str, Any] | None = None
        if value is None:  # synalinks' Variable(initializer=..., data_model=...)
            value = initial_value(initializer, data_model)
            if data_model is None and callable(getattr(initializer, "get_schema", None)):
                self._schema = initializer.get_schema()  # the initializer's DataModel's schema
        if name is None:
            name = unique_name("variable")
        self.name = name
        self.trainable = trainable
        self.description = description
        self.data_model = data_model  # the DataModel class the value follows, when the module said so
        self.check = check
        self._value: dict[str, Any] = {}
        self.assign(value)

    @property
    def json(self) -> dict[str, Any]:
        """The value itself (synalinks' name; mutating it changes the variable)."""
        return self.value

    def get_schema(self) -> dict[str, Any]:
        """The value's JSON schema: its DataModel's, or one inferred from the value."""
        if self.data_model is not None:
            return self.data_model.get_schema()
        if self._schema is not None:
            return copy.deepcopy(self._schema)
        return schema_of_value(self.value, title=self.name.rsplit("/", 1)[-1])

    @property
    def value(self) -> dict[str, Any]:
        """The value this variable has here: an override from :func:`variable_values`, else its own."""
        overrides = _overrides.get()
        if overrides is not None and self.name in overrides:
            return overrides[self.name]
        return self._value

    def assign(self, value: dict[str, Any]) -> None:
        """Replace the whole value (a deep copy, so callers can't alias it)."""
        if not isinstance(value, dict):
            raise TypeError(f"variable {self.name!r}: expected a JSON object, got {type(value).__name__}")
        problem = self.check(value) if self.check else None
        if problem:
            raise ValueError(f"variable {self.name!r}: {problem}")
        self._value = copy.deepcopy(value)

    def get(self, key: str, default: Any = None) -> Any:
        return self.value.get(key, default)

    def get_json(self) -> dict[str, Any]:
        return copy.deepcopy(self.value)

    def update(self, values: Mapping[str, Any]) -> None:
        """Assign some fields, keeping the others (checked like :meth:`assign`)."""
        self.assign({**self._value, **dict(values)})

    def __getitem__(self, key: str) -> Any:
        return self.value[key]

    def keys(self) -> Any:
        return self.get_json().keys()

    def values(self) -> Any:
        return self.get_json().values()

    def items(self) -> Any:
        return self.get_json().items()

    def __repr__(self) -> str:
        return f"Variable(name={self.name!r}, trainable={self.trainable})"


def initial_value(initializer: Any, data_model: Any) -> dict[str, Any]:
    """A variable's starting value from an initializer (a dict, an Initializer, a callable) or a DataModel's defaults."""
    if isinstance(initializer, dict):
        return initializer
    if initializer is not None and hasattr(initializer, "get_json") and not callable(initializer):
        return initializer.get_json()
    if initializer is not None and callable(initializer):
        takes_data_model = "data_model" in inspect.signature(initializer).parameters
        return dict(initializer(data_model=data_model) if takes_data_model and data_model is not None else initializer())
    if data_model is not None:
        return default_value(data_model)
    raise ValueError("a Variable needs a value: give initializer= (a dict or an initializer) or data_model=")

