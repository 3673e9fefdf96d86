"""The functional graph: which module runs on which symbolic values, and running it.

A program's graph is the set of module calls (:class:`CallNode`) its outputs
depend on, in topological order. Running it starts every call as soon as the
calls it reads from are done, so parallel branches run concurrently (each
language model bounds its own concurrency) and a join waits for all of its
branches. Inputs and outputs may be one value or a list, tuple or dict of
them.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from promptgym.core.tree import flatten, map_structure, pack_as
from promptgym.modules.input_module import InputModule
from promptgym.modules.module import Module
from promptgym.modules.symbolic import CallNode, SymbolicDataModel


class NotSymbolicError(TypeError, ValueError):
    """A program's inputs or outputs hold something that is not a symbolic data model (a TypeError, and the
    ValueError synalinks raises, so either ``except`` catches it)."""


class FunctionalGraph:
    """The calls from ``inputs`` to ``outputs`` (nested structures of symbolic data models)."""

    def __init__(self, inputs: Any, outputs: Any) -> None:
        self.input_structure = inputs
        self.output_structure = outputs
        self.inputs: list[SymbolicDataModel] = flatten(inputs)
        self.outputs: list[SymbolicDataModel] = flatten(outputs)
        for where, values in (("inputs", self.inputs), ("outputs", self.outputs)):
            for value in values:
                if not isinstance(value, SymbolicDataModel):
                    raise NotSymbolicError(f"All `{where}` values must be SymbolicDataModels (from Input() and module "
                                           f"calls), got {value!r}")
        input_ids = {symbolic.id for symbolic in self.inputs}
        self.nodes: list[CallNode] = []
        seen: set[int] = set()

        def visit(symbolic: SymbolicDataModel) -> None:
            if symbolic.id in input_ids:
                return
            node = symbolic.node
            if node is None or isinstance(node.module, InputModule):
                raise ValueError(
                    f"the program's outputs depend on an input ({symbolic.get_schema().get('title', 'a data model')}) "
                    "that is not in Program(inputs=...)")
            if id(node) in seen:
                return
            seen.add(id(node))
            for parent in node.parents:
                visit(parent)
            self.nodes.append(node)

        for output in self.outputs:
            visit(output)
        by_name: dict[str, int] = {}
        for module in self.modules:
            if by_name.setdefault(module.name, id(module)) != id(module):
                raise ValueError(f"two different modules are named {module.name!r}; give each module its own name")

    @property
    def input_modules(self) -> list[InputModule]:
        return [symbolic.node.module for symbolic in self.inputs
                if symbolic.node is not None and isinstance(symbolic.node.module, InputModule)]

    @property
    def modules(self) -> list[Module]:
        """Input modules, then every module called, in execution order (a module called twice counts once)."""
        unique: dict[int, Module] = {}
        for module in [*self.input_modules, *(node.module for node in self.nodes)]:
            unique.setdefault(id(module), module)
        return list(unique.values())

    def answer_modules(self) -> list[Module]:
        """Modules that read the program's only input and write one of its outputs, with nothing in between.

        Their training demonstrations can be the labelled examples themselves.
        """
        if len(self.inputs) != 1:
            return []
        input_id, output_ids = self.inputs[0].id, {symbolic.id for symbolic in self.outputs}
        return [node.module for node in self.nodes
                if [parent.id for parent in node.parents] == [input_id] and isinstance(node.outputs, SymbolicDataModel)
                and node.outputs.id in output_ids]

    @functools.cached_property
    def _producers(self) -> dict[str, CallNode]:
        """Which call writes each symbolic value (the graph never changes once built)."""
        return {output.id: node for node in self.nodes for output in flatten(node.outputs)
                if isinstance(output, SymbolicDataModel)}

    @functools.cached_property
    def _is_chain(self) -> bool:
        """Whether each call reads the one before it, so that nothing could run concurrently."""
        producers = self._producers
        return all(any(producers.get(parent.id) is previous for parent in node.parents)
                   for previous, node in zip(self.nodes, self.nodes[1:]))

    async def run(self, inputs: Any, training: bool = False) -> Any:
        """The outputs for these input values (same structure as the program's inputs)."""
        values: dict[str, Any] = {}
        leaves = flatten(inputs) if isinstance(self.input_structure, (list, tuple, dict)) else [inputs]
        if len(leaves) != len(self.inputs):
            raise ValueError(f"the program takes {len(self.inputs)} input(s), got {len(leaves)}")
        for symbolic, value in zip(self.inputs, leaves):
            values[symbolic.id] = value
        producers = self._producers
        tasks: dict[int, asyncio.Task[None]] = {}

        async def run_node(node: CallNode) -> None:
            waits = [tasks[id(producers[parent.id])] for parent in node.parents if parent.id in producers and tasks]
            if waits:
                await asyncio.gather(*waits)
            arguments = map_structure(lambda leaf: values[leaf.id] if isinstance(leaf, SymbolicDataModel) else leaf,
                                      node.inputs)
            result = await node.module(arguments, training=training)
            outputs = flatten(node.outputs)
            results = [None] * len(outputs) if result is None and len(outputs) > 1 else \
                (flatten(result) if isinstance(node.outputs, (list, tuple, dict)) else [result])
            for output, value in zip(outputs, results):
                values[output.id] = value

        if self._is_chain:  # one call after the other: no task per call (the per-call path of most programs)
            for node in self.nodes:
                await run_node(node)
        else:
            for node in self.nodes:
                tasks[id(node)] = asyncio.create_task(run_node(node))
            try:
                await asyncio.gather(*tasks.values())
            finally:
                for task in tasks.values():
                    task.cancel()
        return pack_as(self.output_structure, [values[output.id] for output in self.outputs])

    def output_spec(self, name: str | None = None) -> Any:
        """Fresh symbolic data models shaped like the outputs (a program used as a step of another)."""
        return map_structure(lambda output: SymbolicDataModel(data_model=output, name=name), self.output_structure)
