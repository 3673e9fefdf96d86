"""What the fault cases of last round's surfaces share in their child processes (imported by the snippets).

    report(main)                       # asyncio.run(main()); one RESULT line, with what it raised
    with serve(["p.json"]) as server:  # ``promptgym serve`` on a free port, stopped by its pid
        ...
    children_running("server.py")      # processes still running whose command line names this
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator


def emit(result: dict[str, Any]) -> None:
    print("RESULT " + json.dumps(result, default=str), flush=True)


def report(main: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """Run ``main`` and print its dict (or what it raised) on the RESULT line."""
    try:
        result = asyncio.run(main())
    except Exception as error:  # noqa: BLE001 - the judge reads the exception's type and words
        emit({"raised": type(error).__name__, "message": str(error)[:600]})
        return
    emit({"raised": None, **result})


def tool_result(value: Any) -> dict[str, Any]:
    """A tool's answer as the RESULT fields: an ``{"error"}`` answer counts as refused (``failed``)."""
    data = value.get_json() if hasattr(value, "get_json") else value
    if isinstance(data, dict) and set(data) == {"error"}:
        return {"failed": True, "error": data["error"]}
    return {"failed": False, "answer": data}


def children_running(marker: str) -> list[int]:
    """Pids of live processes (not zombies) whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in command and state != "Z":
            found.append(int(entry.name))
    return found


def thread_count(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


class Served:
    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.lines: list[str] = []
        self.url = ""
        self.port = 0

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


@contextlib.contextmanager
def serve(arguments: list[str], start_timeout: float = 60.0) -> Iterator[Served]:
    """``promptgym serve ARGS --port 0``; yields once it listens (or raises RuntimeError with its output)."""
    process = subprocess.Popen([sys.executable, "-m", "promptgym.cli.main", "serve", *arguments, "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    served = Served(process)
    threading.Thread(target=lambda: served.lines.extend(line.rstrip("\n") for line in process.stdout),
                     daemon=True).start()
    try:
        deadline = time.monotonic() + start_timeout
        while not served.url:
            match = next((re.search(r"serving on (http://\S+)", line) for line in list(served.lines)
                          if "serving on" in line), None)
            if match:
                served.url, served.port = match.group(1), int(match.group(1).rsplit(":", 1)[1])
            elif process.poll() is not None:
                time.sleep(0.2)  # the reader thread catches up with the last lines
                raise RuntimeError(f"serve exited with {process.returncode}:\n{served.output}")
            elif time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start in {start_timeout:.0f} s:\n{served.output}")
            time.sleep(0.05)
        wait_until_listening(served.port)
        yield served
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)


def wait_until_listening(port: int, seconds: float = 10.0) -> None:
    """Before this branch serve printed "serving on" before its socket listened: wait, so a case measures
    what it means to (the refusal itself is fixed and tested in tests/serving/test_slow_clients.py)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def trickle(port: int, pieces: list[bytes], every_s: float, read_s: float = 5.0) -> dict[str, Any]:
    """Send ``pieces`` one at a time on one connection; how many went before the server closed it, and its answer."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        sent = 0
        for piece in pieces:
            try:
                client.sendall(piece)
            except OSError:
                break
            sent += 1
            time.sleep(every_s)
        client.settimeout(read_s)
        try:
            answer = client.recv(65536)
        except OSError:
            answer = b""
    return {"sent": sent, "of": len(pieces), "answer": answer[:80].decode(errors="replace"),
            "held_s": round(time.monotonic() - started, 1)}
