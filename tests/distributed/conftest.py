"""One Ray head for the distributed tests: on 127.0.0.1, a temporary HOME, stopped by process id."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("ray")

from promptgym.distributed.local_head import LocalRayHead, process_table  # noqa: E402


@pytest.fixture(scope="package")  # not "session": the head's processes would keep running through every later folder
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRayHead]:
    home = tmp_path_factory.mktemp("ray-home")
    head = LocalRayHead(num_cpus=2, dashboard=True, home=home, extra_env={"HOME": str(home)}).start()
    yield head
    pids = head.pids()
    head.stop()
    alive = set(pids) & set(process_table())
    assert not alive, f"head processes left running: {alive}"


@pytest.fixture
def job_home(ray_head: LocalRayHead, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A working folder and the head's HOME for the client side (Ray's auth token lives under HOME)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(ray_head.home))
    monkeypatch.setenv("PROMPTGYM_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path
