"""Runs some of synalinks' test files under the shim (one process per file; the runner starts it).

    python test_worker.py CHECKOUT RESULTS.jsonl FILE TEST_ID [TEST_ID ...]

Each test's outcome is appended to RESULTS.jsonl as soon as it is known, so a
file that hangs (killed by the runner's timeout) still reports the tests
before it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


class Recorder:
    def __init__(self, results: Path, selected: set[str], module_name: str) -> None:
        self.results = results
        self.selected = selected
        self.module_name = module_name
        self.outcomes: dict[str, tuple[str, str]] = {}

    def pytest_collection_modifyitems(self, session, config, items):  # noqa: ANN001
        keep = [item for item in items if self._test_id(item.nodeid) in self.selected]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep

    def _test_id(self, nodeid: str) -> str:
        return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid

    def pytest_runtest_logreport(self, report):  # noqa: ANN001
        test_id = self._test_id(report.nodeid)
        outcome, detail = self.outcomes.get(test_id, ("passed", ""))
        if report.failed:
            outcome, detail = "failed", _short(report)
        elif report.skipped and outcome == "passed":
            outcome, detail = "skipped", _short(report)
        self.outcomes[test_id] = (outcome, detail)
        if report.when == "teardown":
            with self.results.open("a") as handle:
                handle.write(json.dumps({"test": test_id, "outcome": outcome, "detail": detail}) + "\n")


def _short(report) -> str:  # noqa: ANN001
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    lines = [line for line in text.splitlines() if line.startswith("E ")]
    return "\n".join(lines[:6])[:1500] if lines else text[-1500:]


def main() -> None:
    checkout, results, test_file, *test_ids = sys.argv[1:]
    checkout_path = Path(checkout)
    import litellm_bridge
    import public_api
    import shim
    from harness_testing import harness_modules

    litellm_bridge.install()
    shim.install(public_api.PublicApi(checkout_path), harness_modules(checkout_path))
    workdir = Path(tempfile.mkdtemp(prefix="compat-tests-"))
    try:
        module_name = "synalinks_" + test_file.replace("/", "_").removesuffix(".py")
        copy = workdir / f"{module_name}.py"
        shutil.copyfile(checkout_path / test_file, copy)
        (workdir / "pytest.ini").write_text("[pytest]\n")
        import pytest

        recorder = Recorder(Path(results), set(test_ids), module_name)
        pytest.main([str(copy), "-q", "-p", "no:cacheprovider", "-p", "no:asyncio", "-c", str(workdir / "pytest.ini"),
                     "--rootdir", str(workdir), "-o", "console_output_style=classic", "--tb=short",
                     "-W", "ignore"], plugins=[recorder])
        with Path(results).open("a") as handle:
            handle.write(json.dumps({"missing": sorted(shim.MISSING_NAMES)}) + "\n")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
