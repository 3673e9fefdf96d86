"""Start a task app from its Python file on a free 127.0.0.1 port, for the length of a run, and stop it.

    app = launch_task_app(Path("examples/acronyms_app.py"), env={**os.environ, "TASK_APP_API_KEY": key}, log=log)
    app.url        # http://127.0.0.1:<free port>, answering /health
    app.stop()     # SIGTERM to its process group, SIGKILL if it lingers

The file must define ``app`` (what :func:`promptgym.taskapp.create_task_app` returns). It is imported under
its own module name, never as ``__main__``, so its ``if __name__ == "__main__":`` block doesn't run; its
folder is put on ``sys.path`` so it can import its neighbours. The child binds port 0 itself and writes the
port it got to a file (no race for a "free" port), serves until SIGTERM, and exits if its parent dies.

    python -m promptgym.taskapp.launch examples/acronyms_app.py --port-file /tmp/port    # what the parent runs
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgym.lm.http_client import probe_status


class TaskAppLaunchError(RuntimeError):
    """The app file could not be started; the message has the end of its log."""


@dataclass
class LaunchedTaskApp:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM to the app's process group (it was started in a session of its own), SIGKILL after ``timeout_s``."""
        if self.process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, timeout_s)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


def _log_tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def launch_task_app(path: Path, env: dict[str, str], log: Path, timeout_s: float = 120.0) -> LaunchedTaskApp:
    """Start ``path``'s app and wait until it answers ``/health``; its output goes to ``log``."""
    if not path.is_file():
        raise TaskAppLaunchError(f"{path}: no such task app file")
    log.parent.mkdir(parents=True, exist_ok=True)
    port_file = log.with_name(log.name + ".port")
    port_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "promptgym.taskapp.launch", str(path.resolve()), "--port-file", str(port_file)]
    with log.open("ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env)
    app = LaunchedTaskApp(process, "", log)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise TaskAppLaunchError(f"task app {path} exited with code {process.returncode} before it answered "
                                         f"(log {log}):\n{_log_tail(log)}")
            if not app.url and port_file.is_file() and port_file.read_text().strip():
                app.url = f"http://127.0.0.1:{int(port_file.read_text())}"
            if app.url and _healthy(app.url):
                port_file.unlink(missing_ok=True)
                return app
            time.sleep(0.1)
        raise TaskAppLaunchError(f"task app {path} did not answer /health within {timeout_s:g} s (log {log}):\n"
                                 f"{_log_tail(log)}")
    except BaseException:
        app.stop()
        port_file.unlink(missing_ok=True)
        raise


def _healthy(url: str) -> bool:
    return probe_status(f"{url}/health", timeout=2.0) == 200


# -- the child --------------------------------------------------------------------------------


def load_app(path: Path) -> Any:
    """The ``app`` object of a Python file, imported under its own name (not ``__main__``)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"promptgym_task_app_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise TaskAppLaunchError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    app = getattr(module, "app", None)
    if app is None:
        raise TaskAppLaunchError(f"{path} defines no `app` (expected `app = create_task_app(...)`)")
    return app


def _exit_with_parent(parent: int) -> None:
    """A run killed with SIGKILL can't stop its app: the app notices it was orphaned and ends."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve a task app file on a free 127.0.0.1 port.")
    parser.add_argument("path", type=Path)
    parser.add_argument("--port-file", type=Path, required=True)
    arguments = parser.parse_args(argv)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    try:
        app = load_app(arguments.path)
    except TaskAppLaunchError as error:  # the launcher's own check: one line, not its traceback
        print(f"error: {error}", file=sys.stderr, flush=True)
        sys.exit(2)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    staging = arguments.port_file.with_name(arguments.port_file.name + ".tmp")
    staging.write_text(str(listener.getsockname()[1]))
    os.replace(staging, arguments.port_file)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


if __name__ == "__main__":
    main()
