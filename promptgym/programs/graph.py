"""The functional graph: which module runs on which symbolic value, in order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel


@dataclass
class Node:
    module: Module
    parents: list[str]
    output: str


class FunctionalGraph:
    """Nodes in topological order, from ``inputs`` to ``outputs``."""

    def __init__(self, inputs: list[SymbolicDataModel], outputs: list[SymbolicDataModel]) -> None:
        self.inputs = inputs
        self.outputs = outputs
        input_ids = {symbolic.id for symbolic in inputs}
        self.nodes: list[Node] = []
        seen: set[str] = set(input_ids)

        def visit(symbolic: SymbolicDataModel) -> None:
            if symbolic.id in seen:
                return
            if symbolic.producer is None:
                raise ValueError(
                    f"the program's outputs depend on an Input ({symbolic.data_model.__name__}) "
                    "that is not in Program(inputs=...)"
                )
            for parent in symbolic.parents:
                visit(parent)
            seen.add(symbolic.id)
            self.nodes.append(Node(symbolic.producer, [parent.id for parent in symbolic.parents], symbolic.id))

        for output in outputs:
            visit(output)
        names = [node.module.name for node in self.nodes]
        duplicates = sorted({name for name in names if names.count(name) > 1 and
                             len({id(n.module) for n in self.nodes if n.module.name == name}) > 1})
        if duplicates:
            raise ValueError(f"two different modules are named {duplicates[0]!r}; give each module its own name")

    @property
    def modules(self) -> list[Module]:
        unique: dict[int, Module] = {}
        for node in self.nodes:
            unique.setdefault(id(node.module), node.module)
        return list(unique.values())

    def answer_modules(self) -> list[Module]:
        """Modules that read the program's only input and write one of its outputs, with nothing in between.

        Their training demonstrations can be the labelled examples themselves.
        """
        if len(self.inputs) != 1:
            return []
        input_id, output_ids = self.inputs[0].id, {symbolic.id for symbolic in self.outputs}
        return [node.module for node in self.nodes if node.parents == [input_id] and node.output in output_ids]

    async def run(self, values: dict[str, Any], training: bool = False) -> list[Any]:
        for node in self.nodes:
            parents = [values[parent] for parent in node.parents]
            values[node.output] = await node.module(parents[0] if len(parents) == 1 else parents, training=training)
        return [values[output.id] for output in self.outputs]
