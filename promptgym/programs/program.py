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
from promptgym.core.serialization import register_builtin
from promptgym.core.tree import flatten
from promptgym.modules.generator import as_json
from promptgym.modules.module import Module, unique_name
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.programs.functional_config import graph_config, graph_from_config
from promptgym.programs.graph import FunctionalGraph
from promptgym.programs.saving import load_program, load_variables, save_program, save_variables
from promptgym.programs.state import ProgramState, by_name_or_index
from promptgym.programs.streaming import ProgramStream, stream_program
from promptgym.programs.summary import program_summary
from promptgym.training.trainer import Trainer


@register_builtin
class Program(ProgramState, Trainer, Module):
    """A trainable LM program; see the module docstring for the three styles.

    A subclass may also define ``async def build(self, inputs)`` that wires
    modules on the symbolic ``inputs`` and ends with
    ``super().__init__(inputs=inputs, outputs=outputs, name=self.name)``
    (synalinks' "mixing" style): the program builds itself on its first call.
    """

    span_kind = "program"

    def __init__(
        self,
        inputs: Any = None,
        outputs: Any = None,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
    ) -> None:
        tracked = self.__dict__.get("_tracked")
        super().__init__(name=name or unique_name("program"), description=description, trainable=trainable)
        if tracked:  # re-initialised as a functional program from build(): keep the sub-modules already set
            self.__dict__["_tracked"].update(tracked)
        self._graph: FunctionalGraph | None = None
        if inputs is not None or outputs is not None:
            if inputs is None or outputs is None:
                raise ValueError("a functional Program needs both inputs= and outputs=")
            self._graph = FunctionalGraph(inputs, outputs)
            self.built = True

    # -- structure ------------------------------------------------------------------------

    @property
    def modules(self) -> list[Module]:
        """The program's modules, in execution order (subclasses: attribute order)."""
        return self._graph.modules if self._graph else self.submodules

    @modules.setter
    def modules(self, value: Any) -> None:
        raise AttributeError("`modules` is a reserved attribute of programs (the list of their modules); "
                             "name yours differently")

    def _variable_holders(self) -> list[Module]:
        return self.modules

    def get_module(self, name: str | None = None, index: int | None = None) -> Module:
        """A module by name (or by position in ``modules``)."""
        return by_name_or_index(self.modules, name, index, "module", self.name)

    def answer_modules(self) -> list[Module]:
        """Modules whose input is the program's input and whose output is its output (functional programs only)."""
        return self._graph.answer_modules() if self._graph else []

    @property
    def inputs(self) -> Any:
        """The symbolic inputs of a functional program."""
        if self._graph is None:
            raise AttributeError(f"{self.name} has no defined inputs: it is not built (call it once, or build it)")
        return self._graph.input_structure

    @property
    def outputs(self) -> Any:
        if self._graph is None:
            raise AttributeError(f"{self.name} has no defined outputs: it is not built (call it once, or build it)")
        return self._graph.output_structure

    @property
    def input_schema(self) -> dict[str, Any]:
        if self._graph is None:
            raise AttributeError(f"{self.name} has no defined input schema: it is not built")
        return self._graph.inputs[0].get_schema()

    @property
    def output_schema(self) -> dict[str, Any]:
        if self._graph is None:
            raise AttributeError(f"{self.name} has no defined output schema: it is not built")
        return self._graph.outputs[0].get_schema()

    @property
    def input_data_model(self) -> type[DataModel] | None:
        return self._graph.inputs[0].data_model if self._graph else None

    @property
    def output_data_model(self) -> type[DataModel] | None:  # type: ignore[override]
        return self._graph.outputs[0].data_model if self._graph else None

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        """A functional program's outputs as fresh placeholders; a subclass's by tracing ``call``."""
        if self._graph is not None:
            return self._graph.output_spec(name=self.name)
        return await self._run_call(inputs, training)

    # -- running --------------------------------------------------------------------------

    def validate_input(self, x: Any, index: int | None = None) -> Any:
        """``x`` as the program's input DataModel, or an error naming the field."""
        expected = self.input_data_model
        if expected is None or x is None or isinstance(x, expected) or not isinstance(x, (dict, pydantic.BaseModel)):
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

    async def call(self, inputs: Any, training: bool = False) -> Any:
        """Run the program on one input; subclasses override this."""
        if self._graph is None:
            raise NotImplementedError(f"{type(self).__name__} must define `async def call(self, inputs, training=False)` "
                                      "or `async def build(self, inputs)`")
        if len(self._graph.inputs) == 1 and not isinstance(self._graph.input_structure, (list, tuple, dict)):
            inputs = self.validate_input(inputs)
        return await self._graph.run(inputs, training)

    def stream(self, inputs: Any) -> ProgramStream:
        """The text of the last output field as the model writes it (an async iterator of pieces).

        >>> # async with program.stream({"question": "Why is the sky blue?"}) as stream:
        >>> #     async for text in stream: print(text, end="")
        >>> # stream.output  -> the whole output, as ``await program(x)`` returns it

        The Generator that writes the output streams its model call; a program whose
        output comes from another module yields the field once, at the end. Closing the
        stream early cancels the run and stops the generation.
        """
        return stream_program(self, inputs)

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
        return {**base, **graph_config(self._graph)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Program":
        if "nodes" not in config:
            return cls(**config)
        inputs, outputs = graph_from_config(config)
        return Program(inputs=inputs, outputs=outputs, name=config["name"], description=config.get("description"),
                       trainable=config.get("trainable", True))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}, description={self.description!r}, built={self.built}>"

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
                nodes.append({"id": module.name, "label": module.name, "class_name": type(module).__name__, "schema": None,
                              "trainable": _trainable_summary(module)})
                if previous:
                    edges.append([previous, module.name])
                previous = module.name
            return {"nodes": nodes, "edges": edges}
        producer_of = {s.id: s.id for s in self._graph.inputs}
        for symbolic in self._graph.inputs:
            nodes.append({"id": symbolic.id, "label": symbolic.data_model.__name__, "class_name": "Input",
                          "schema": symbolic.get_schema()})
        for node in self._graph.nodes:
            node_id = node.module.name
            if all(existing["id"] != node_id for existing in nodes):
                schema = getattr(node.module, "data_model", None)
                nodes.append({"id": node_id, "label": node.module.name, "class_name": type(node.module).__name__,
                              "schema": schema.get_schema() if schema is not None else None,
                              "trainable": _trainable_summary(node.module)})
            for parent in node.parents:
                edges.append([producer_of[parent.id], node_id])
            for output in flatten(node.outputs):
                if isinstance(output, SymbolicDataModel):
                    producer_of[output.id] = node_id
        return {"nodes": nodes, "edges": edges}


def _trainable_summary(module: Any) -> bool:
    """Whether an optimizer can change this module (``plot_program(show_trainable=True)`` shows it)."""
    return bool(getattr(module, "trainable", False)) and bool(getattr(module, "trainable_variables", []))


class Functional(Program):
    """A program wired from symbolic ``inputs`` to ``outputs`` (synalinks' and Keras' name for that style).

    ``Program(inputs=..., outputs=...)`` builds the same thing; this class only insists on both.

    >>> import promptgym
    >>> class Query(promptgym.DataModel):
    ...     query: str
    >>> x = promptgym.Input(data_model=Query)
    >>> isinstance(Functional(x, x, name="echo"), Program)
    True
    """

    def __init__(self, inputs: Any, outputs: Any, name: str | None = None, description: str | None = None,
                 trainable: bool = True) -> None:
        super().__init__(inputs=inputs, outputs=outputs, name=name, description=description, trainable=trainable)
