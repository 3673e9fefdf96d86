"""Secrets from ``.env`` files and the environment, masked in every output.

    masker = load_env_file(".env")          # sets os.environ, remembers the secret values
    masker.mask("key is sk-live-123456")    # -> "key is sk****"

A value is a secret when its variable's name looks like one (``*KEY*``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*PASS*``) or a config names the
variable as holding a key (``api_key_env``, ``task_api_key_env``). Other
variables of an env file (``DEBUG=true``, ``REGION=test``) are set but not
masked, and a value that is a short or common word, or a number, is never
masked: replacing ``test`` or ``true`` everywhere would corrupt configs and
events, not protect anything.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from promptgym.distributed.jobs import SECRET_NAMES_ENV

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASS)", re.IGNORECASE)
MIN_SECRET_LENGTH = 6
COMMON_WORDS = frozenset("""true false none null yes no on off test train training validation debug info warning
error local default enabled disabled development production staging dummy changeme example placeholder""".split())


def worth_masking(value: str | None) -> bool:
    """Long enough, not a number, not a common word: masking it hides something and breaks nothing.

    >>> [worth_masking(v) for v in ("sk-live-123456", "true", "test", "123456", "abc")]
    [True, False, False, False, False]
    """
    if not value or len(value) < MIN_SECRET_LENGTH:
        return False
    plain = value.strip().lower()
    return plain not in COMMON_WORDS and not re.fullmatch(r"[-+]?[0-9_.]+", plain)


class Masker:
    """Replaces every known secret value by a short masked form."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()

    def add(self, value: str | None) -> None:
        if worth_masking(value):
            self.secrets.add(value)  # type: ignore[arg-type]

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
    """Read ``KEY=value`` lines into ``os.environ`` (the file wins) and register the secret values.

    Secrets are the values of secret-looking names, here and in the environment (configs add the
    variables they name with :meth:`Masker.add_from_environment`).
    """
    masker = masker or Masker()
    named = set(filter(None, os.environ.get(SECRET_NAMES_ENV, "").split(",")))
    for name, value in os.environ.items():
        if SECRET_NAME.search(name) or name in named:
            masker.add(value)
    if path is None:
        return masker
    for name, value in env_file_values(path).items():
        os.environ[name] = value
        if SECRET_NAME.search(name):
            masker.add(value)
    return masker


def env_file_values(path: str | Path) -> dict[str, str]:
    """The ``KEY=value`` pairs of an env file (without touching ``os.environ``).

    A line that is not ``KEY=value`` (``JUSTAWORD``, ``=value``) is a ValueError naming the file and line,
    never the line's text (it may hold a secret).
    """
    import io

    from dotenv.parser import parse_stream

    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such env file")
    try:
        text = source.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{source}: not UTF-8 text (byte {error.start}); save it as UTF-8") from None
    values, problems = {}, []
    for binding in parse_stream(io.StringIO(text)):
        line = binding.original.line
        if binding.error:
            problems.append(f"{source}:{line}: not a KEY=value line (a name is needed before '=')")
        elif binding.key is not None and binding.value is None:
            problems.append(f"{source}:{line}: {binding.key} has no value (expected {binding.key}=value)")
        elif binding.key is not None:
            values[binding.key] = binding.value
    if problems:
        raise ValueError("; ".join(problems))
    return values
