"""Secrets from ``.env`` files and the environment, masked in every output.

    masker = load_env_file(".env")          # sets os.environ, remembers the values
    masker.mask("key is sk-123")            # -> "key is sk-1****"
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from promptgym.distributed.jobs import SECRET_NAMES_ENV

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASS)", re.IGNORECASE)
MIN_SECRET_LENGTH = 4


class Masker:
    """Replaces every known secret value by a short masked form."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()

    def add(self, value: str | None) -> None:
        if value and len(value) >= MIN_SECRET_LENGTH:
            self.secrets.add(value)

    def add_from_environment(self, names: list[str | None]) -> None:
        for name in names:
            if name:
                self.add(os.environ.get(name))

    @staticmethod
    def hide(value: str) -> str:
        return (value[:2] if len(value) > 8 else "") + "****"

    def mask(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, self.hide(secret))
        return text

    def mask_data(self, value: Any) -> Any:
        """``value`` (nested dicts/lists/str) with every secret masked."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {key: self.mask_data(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.mask_data(item) for item in value]
        return value


def load_env_file(path: str | Path | None, masker: Masker | None = None) -> Masker:
    """Read ``KEY=value`` lines into ``os.environ`` (the file wins) and register secret-looking values."""
    masker = masker or Masker()
    named = set(filter(None, os.environ.get(SECRET_NAMES_ENV, "").split(",")))
    for name, value in os.environ.items():
        if SECRET_NAME.search(name) or name in named:
            masker.add(value)
    if path is None:
        return masker
    for name, value in env_file_values(path).items():
        os.environ[name] = value
        masker.add(value)  # everything in an env file is treated as secret
    return masker


def env_file_values(path: str | Path) -> dict[str, str]:
    """The ``KEY=value`` pairs of an env file (without touching ``os.environ``)."""
    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such env file")
    from dotenv import dotenv_values

    return {name: value for name, value in dotenv_values(source).items() if value is not None}
