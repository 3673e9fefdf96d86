"""A functional program's graph as JSON (``get_config``) and back, without executing code.

Each call is stored as ``{"module": {class_name, config}, "inputs": ..., "outputs": ...}``
where inputs and outputs are structures of symbolic ids (strings); a module
called twice is stored twice and rebuilt once (matched by name). Loading
replays the calls on fresh symbolic inputs, so the graph is rebuilt by the
same code that built it. Files from before multi-branch programs
(``"parents"`` / ``"output"``) still load.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.schema import deserialize_data_model, serialize_data_model
from promptgym.core.serialization import deserialize_object, serialize_object
from promptgym.core.tree import flatten, map_structure
from promptgym.modules.input_module import InputModule
from promptgym.modules.module import Module, run_sync
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.programs.graph import FunctionalGraph

_ID = "__symbolic__"


def graph_config(graph: FunctionalGraph) -> dict[str, Any]:
    """The JSON config of a functional graph (symbolic ids numbered in order, so equal graphs save equal)."""
    numbering: dict[str, str] = {}
    for symbolic in [*graph.inputs, *(out for node in graph.nodes for out in flatten(node.outputs))]:
        if isinstance(symbolic, SymbolicDataModel):
            numbering.setdefault(symbolic.id, f"s{len(numbering)}")

    def ids(structure: Any) -> Any:
        return map_structure(lambda leaf: {_ID: numbering[leaf.id]} if isinstance(leaf, SymbolicDataModel) else leaf,
                             structure)

    return {
        "inputs": [{"id": numbering[symbolic.id], "name": _given_name(symbolic),
                    "data_model": serialize_data_model(symbolic.data_model)} for symbolic in graph.inputs],
        "input_structure": ids(graph.input_structure),
        "nodes": [{"module": serialize_object(node.module), "inputs": ids(node.inputs), "outputs": ids(node.outputs)}
                  for node in graph.nodes],
        "output_structure": ids(graph.output_structure),
    }


def _given_name(symbolic: SymbolicDataModel) -> str | None:
    """An input's name if the user gave it (an automatic one depends on what else the process built)."""
    module = symbolic.producer
    return None if module is None or getattr(module, "_auto_named", False) else module.name


def _resolve(structure: Any, symbols: dict[str, SymbolicDataModel]) -> Any:
    def resolve(node: Any) -> Any:
        if isinstance(node, dict) and set(node) == {_ID}:
            return symbols[node[_ID]]
        if isinstance(node, dict):
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(value) for value in node]
        return node

    return resolve(structure)


def graph_from_config(config: dict[str, Any]) -> tuple[Any, Any]:
    """``(inputs, outputs)`` structures of symbolic data models rebuilt from :func:`graph_config`'s JSON."""
    symbols: dict[str, SymbolicDataModel] = {}
    for item in config["inputs"]:
        symbols[item["id"]] = InputModule(data_model=deserialize_data_model(item["data_model"]),
                                          name=item.get("name")).output
    modules: dict[str, Module] = {}
    for node in config["nodes"]:
        if "parents" in node:  # a file from before multi-branch programs
            node = {"module": node["module"], "outputs": {_ID: node["output"]},
                    "inputs": ({_ID: node["parents"][0]} if len(node["parents"]) == 1
                               else [{_ID: parent} for parent in node["parents"]])}
        module_name = node["module"]["config"].get("name")
        module = modules.get(module_name) or deserialize_object(node["module"], expected="module")
        modules[module.name] = module
        outputs = run_sync(module._symbolic_call(_resolve(node["inputs"], symbols), training=False))
        saved = _resolve_ids(node["outputs"])
        for symbolic_id, output in zip(saved, flatten(outputs)):
            symbols[symbolic_id] = output
    if "input_structure" in config:
        inputs = _resolve(config["input_structure"], symbols)
        outputs = _resolve(config["output_structure"], symbols)
    else:  # legacy: a list of output ids and a flag
        inputs = [symbols[item["id"]] for item in config["inputs"]]
        inputs = inputs[0] if len(inputs) == 1 else inputs
        outputs = [symbols[output] for output in config["outputs"]]
        outputs = outputs[0] if config.get("single_output", True) else outputs
    return inputs, outputs


def _resolve_ids(structure: Any) -> list[str]:
    found: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict) and set(node) == {_ID}:
            found.append(node[_ID])
        elif isinstance(node, dict):
            for key in sorted(node):
                visit(node[key])
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(structure)
    return found
