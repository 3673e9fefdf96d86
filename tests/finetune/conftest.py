"""The weight-training tests: skipped without torch and peft; fixtures in tests/finetune/fixtures.py."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.register_assert_rewrite("tests.finetune.interrupting")  # its checks report like the tests' own

from tests.finetune.fixtures import fake_export, isolated_models_dir, one_torch_thread, tiny_model  # noqa: E402, F401
