"""DuckDB connections that load ``fts`` and ``vss`` from their pip packages, never from the network.

``duckdb-ext-fts`` and ``duckdb-ext-vss`` install the extension files under
``duckdb_ext/extensions/v<duckdb version>/<platform>/``, the layout DuckDB
expects of an ``extension_directory``. Pointing the connection there, with
auto-install and auto-load switched off, makes ``LOAD fts`` read that file
and nothing else: a missing file is an error naming the package, never a
download.

    con = connect(":memory:")
    load_extensions(con, ["fts", "vss"])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

PACKAGES = {"fts": "duckdb-ext-fts", "vss": "duckdb-ext-vss", "httpfs": "duckdb-ext-httpfs"}


def extension_directory() -> str | None:
    """Where the pip packages put the extension files (None when neither is installed)."""
    try:
        import duckdb_ext  # a namespace package laid down by duckdb-ext-fts / duckdb-ext-vss
    except ImportError:
        return None
    for root in getattr(duckdb_ext, "__path__", []):
        candidate = Path(root) / "extensions"
        if candidate.is_dir():
            return str(candidate)
    return None


def connection_config(read_only: bool = False) -> dict[str, Any]:
    config: dict[str, Any] = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    directory = extension_directory()
    if directory is not None:
        config["extension_directory"] = directory
    if read_only:
        config["access_mode"] = "READ_ONLY"
    return config


def connect(path: str, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(path, config=connection_config(read_only))


def load_extensions(con: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """``LOAD`` each extension from the pip package's file; a clear error when it is missing."""
    for name in names:
        try:
            con.execute(f"LOAD {name};")
        except duckdb.Error as error:
            raise RuntimeError(
                f"DuckDB extension {name!r} could not be loaded from {extension_directory() or 'its pip package'} "
                f"for duckdb {duckdb.__version__}: install `{PACKAGES.get(name, name)}=={duckdb.__version__}.*` "
                f"(nothing is downloaded at run time). ({error})") from None
