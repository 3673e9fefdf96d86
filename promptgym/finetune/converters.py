"""llama.cpp's GGUF converters, taken from the llama-cpp-python source package at install time.

    python -m promptgym.finetune.converters        # once, at install time (``make install`` does it)
    script = converter_script("convert_hf_to_gguf.py")

The converters (``convert_hf_to_gguf.py``, ``convert_lora_to_gguf.py`` with their ``conversion/``
package and ``gguf-py``) ship inside llama-cpp-python's sdist (``vendor/llama.cpp``), not in its
wheel. We take them from the sdist of the *installed* llama-cpp-python version, so the GGUF files
they write are the ones the embedded engine reads. The install step gets that sdist from the package
registry with pip; exporting a model never downloads anything.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CONVERTERS_DIR_ENV = "PROMPTGYM_CONVERTERS_DIR"
WANTED = ("convert_hf_to_gguf.py", "convert_lora_to_gguf.py", "conversion/", "gguf-py/", "LICENSE")
VERSION_FILE = "LLAMA_CPP_PYTHON_VERSION"


class ConvertersMissingError(RuntimeError):
    """The GGUF converters are not installed; the message says how to install them."""


def converters_dir() -> Path:
    """``$PROMPTGYM_CONVERTERS_DIR`` or ``<python prefix>/share/promptgym/llama.cpp``."""
    return Path(os.environ.get(CONVERTERS_DIR_ENV) or Path(sys.prefix) / "share" / "promptgym" / "llama.cpp")


def engine_version() -> str:
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        raise ConvertersMissingError("llama-cpp-python is not installed: run `make install`") from None


def installed_version(folder: Path | None = None) -> str | None:
    marker = (folder or converters_dir()) / VERSION_FILE
    return marker.read_text().strip() if marker.is_file() else None


def converter_script(name: str) -> Path:
    """Path of an installed converter script, or a clear error saying how to install it."""
    folder = converters_dir()
    script = folder / name
    if not script.is_file():
        raise ConvertersMissingError(
            f"llama.cpp's {name} is not installed in {folder}: run `make install`, or "
            f"`{Path(sys.executable).name} -m promptgym.finetune.converters` once (it takes the converters from "
            "the llama-cpp-python source package)")
    return script


def extract_converters(sdist: Path, target: Path, version: str) -> Path:
    """Copy the converter files out of a llama-cpp-python sdist into ``target`` (replacing what was there)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".llama.cpp.", dir=target.parent))
    try:
        with tarfile.open(sdist) as archive:
            members = []
            for member in archive.getmembers():
                parts = member.name.split("/", 3)
                if len(parts) < 4 or parts[1:3] != ["vendor", "llama.cpp"]:
                    continue
                relative = parts[3]
                if any(relative == wanted or (wanted.endswith("/") and relative.startswith(wanted)) for wanted in WANTED):
                    member.name = relative
                    members.append(member)
            if not any(member.name == "convert_hf_to_gguf.py" for member in members):
                raise ConvertersMissingError(f"{sdist}: no vendor/llama.cpp/convert_hf_to_gguf.py inside")
            archive.extractall(staging, members=members, filter="data")
        (staging / VERSION_FILE).write_text(version + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def install_converters(sdist: Path | None = None, force: bool = False) -> Path:
    """Install the converters matching the installed llama-cpp-python (pip fetches its sdist when none is given)."""
    version = engine_version()
    target = converters_dir()
    if not force and installed_version(target) == version and (target / "convert_hf_to_gguf.py").is_file():
        return target
    if sdist is not None:
        return extract_converters(sdist, target, version)
    with tempfile.TemporaryDirectory(prefix="promptgym-sdist-") as scratch:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", "llama-cpp-python",
                   f"llama-cpp-python=={version}", "-d", scratch]
        subprocess.run(command, check=True)
        found = sorted(Path(scratch).glob("llama_cpp_python-*.tar.gz"))
        if not found:
            raise ConvertersMissingError(f"pip fetched no llama-cpp-python {version} source package")
        return extract_converters(found[0], target, version)


def main() -> None:
    force = "--force" in sys.argv[1:]
    given = [Path(arg) for arg in sys.argv[1:] if not arg.startswith("--")]
    target = install_converters(given[0] if given else None, force=force)
    print(f"llama.cpp GGUF converters ({installed_version(target)}) in {target}")


if __name__ == "__main__":
    main()
