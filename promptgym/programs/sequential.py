"""``Sequential``: a program whose modules run one after the other.

    program = Sequential([Input(data_model=Question), Generator(data_model=Answer, language_model=lm)])

    program = Sequential(name="qa")          # or grown step by step
    program.add(Input(data_model=Question))
    program.add(Generator(data_model=Answer, language_model=lm))

Without an ``Input`` first, the program builds itself from the first value
it is called on.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.schema import deserialize_data_model
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.modules.input_module import InputModule
from promptgym.modules.module import Module, run_sync, unique_name
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.programs.graph import FunctionalGraph
from promptgym.programs.program import Program


@register_builtin
class Sequential(Program):
    """A stack of modules, each reading the previous one's output."""

    def __init__(self, modules: list[Any] | None = None, name: str | None = None,
                 description: str | None = None, trainable: bool = True) -> None:
        super().__init__(name=name or unique_name("sequential"), description=description, trainable=trainable)
        self._stack: list[Module] = []
        for module in modules or []:
            self.add(module, rebuild=False)
        self._rebuild()

    @property
    def modules(self) -> list[Module]:
        return list(self._stack)

    @modules.setter
    def modules(self, value: Any) -> None:
        Program.modules.fset(self, value)  # type: ignore[attr-defined]

    def add(self, module: Any, rebuild: bool = True) -> None:
        """Append a module (an ``Input(...)`` goes first, and only one)."""
        if isinstance(module, SymbolicDataModel) and module.node is not None and isinstance(module.node.module, InputModule):
            module = module.node.module
        if not isinstance(module, Module):
            raise ValueError(f"Only instances of `synalinks.Module` (promptgym modules) can be added to a Sequential "
                             f"program; received {module!r}")
        if any(existing.name == module.name for existing in self._stack):
            raise ValueError(f"All modules added to a Sequential program should have unique names; "
                             f"{module.name!r} is already taken (pass name=...)")
        if isinstance(module, InputModule) and any(isinstance(existing, InputModule) for existing in self._stack):
            raise ValueError(f"Sequential program {self.name!r} has already been configured to use an input "
                             f"({self._stack[0].name}); it takes only one")
        if isinstance(module, InputModule):
            self._stack.insert(0, module)
        else:
            self._stack.append(module)
        if rebuild:
            self._rebuild()

    def pop(self, rebuild: bool = True) -> Module:
        """Remove and return the last module."""
        if not self._stack:
            raise IndexError(f"Sequential program {self.name!r} has no modules to pop")
        module = self._stack.pop()
        self._graph, self.built = None, False
        if rebuild:
            self._rebuild()
        return module

    def _rebuild(self) -> None:
        if self._stack and isinstance(self._stack[0], InputModule) and len(self._stack) > 1:
            run_sync(self.build(self._stack[0].output))
        else:
            self._graph, self.built = None, False

    async def build(self, inputs: Any) -> None:
        steps = [module for module in self._stack if not isinstance(module, InputModule)]
        if not steps:
            raise ValueError(f"Sequential program {self.name!r} has no modules: add some before building it")
        try:
            schema = inputs.get_schema()
        except Exception:  # noqa: BLE001 - not a data model: nothing to build from yet
            return
        if self._stack and isinstance(self._stack[0], InputModule):
            start = self._stack[0].output
        else:
            start = InputModule(schema=schema, data_model=getattr(inputs, "_data_model_class", None)).output
        current = start
        for module in steps:
            current = await module(current)
        self._graph = FunctionalGraph(start, current)
        self.built = True

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "trainable": self.trainable,
                "modules": [serialize_object(module) for module in self._stack]}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Sequential":
        modules = [deserialize_object(item, expected="module") for item in config["modules"]]
        if "input" in config:  # files from before Sequential.add
            modules.insert(0, InputModule(data_model=deserialize_data_model(config["input"])))
        return cls(modules, name=config["name"], description=config.get("description"),
                   trainable=config.get("trainable", True))
