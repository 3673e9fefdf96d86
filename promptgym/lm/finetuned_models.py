"""The registry of fine-tuned models: a name usable as ``local/<name>`` wherever a model string is.

    entry = register_finetuned_model(FineTunedModel(name="ft-dates-1a2b", base="local/smollm2-135m-instruct",
                                                    merged="/runs/x/export/model-q8_0.gguf", ...))
    LanguageModel(model="local/ft-dates-1a2b")

Each entry is one JSON file, ``<models dir>/finetuned/<name>.json``, naming the base model and the
GGUF files a run exported (they stay in the run folder). Reading an entry only parses JSON.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_json, read_json
from promptgym.lm.cache import models_dir
from promptgym.lm.errors import EngineMissingError, UnknownModelError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class FineTunedModel:
    """One fine-tuned model: its base and the files llama.cpp runs.

    ``merged`` is a complete GGUF; ``adapter`` is a LoRA GGUF applied on ``base_gguf``. Either is
    enough; the merged file is preferred when both exist.
    """

    name: str
    base: str
    method: str = "sft"
    merged: str | None = None
    adapter: str | None = None
    base_gguf: str | None = None
    run: str | None = None
    created: float = field(default_factory=time.time)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def model_string(self) -> str:
        return f"local/{self.name}"

    def files(self) -> dict[str, str]:
        return {kind: path for kind, path in (("merged", self.merged), ("adapter", self.adapter)) if path}

    def size_bytes(self) -> int:
        return sum(Path(path).stat().st_size for path in self.files().values() if Path(path).is_file())

    def runnable_files(self) -> tuple[Path, Path | None]:
        """(model file, LoRA file or None) for llama.cpp; a clear error when the files are gone."""
        if self.merged and Path(self.merged).is_file():
            return Path(self.merged), None
        if self.adapter and Path(self.adapter).is_file() and self.base_gguf and Path(self.base_gguf).is_file():
            return Path(self.base_gguf), Path(self.adapter)
        missing = [path for path in (self.merged, self.adapter, self.base_gguf) if path and not Path(path).is_file()]
        raise EngineMissingError(f"local/{self.name}: its files are missing ({', '.join(missing) or 'none exported'}); "
                                 f"the run that made it was {self.run or 'unknown'}")


def registry_dir() -> Path:
    return models_dir() / "finetuned"


def check_model_name(name: str) -> str:
    # circle: lm.local_models looks fine-tuned names up here (at its top), and this refuses the embedded names
    from promptgym.lm.local_models import LOCAL_MODELS

    if not NAME_PATTERN.match(name):
        raise ValueError(f"model name {name!r}: use letters, digits, '.', '_' and '-' (starting with a letter or digit)")
    if name in LOCAL_MODELS:
        raise ValueError(f"model name {name!r} is an embedded model's name; choose another")
    return name


def name_taken_problem(name: str, run: str | None) -> str | None:
    """Why run ``run`` (its folder, resolved; None for a new run) can't register ``name``, or None when it can."""
    path = registry_dir() / f"{name}.json"
    if not path.is_file():
        return None
    try:
        existing: FineTunedModel | None = _from_json(read_json(path), path)
    except (ValueError, TypeError, OSError):
        existing = None
    if existing is not None and run is not None and existing.run == run:
        return None  # a rerun of the same run replaces its own entry
    return (f"a fine-tuned model named {name!r} already exists (from run {existing.run if existing else 'unknown'}); "
            f"choose another model_name, or remove it with `promptgym models remove {name}`")


def register_finetuned_model(entry: FineTunedModel, replace_run: str | None = None) -> FineTunedModel:
    """Record ``entry``; a name already taken by another run is an error (a rerun of the same run replaces it)."""
    check_model_name(entry.name)
    problem = name_taken_problem(entry.name, replace_run or entry.run)
    if problem:
        raise ValueError(problem)
    atomic_write_json(registry_dir() / f"{entry.name}.json", asdict(entry))
    return entry


FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "a string"), "base": ((str,), "a string"), "method": ((str,), "a string"),
    "merged": ((str, type(None)), "a path or null"), "adapter": ((str, type(None)), "a path or null"),
    "base_gguf": ((str, type(None)), "a path or null"), "run": ((str, type(None)), "a string or null"),
    "created": ((int, float), "a number (seconds since 1970)"), "details": ((dict,), "an object"),
}


@dataclass(frozen=True)
class UnreadableEntry:
    """A registry file that is not a usable entry (not JSON, a wrong field, a name that differs from the file's)."""

    path: Path
    problem: str

    @property
    def name(self) -> str:
        return self.path.stem


def _from_json(data: dict[str, Any], source: Path) -> FineTunedModel:
    """The entry in ``data``, or a ValueError naming ``source`` and every bad field."""
    if not isinstance(data, dict) or "name" not in data or "base" not in data:
        raise ValueError(f"{source}: not a fine-tuned model entry (needs name and base)")
    problems = [f"{key}: expected {wanted}, got {type(data[key]).__name__} {data[key]!r:.40}"
                for key, (types, wanted) in FIELD_TYPES.items()
                if key in data and (not isinstance(data[key], types) or (key == "created" and isinstance(data[key], bool)))]
    if isinstance(data["name"], str) and data["name"] != source.stem:
        problems.append(f"name: {data['name']!r} differs from the file's name {source.stem!r} (it is listed and "
                        "removed under the file's name)")
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    return FineTunedModel(**{key: value for key, value in data.items() if key in FIELD_TYPES})


def finetuned_model(name: str) -> FineTunedModel | None:
    if not NAME_PATTERN.match(name):
        return None
    path = registry_dir() / f"{name}.json"
    return _from_json(read_json(path), path) if path.is_file() else None


def scan_finetuned_models() -> tuple[list[FineTunedModel], list[UnreadableEntry]]:
    """Every registered fine-tuned model, newest first, and every registry file that is not a usable entry."""
    folder = registry_dir()
    found, unreadable = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            found.append(_from_json(read_json(path), path))
        except (ValueError, TypeError, OSError) as error:
            unreadable.append(UnreadableEntry(path, str(error).removeprefix(f"{path}: ")))
    return sorted(found, key=lambda entry: entry.created, reverse=True), unreadable


def list_finetuned_models() -> list[FineTunedModel]:
    """Every usable registered fine-tuned model, newest first (:func:`scan_finetuned_models` names the others)."""
    return scan_finetuned_models()[0]


def remove_finetuned_model(name: str) -> FineTunedModel | UnreadableEntry:
    """Forget ``name`` (its files stay in the run folder); an unreadable entry is removed too, and returned as such."""
    path = registry_dir() / f"{name}.json"
    if not NAME_PATTERN.match(name) or not path.is_file():
        raise UnknownModelError(f"no fine-tuned model named {name!r}")
    try:
        entry: FineTunedModel | UnreadableEntry = _from_json(read_json(path), path)
    except (ValueError, TypeError, OSError) as error:
        entry = UnreadableEntry(path, str(error).removeprefix(f"{path}: "))
    path.unlink()
    return entry
