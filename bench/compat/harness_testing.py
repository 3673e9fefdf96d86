"""``synalinks.src.testing`` for the harness: the TestCase base class synalinks' tests derive from.

synalinks' own TestCase is an ``IsolatedAsyncioTestCase`` that clears the
session and the default models before each test and hands out temporary
directories; this one does the same with promptgym's public calls (and
points promptgym's response cache at a fresh directory, so a test's mocked
answers are never served from an earlier test). ``test_utils`` is synalinks'
own file (shared test data), executed through the shim.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import types
import unittest
from pathlib import Path


class TestCase(unittest.IsolatedAsyncioTestCase):
    maxDiff = None

    def setUp(self) -> None:
        import promptgym
        from promptgym.lm.defaults import clear_defaults

        clear_session = getattr(promptgym, "clear_session", None)
        if clear_session is not None:
            clear_session()
        clear_defaults()
        cache_dir = tempfile.mkdtemp(prefix="compat-cache-")
        previous = os.environ.get("PROMPTGYM_CACHE_DIR")
        os.environ["PROMPTGYM_CACHE_DIR"] = cache_dir

        def restore() -> None:
            if previous is None:
                os.environ.pop("PROMPTGYM_CACHE_DIR", None)
            else:
                os.environ["PROMPTGYM_CACHE_DIR"] = previous
            shutil.rmtree(cache_dir, ignore_errors=True)

        self.addCleanup(restore)

    def get_temp_dir(self) -> str:
        temp_dir = tempfile.mkdtemp()
        self.addCleanup(lambda: shutil.rmtree(temp_dir, ignore_errors=True))
        return temp_dir


def harness_modules(checkout: Path) -> dict[str, types.ModuleType]:
    """The modules the shim serves for ``synalinks.src.testing`` and ``synalinks.src.testing.test_utils``."""
    testing = types.ModuleType("synalinks.src.testing")
    testing.__path__ = []  # type: ignore[attr-defined]
    testing.TestCase = TestCase  # type: ignore[attr-defined]
    test_utils = _LazyTestUtils("synalinks.src.testing.test_utils", checkout / "synalinks/src/testing/test_utils.py")
    testing.test_utils = test_utils  # type: ignore[attr-defined]
    return {"synalinks.src.testing": testing, "synalinks.src.testing.test_utils": test_utils}


class _LazyTestUtils(types.ModuleType):
    """synalinks' test data module, run (through the shim) on first use."""

    def __init__(self, name: str, source: Path) -> None:
        super().__init__(name)
        self._source = source
        self._loaded = False

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or self.__dict__.get("_loaded"):
            raise AttributeError(name)
        self.__dict__["_loaded"] = True
        code = compile(self._source.read_text(), str(self._source), "exec")
        exec(code, self.__dict__)
        return getattr(self, name)
