"""A real ``promptgym serve`` process on 127.0.0.1 for the tests that need uvicorn and signals.

    with serve_process([program_file], port_out) as server:
        httpx.post(f"{server.url}/v1/programs/qa/predict", json=...)
    # stopped by its pid with SIGTERM; server.output holds what it printed
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[2]


@dataclass
class ServeProcess:
    process: subprocess.Popen
    url: str = ""
    lines: list[str] = field(default_factory=list)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; returns the exit status."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        return self.process.wait(timeout=timeout)


def _read(stream, lines: list[str]) -> None:
    for line in stream:
        lines.append(line.rstrip("\n"))


@contextlib.contextmanager
def serve_process(arguments: list[str], env: dict[str, str] | None = None) -> Iterator[ServeProcess]:
    command = [sys.executable, "-m", "promptgym.cli.main", "serve", *arguments, "--port", "0"]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", **(env or {})}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                               env=environment)
    server = ServeProcess(process)
    threading.Thread(target=_read, args=(process.stdout, server.lines), daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while not server.url:
            found = [re.search(r"serving on (http://\S+)", line) for line in list(server.lines)]
            server.url = next((match.group(1) for match in found if match), "")
            if process.poll() is not None and not server.url:
                raise RuntimeError(f"promptgym serve exited with {process.returncode}:\n{server.output}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"promptgym serve did not start in 60 s:\n{server.output}")
            time.sleep(0.05)
        yield server
    finally:
        if process.poll() is None:
            server.stop()
