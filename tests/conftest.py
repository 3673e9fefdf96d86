"""Shared fixtures: an isolated response cache, and clean process defaults."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

# Model weights are big and verified once: keep them in the real user cache,
# but give every test run its own response cache.
os.environ.setdefault("PROMPTGYM_MODELS_DIR", str(Path(platformdirs.user_cache_dir("promptgym")) / "models"))


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("PROMPTGYM_CACHE_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def clean_defaults() -> None:
    from promptgym.lm.defaults import clear_defaults
    from promptgym.lm.openai_engine import forget_structured_modes

    clear_defaults()
    forget_structured_modes()
    yield
    clear_defaults()


@pytest.fixture
def no_token_rule() -> None:
    """For tests of other behaviour on a handful of validation examples, too few for a costlier candidate
    (demonstrations) ever to win significantly (promptgym.stats.token_rule): the rule off, then back."""
    from promptgym.stats.token_rule import set_token_rule

    set_token_rule(None)
    yield
    set_token_rule()
