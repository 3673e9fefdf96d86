"""The package's import structure (docs/architecture.md): layers import downwards only, no cycle at import time,
and every ``from promptgym.X import Y`` names a module and a name that exist. Read from the source (``ast``):
nothing is imported, so optional extras need not be installed."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "promptgym"
ORDER = ["core", "tree", "tracing", "stats", "utils", "traces", "datasets", "initializers", "lm", "runs", "language_models", "embedding_models", "testing",
         "modules", "knowledge_bases", "ops", "session", "backend", "config", "rewards", "metrics", "rollouts", "finetune", "optimizers",
         "training", "callbacks", "programs", "saving", "distributed", "taskapp", "serving", "ui", "export", "cli"]
"""Packages and top-level modules, lowest first; ``promptgym/__init__.py`` (the public API) sits above them all."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def layer_of(name: str) -> str:
    return name.split(".")[1] if name.count(".") >= 1 else ""


def imported_modules(node: ast.AST) -> list[str]:
    """The promptgym modules an import statement loads (``from a import b`` loads ``a.b`` when it is a module)."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("promptgym"):
        return [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                for alias in node.names]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.startswith("promptgym")]
    return []


def imported_layers(path: Path) -> list[tuple[int, str]]:
    """(line, layer) of every promptgym import in the file, function-level ones included."""
    return [(node.lineno, layer_of(name)) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            for name in imported_modules(node) if layer_of(name)]


def import_time_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run when the module is imported (``if TYPE_CHECKING`` blocks and functions do not)."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += import_time_statements(node.orelse)
        elif isinstance(node, (ast.If, ast.Try)):
            found += import_time_statements(node.body) + import_time_statements(node.orelse)
            for handler in getattr(node, "handlers", []):
                found += import_time_statements(handler.body)
            found += import_time_statements(getattr(node, "finalbody", []))
        else:
            found.append(node)
    return found


def import_time_graph() -> dict[str, set[str]]:
    """Module -> the promptgym modules its import loads (parent packages of the importer excluded: they are
    already being imported when it runs)."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for node in import_time_statements(ast.parse(path.read_text(encoding="utf-8")).body):
            for target in imported_modules(node):
                parts = target.split(".")
                for size in range(1, len(parts) + 1):
                    loaded = ".".join(parts[:size])
                    if loaded in MODULES and loaded != name and not name.startswith(loaded + "."):
                        graph[name].add(loaded)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def top_level_names(path: Path) -> set[str] | None:
    """Names a module binds when imported; None when it defines ``__getattr__`` (any name may exist)."""
    names: set[str] = set()
    for node in import_time_statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names


def test_every_package_and_top_level_module_has_a_layer() -> None:
    children = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    children |= {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert sorted(children - set(ORDER)) == []


def test_no_layer_imports_a_layer_above_it() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = layer_of(module_name(path))
        if layer not in ORDER:
            continue
        for line, target in imported_layers(path):
            if target in ORDER and ORDER.index(target) > ORDER.index(layer):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports promptgym.{target}")
    assert upward == []


def test_nothing_imports_itself_in_a_circle_at_import_time() -> None:
    assert cycles(import_time_graph()) == []


def test_every_promptgym_import_names_a_module_and_a_name_that_exist() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("promptgym")):
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            if node.module not in MODULES:
                missing.append(f"{where}: no module {node.module}")
                continue
            names = top_level_names(MODULES[node.module])
            for alias in node.names:
                if alias.name != "*" and names is not None and alias.name not in names \
                        and f"{node.module}.{alias.name}" not in MODULES:
                    missing.append(f"{where}: {node.module} has no {alias.name}")
    assert missing == []


def test_the_checks_see_an_upward_import_a_cycle_and_a_missing_name(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from promptgym.training.fit import fit_program\n")
    assert imported_layers(module) == [(2, "training")]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    module.write_text("import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    X = 1\nclass Y: ...\nZ: int = 2\n")
    assert top_level_names(module) == {"os", "TYPE_CHECKING", "Y", "Z"}


def module_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """What :func:`import_time_statements` finds, plus the ``if TYPE_CHECKING:`` blocks (a type-only import is
    still a dependency: a loop through one means two modules that each need the other)."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += module_level_statements(node.body) + module_level_statements(node.orelse)
        elif isinstance(node, (ast.If, ast.Try)):
            found += import_time_statements([node])
        else:
            found.append(node)
    return found


def dependency_graph() -> dict[str, set[str]]:
    """Module -> the promptgym modules it imports at module level, type-only imports included."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for node in module_level_statements(ast.parse(path.read_text(encoding="utf-8")).body):
            for target in imported_modules(node):
                if target in MODULES and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def test_no_import_cycle_even_through_type_only_imports() -> None:
    assert cycles(dependency_graph()) == []


def test_the_type_only_check_sees_a_loop_through_type_checking(tmp_path: Path) -> None:
    body = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from promptgym.a import B\n").body
    assert [imported_modules(node) for node in module_level_statements(body)][-1] == ["promptgym.a"]
    assert import_time_statements(body)[-1:] != module_level_statements(body)[-1:]
