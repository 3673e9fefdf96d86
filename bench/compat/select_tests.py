"""Which of synalinks' unit tests use only its public API.

A test method qualifies when every synalinks name it reaches (directly, or
through ``setUp``, ``self.helper()`` methods and module-level helpers) is a
public export (:mod:`public_api`), it names no ``synalinks.src`` path in
a string (``mock.patch("synalinks.src....")`` patches an internal), and it
reads no underscore attribute of an object (``checkpoint._get_file_path``:
an implementation detail, even on a public class).
``synalinks.src.testing`` (the ``TestCase`` base class and the shared test
data) is test infrastructure, not API: the harness provides it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from public_api import PublicApi

HARNESS_MODULES = ("synalinks.src.testing",)
SETUP_METHODS = {"setUp", "asyncSetUp", "setUpClass", "tearDown", "asyncTearDown", "tearDownClass"}


@dataclass
class Binding:
    kind: str                 # "public", "private", "harness"
    target: str               # public path, or the internal path it names


@dataclass
class TestSelection:
    file: Path                # relative to the checkout
    area: str                 # "modules/merging", "rewards", ...
    test_class: str
    method: str
    private: list[str] = field(default_factory=list)   # internal names it reaches (empty: qualifies)
    public: list[str] = field(default_factory=list)    # public names it reaches

    @property
    def node_id(self) -> str:
        return f"{self.test_class}::{self.method}"

    @property
    def public_only(self) -> bool:
        return not self.private


def _bindings_of_import(node: ast.stmt, api: PublicApi) -> dict[str, Binding]:
    bindings: dict[str, Binding] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == "synalinks" or alias.name.startswith("synalinks."):
                local = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else alias.name.split(".")[0]
                bindings[local] = _classify_module(target, api)
    elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "synalinks":
        for alias in node.names:
            local = alias.asname or alias.name
            full = f"{node.module}.{alias.name}"
            if full.startswith(HARNESS_MODULES) or node.module.startswith(HARNESS_MODULES):
                bindings[local] = Binding("harness", full)
                continue
            public = api.public_path(node.module, alias.name)
            bindings[local] = Binding("public", public) if public else Binding("private", full)
    return bindings


def _classify_module(path: str, api: PublicApi) -> Binding:
    if path.startswith(HARNESS_MODULES):
        return Binding("harness", path)
    if path in api.submodules:
        return Binding("public", path)
    return Binding("private", path)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


class _Uses(ast.NodeVisitor):
    """Names, dotted paths, ``self.x`` attributes and synalinks-internal strings used in a node."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.dotted: set[str] = set()
        self.self_attrs: set[str] = set()
        self.private_strings: set[str] = set()
        self.private_attributes: set[str] = set()
        self.local_imports: list[ast.stmt] = []

    def visit_Name(self, node: ast.Name) -> None:
        self.names.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = node.value.id if isinstance(node.value, ast.Name) else None
        if node.attr.startswith("_") and not node.attr.startswith("__") and base not in ("self", "cls"):
            self.private_attributes.add(node.attr)
        path = _dotted(node)
        if path:
            self.dotted.add(path)
            if path.startswith("self.") or path.startswith("cls."):
                self.self_attrs.add(path.split(".")[1])
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "synalinks.src" in node.value and not node.value.startswith(HARNESS_MODULES):
            self.private_strings.add(node.value.split()[0][:80])

    def visit_Import(self, node: ast.Import) -> None:
        self.local_imports.append(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.local_imports.append(node)


def _uses(node: ast.AST) -> _Uses:
    visitor = _Uses()
    visitor.visit(node)
    return visitor


def _module_level_definitions(tree: ast.Module) -> dict[str, ast.AST]:
    definitions: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    definitions[target.id] = node
    return definitions


def _is_test_case(node: ast.ClassDef) -> bool:
    return any((_dotted(base) or "").endswith("TestCase") for base in node.bases)


def _private_uses(path: str, bindings: dict[str, Binding], api: PublicApi) -> str | None:
    head, _, rest = path.partition(".")
    binding = bindings.get(head)
    if binding is None:
        return None
    if binding.kind == "private":
        return binding.target
    if binding.kind == "harness" or not rest or binding.target not in api.submodules:
        return None
    # `synalinks.modules.Concat` / `synalinks.ops.json.concat`: the longest module prefix, then one exported name
    parts = rest.split(".")
    module = binding.target
    for part in parts:
        if f"{module}.{part}" in api.submodules:
            module = f"{module}.{part}"
            continue
        return None if f"{module}.{part}" in api.by_public else f"{module}.{part}"
    return None


def select_tests(checkout: Path, api: PublicApi | None = None) -> list[TestSelection]:
    """Every test method of every ``*_test.py`` under ``synalinks/src``, with the private names it reaches."""
    api = api or PublicApi(checkout)
    selections: list[TestSelection] = []
    source_root = checkout / "synalinks" / "src"
    for test_file in sorted(source_root.rglob("*_test.py")):
        tree = ast.parse(test_file.read_text())
        relative = test_file.relative_to(checkout)
        area = "/".join(test_file.parent.relative_to(source_root).parts) or "."
        bindings: dict[str, Binding] = {}
        for node in tree.body:
            bindings.update(_bindings_of_import(node, api))
        definitions = _module_level_definitions(tree)
        for class_node in (n for n in tree.body if isinstance(n, ast.ClassDef) and _is_test_case(n)):
            methods = {n.name: n for n in class_node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            class_level = [n for n in class_node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for name, method in methods.items():
                if not name.startswith("test"):
                    continue
                roots: list[ast.AST] = [method, *class_level, *(methods[m] for m in SETUP_METHODS if m in methods)]
                private, public = _reach(roots, bindings, definitions, methods, api)
                selections.append(TestSelection(relative, area, class_node.name, name, sorted(private), sorted(public)))
    return selections


def _reach(roots: list[ast.AST], bindings: dict[str, Binding], definitions: dict[str, ast.AST],
           methods: dict[str, ast.AST], api: PublicApi) -> tuple[set[str], set[str]]:
    private: set[str] = set()
    public: set[str] = set()
    seen: set[int] = set()
    queue = list(roots)
    local_bindings = dict(bindings)
    while queue:
        node = queue.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        uses = _uses(node)
        for statement in uses.local_imports:
            local_bindings.update(_bindings_of_import(statement, api))
        private |= uses.private_strings
        private |= {f"private attribute .{name}" for name in uses.private_attributes}
        for name in uses.names:
            binding = local_bindings.get(name)
            if binding is not None and binding.kind == "private":
                private.add(binding.target)
            elif binding is not None and binding.kind == "public":
                public.add(binding.target)
            if name in definitions:
                queue.append(definitions[name])
        for path in uses.dotted:
            found = _private_uses(path, local_bindings, api)
            if found:
                private.add(found)
            else:
                public.update(_public_uses(path, local_bindings, api))
        for attr in uses.self_attrs:
            if attr in methods:
                queue.append(methods[attr])
    return private, public


def _public_uses(path: str, bindings: dict[str, Binding], api: PublicApi) -> set[str]:
    """``synalinks.rewards.ExactMatch`` (an attribute chain through a public module) as a public name."""
    head, _, rest = path.partition(".")
    binding = bindings.get(head)
    if binding is None or binding.kind != "public" or binding.target not in api.submodules or not rest:
        return set()
    module = binding.target
    for part in rest.split("."):
        if f"{module}.{part}" in api.submodules:
            module = f"{module}.{part}"
            continue
        return {f"{module}.{part}"} if f"{module}.{part}" in api.by_public else set()
    return set()
