"""``Program``: modules wired together, trained and saved as one.

Three ways to build one, as in Keras::

    # functional
    inputs = Input(data_model=Question)
    outputs = await Generator(data_model=Answer, language_model=lm)(inputs)
    program = Program(inputs=inputs, outputs=outputs, name="qa")

    # sequential
    program = Sequential([Input(data_model=Question), Generator(data_model=Answer, language_model=lm)])

    # subclassing
    class QA(Program):
        def __init__(self, language_model=None, **kwargs):
            super().__init__(**kwargs)
            self.answer = ChainOfThought(data_model=Answer, language_model=language_model)
        async def call(self, inputs, training=False):
            return await self.answer(inputs)
"""

from __future__ import annotations

from typing import Any

import pydantic

from promptgym.core.data_model import DataModel
from promptgym.core.schema import deserialize_data_model, serialize_data_model
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.modules.generator import as_json
from promptgym.modules.module import Module, unique_name
from promptgym.modules.symbolic import Input, SymbolicDataModel
from promptgym.modules.variable import Variable
from promptgym.programs.graph import FunctionalGraph
from promptgym.programs.saving import load_program, load_variables, save_program, save_variables
from promptgym.programs.summary import program_summary
from promptgym.training.trainer import Trainer


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@register_builtin
class Program(Trainer, Module):
    """A trainable LM program; see the module docstring for the three styles."""

    def __init__(
        self,
        inputs: SymbolicDataModel | list[SymbolicDataModel] | None = None,
        outputs: SymbolicDataModel | list[SymbolicDataModel] | None = None,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
    ) -> None:
        object.__setattr__(self, "_tracked", {})
        super().__init__(name=name or unique_name("program"), description=description, trainable=trainable)
        self._graph: FunctionalGraph | None = None
        self._single_output = not isinstance(outputs, (list, tuple))
        if inputs is not None or outputs is not None:
            if inputs is None or outputs is None:
                raise ValueError("a functional Program needs both inputs= and outputs=")
            self._graph = FunctionalGraph(_as_list(inputs), _as_list(outputs))

    def __setattr__(self, name: str, value: Any) -> None:
        tracked = self.__dict__.get("_tracked")
        if tracked is not None and isinstance(value, Module) and not name.startswith("_"):
            tracked[name] = value
        object.__setattr__(self, name, value)

    # -- structure ------------------------------------------------------------------------

    @property
    def modules(self) -> list[Module]:
        """The program's modules, in execution order (subclasses: attribute order)."""
        return self._graph.modules if self._graph else list(self._tracked.values())

    @property
    def variables(self) -> list[Variable]:
        found: dict[int, Variable] = {}
        for module in self.modules:
            for variable in module.variables:
                found.setdefault(id(variable), variable)
        return list(found.values())

    @property
    def trainable_variables(self) -> list[Variable]:
        return [variable for variable in self.variables if variable.trainable and self.trainable]

    def get_module(self, name: str) -> Module:
        for module in self.modules:
            if module.name == name:
                return module
        raise KeyError(f"no module named {name!r}; modules: {', '.join(m.name for m in self.modules)}")

    def answer_modules(self) -> list[Module]:
        """Modules whose input is the program's input and whose output is its output (functional programs only)."""
        return self._graph.answer_modules() if self._graph else []

    @property
    def input_data_model(self) -> type[DataModel] | None:
        return self._graph.inputs[0].data_model if self._graph else None

    @property
    def output_data_model(self) -> type[DataModel] | None:  # type: ignore[override]
        return self._graph.outputs[0].data_model if self._graph else None

    def symbolic_call(self, inputs: SymbolicDataModel) -> SymbolicDataModel:
        if self.output_data_model is None:
            raise TypeError(f"{self.name}: a subclassed program can't be wired symbolically; call it on data")
        return SymbolicDataModel(self.output_data_model, producer=self, parents=[inputs])

    # -- running --------------------------------------------------------------------------

    def validate_input(self, x: Any, index: int | None = None) -> Any:
        """``x`` as the program's input DataModel, or an error naming the field."""
        expected = self.input_data_model
        if expected is None or isinstance(x, expected):
            return x
        where = f"input {index}" if index is not None else "input"
        try:
            return expected.model_validate(as_json(x))
        except TypeError as error:
            raise ValueError(f"{self.name}: {where}: {error}") from None
        except pydantic.ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "(root)"
            raise ValueError(
                f"{self.name}: {where} does not match {expected.__name__}: field {field!r}: {first['msg']}"
            ) from None

    async def __call__(self, inputs: Any, training: bool = False) -> Any:
        if isinstance(inputs, SymbolicDataModel):
            return self.symbolic_call(inputs)
        return await self.call(inputs, training=training)

    async def call(self, inputs: Any, training: bool = False) -> Any:
        """Run the program on one input; subclasses override this."""
        if self._graph is None:
            raise NotImplementedError(f"{type(self).__name__} must define `async def call(self, inputs, training=False)`")
        values = [self.validate_input(value) for value in _as_list(inputs)] if self.input_data_model else _as_list(inputs)
        outputs = await self._graph.run({symbolic.id: value for symbolic, value in zip(self._graph.inputs, values)}, training)
        return outputs[0] if self._single_output else outputs

    # -- saving ---------------------------------------------------------------------------

    def save(self, filepath: str) -> None:
        """Architecture + variables (+ compile config, optimizer and trainer state), atomically."""
        save_program(self, filepath)

    @classmethod
    def load(cls, filepath: str) -> "Program":
        """Rebuild a saved program; resolves only registered classes, runs no code from the file."""
        return load_program(filepath)

    def save_variables(self, filepath: str) -> None:
        save_variables(self, filepath)

    def load_variables(self, filepath: str) -> None:
        load_variables(self, filepath)

    def get_variables(self) -> dict[str, dict[str, Any]]:
        return {variable.name: variable.get_json() for variable in self.variables}

    def set_variables(self, values: dict[str, dict[str, Any]], source: str = "variables") -> None:
        """Assign every variable from ``values``; names must match exactly."""
        mine = {variable.name: variable for variable in self.variables}
        missing = sorted(set(mine) - set(values))
        unknown = sorted(set(values) - set(mine))
        if missing or unknown:
            raise ValueError(
                f"{source}: variables don't match program {self.name!r}"
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            )
        for name, value in values.items():
            mine[name].assign(value)

    def get_config(self) -> dict[str, Any]:
        base = {"name": self.name, "description": self.description, "trainable": self.trainable}
        if self._graph is None:
            return base
        return {
            **base,
            "inputs": [{"id": s.id, "data_model": serialize_data_model(s.data_model)} for s in self._graph.inputs],
            "nodes": [
                {"module": serialize_object(node.module), "parents": node.parents, "output": node.output}
                for node in self._graph.nodes
            ],
            "outputs": [s.id for s in self._graph.outputs],
            "single_output": self._single_output,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Program":
        if "nodes" not in config:
            return cls(**config)
        symbols: dict[str, SymbolicDataModel] = {
            item["id"]: SymbolicDataModel(deserialize_data_model(item["data_model"])) for item in config["inputs"]
        }
        inputs = list(symbols.values())
        modules: dict[str, Module] = {}
        for node in config["nodes"]:
            module_name = node["module"]["config"].get("name")
            module = modules.get(module_name) or deserialize_object(node["module"], expected="module")
            modules[module.name] = module
            parents = [symbols[parent] for parent in node["parents"]]
            symbols[node["output"]] = module.symbolic_call(parents[0])
        outputs = [symbols[output] for output in config["outputs"]]
        return Program(
            inputs=inputs if len(inputs) > 1 else inputs[0],
            outputs=outputs[0] if config.get("single_output", True) else outputs,
            name=config["name"],
            description=config.get("description"),
            trainable=config.get("trainable", True),
        )

    # -- inspection -----------------------------------------------------------------------

    def summary(self, print_fn: Any = None) -> str:
        """Print (and return) the modules, their schemas and trainable variables."""
        text = program_summary(self)
        (print_fn or print)(text)
        return text

    def get_graph(self) -> dict[str, Any]:
        """Nodes and edges of the module graph (used by ``plot_program``)."""
        nodes: list[dict[str, Any]] = []
        edges: list[list[str]] = []
        if self._graph is None:
            previous = None
            for module in self.modules:
                nodes.append({"id": module.name, "label": module.name, "class_name": type(module).__name__, "schema": None})
                if previous:
                    edges.append([previous, module.name])
                previous = module.name
            return {"nodes": nodes, "edges": edges}
        producer_of = {s.id: s.id for s in self._graph.inputs}
        for symbolic in self._graph.inputs:
            nodes.append({"id": symbolic.id, "label": symbolic.data_model.__name__, "class_name": "Input",
                          "schema": symbolic.data_model.get_schema()})
        for node in self._graph.nodes:
            node_id = node.module.name
            if all(existing["id"] != node_id for existing in nodes):
                nodes.append({"id": node_id, "label": node.module.name, "class_name": type(node.module).__name__,
                              "schema": getattr(node.module, "data_model", None) and node.module.data_model.get_schema()})
            for parent in node.parents:
                edges.append([producer_of[parent], node_id])
            producer_of[node.output] = node_id
        return {"nodes": nodes, "edges": edges}


@register_builtin
class Sequential(Program):
    """A program whose modules run one after the other.

    >>> # program = Sequential([Input(data_model=Question), Generator(data_model=Answer, language_model=lm)])
    """

    def __init__(self, modules: list[Any] | None = None, name: str | None = None,
                 description: str | None = None, trainable: bool = True) -> None:
        modules = list(modules or [])
        if not modules or not isinstance(modules[0], SymbolicDataModel):
            raise ValueError("Sequential([...]) must start with Input(data_model=...), followed by modules")
        current = inputs = modules[0]
        for module in modules[1:]:
            if not isinstance(module, Module):
                raise TypeError(f"Sequential: expected a module, got {module!r}")
            current = module.symbolic_call(current)
        super().__init__(inputs=inputs, outputs=current, name=name or unique_name("sequential"),
                         description=description, trainable=trainable)

    def get_config(self) -> dict[str, Any]:
        assert self._graph is not None
        return {
            "name": self.name,
            "description": self.description,
            "trainable": self.trainable,
            "input": serialize_data_model(self._graph.inputs[0].data_model),
            "modules": [serialize_object(node.module) for node in self._graph.nodes],
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Sequential":
        modules = [deserialize_object(item, expected="module") for item in config["modules"]]
        return cls([Input(data_model=deserialize_data_model(config["input"])), *modules], name=config["name"],
                   description=config.get("description"), trainable=config.get("trainable", True))
