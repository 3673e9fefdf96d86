"""synalinks' public API, read from its checkout without importing it.

synalinks generates ``synalinks/api/**/__init__.py`` from its export
decorators; every line ``from synalinks.src.M import N as A`` in
``synalinks/api/P/__init__.py`` makes the object ``N`` of internal module
``M`` public as ``synalinks.P.A``. This module turns those files into a
table both ways (public name <-> internal definition).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Export:
    public: str      # "synalinks.modules.Concat"
    module: str      # "synalinks.src.modules.merging.concat"
    name: str        # "Concat"


class PublicApi:
    """Every export of a synalinks checkout, indexed by public path and by internal name."""

    def __init__(self, checkout: Path) -> None:
        self.checkout = checkout
        self.exports: list[Export] = []
        self.submodules: set[str] = {"synalinks"}
        api_root = checkout / "synalinks" / "api"
        for init in sorted(api_root.rglob("__init__.py")):
            package = ".".join(("synalinks", *init.parent.relative_to(api_root).parts))
            self.submodules.add(package)
            for node in ast.parse(init.read_text()).body:
                if not isinstance(node, ast.ImportFrom) or not node.module:
                    continue
                for alias in node.names:
                    if node.module.startswith("synalinks.src"):
                        self.exports.append(Export(f"{package}.{alias.asname or alias.name}", node.module, alias.name))
        # synalinks/__init__.py adds a few names of its own (Field, under `if backend == "pydantic"`).
        for node in ast.walk(ast.parse((checkout / "synalinks" / "__init__.py").read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("synalinks.src"):
                for alias in node.names:
                    self.exports.append(Export(f"synalinks.{alias.asname or alias.name}", node.module, alias.name))
        self.by_public = {export.public: export for export in self.exports}
        self._by_name: dict[str, list[Export]] = {}
        for export in self.exports:
            self._by_name.setdefault(export.name, []).append(export)

    def is_source_module(self, dotted: str) -> bool:
        """Whether ``synalinks.src.x.y`` is a module of the checkout."""
        path = self.checkout.joinpath(*dotted.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    def public_path(self, module: str, name: str) -> str | None:
        paths = self.public_paths(module, name)
        return paths[0] if paths else None

    def public_paths(self, module: str, name: str) -> list[str]:
        """The public paths of ``from module import name`` (module is internal), shortest first; [] if private.

        A name counts as public when an export has the same object name and its
        module is ``module`` itself or inside it (a package re-export), or
        ``module`` is inside the export's module.
        """
        if module == "synalinks" or module in self.submodules:
            candidate = f"{module}.{name}"
            return [candidate] if candidate in self.by_public or candidate in self.submodules else []
        if module.startswith("synalinks.src"):
            package = "synalinks" + module[len("synalinks.src"):]
            if f"{package}.{name}" in self.submodules and module.count(".") == 1:
                return [f"{package}.{name}"]  # `from synalinks.src import ops` is `synalinks.ops`
        candidates = [
            export for export in self._by_name.get(name, [])
            if export.module == module or export.module.startswith(module + ".") or module.startswith(export.module + ".")
        ]
        # The shortest public path first (`synalinks.Generator` before `synalinks.modules.Generator`).
        return sorted({export.public for export in candidates}, key=lambda path: (path.count("."), path))
