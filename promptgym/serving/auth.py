"""The optional API key: ``Authorization: Bearer KEY`` (what OpenAI clients send) or ``X-API-Key: KEY``.

The key is read from an environment variable named on the command line; it is compared in
constant time and never logged or echoed.
"""

from __future__ import annotations

import hmac
import os


class MissingKeyEnvironment(ValueError):
    """``--api-key-env NAME`` names a variable that is unset or empty."""


def api_key_from_env(name: str | None) -> str | None:
    """The key held by ``$name`` (None when no name is given); an error when the variable is empty."""
    if not name:
        return None
    value = os.environ.get(name, "")
    if not value.strip():
        raise MissingKeyEnvironment(f"--api-key-env {name}: the environment variable {name} is not set (or empty); "
                                    f"export {name}=<key> before starting the server")
    return value.strip()


def presented_key(headers: dict[str, str]) -> str | None:
    """The key a request carries, from ``authorization: Bearer ...`` or ``x-api-key``."""
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key") or None


def key_matches(expected: str, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(expected.encode(), presented.encode())
