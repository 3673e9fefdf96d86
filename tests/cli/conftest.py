"""The folder a CLI test runs in: its own runs dir, the repository importable (for config factories)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import ROOT


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTGYM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.syspath_prepend(str(ROOT))
    return tmp_path


@pytest.fixture(autouse=True)
def _no_token_rule(no_token_rule: None) -> None:
    """The CLI tests check the run engine on 3 validation examples, too few for a costlier candidate (the
    demonstrations they learn from) ever to win significantly; the rule is tested in tests/training/test_token_rule.py."""
