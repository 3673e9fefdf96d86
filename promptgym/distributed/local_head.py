"""A Ray head on this machine, bound to 127.0.0.1, started and stopped by process id.

    head = LocalRayHead(num_cpus=2).start()     # `ray start --head --block` in its own session
    head.gcs_address, head.client_address, head.dashboard_url
    assert not listeners_outside_loopback(head.pids())
    head.stop()                                   # SIGKILL to the processes of that session only

Never ``ray stop``: it kills every Ray process of the user, other people's included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Mapping

from promptgym.core.local_server import free_port

READY_LINE = "This command will now block forever"


def ray_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) plus what makes Ray stay on loopback and quiet.

    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is what keeps every Ray server on 127.0.0.1 when the node
    IP is loopback (without it Ray binds the machine's other address); usage stats are never sent.
    """
    env = dict(os.environ if base is None else base)
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # The job entrypoint's `python` is the one of this environment.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def use_loopback_ray() -> None:
    """Make this process's Ray use 127.0.0.1 (before ``ray.init`` connects to a head on this machine).

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, when it is imported; if it already was, its
    constant is set too, or ``ray.init("127.0.0.1:port")`` would dial the machine's other address.
    """
    for name in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_USAGE_STATS_ENABLED"):
        os.environ[name] = ray_environment({})[name]
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


def process_table() -> dict[int, tuple[int, int]]:
    """Every live (not zombie) process: pid -> (parent pid, session id), read from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()  # state, ppid, pgrp, session, ...
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return table


def descendants(pid: int, table: dict[int, tuple[int, int]] | None = None) -> list[int]:
    """Every live process below ``pid`` (children, grandchildren, ...)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return sorted(found)


def session_tree(session_id: int) -> list[int]:
    """The processes of session ``session_id`` and everything below them.

    A ``start_new_session`` child and what it spawns share its session, except processes that open
    a session of their own (a Ray job's entrypoint does): those are found as descendants.
    """
    table = process_table()
    members = {pid for pid, (_, session) in table.items() if session == session_id}
    for pid in list(members):
        members.update(descendants(pid, table))
    return sorted(members)


def listeners_outside_loopback(pids: list[int] | set[int]) -> list[str]:
    """``ss -ltnp`` lines of sockets that ``pids`` listen on at an address other than loopback."""
    wanted = {f"pid={pid}," for pid in pids}
    output = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    outside = []
    for line in output.splitlines():
        parts = line.split()
        if len(parts) < 4 or not any(tag in line for tag in wanted):
            continue
        host = parts[3].rsplit(":", 1)[0].strip("[]")
        if host not in ("127.0.0.1", "::ffff:127.0.0.1", "::1"):
            outside.append(line)
    return outside


class RayHeadError(RuntimeError):
    """The head did not come up; the message carries the end of its log."""


class LocalRayHead:
    """``ray start --head --block`` on 127.0.0.1 in a session of its own, owned by this object.

    Ports are picked free on 127.0.0.1; ``temp_dir`` (default: a new temporary folder) holds the
    session files and logs. ``home`` (optional) is the head's HOME, where Ray 2.60 keeps its auth token.
    """

    def __init__(self, num_cpus: int = 2, dashboard: bool = True, temp_dir: str | Path | None = None,
                 home: str | Path | None = None, extra_env: Mapping[str, str] | None = None) -> None:
        self.num_cpus = num_cpus
        self.dashboard = dashboard
        self._own_temp_dir = temp_dir is None
        # Ray puts a unix socket path under temp_dir; keep it short (108-byte limit).
        self.temp_dir = Path(temp_dir or tempfile.mkdtemp(prefix="pgray-", dir="/tmp"))
        self.home = Path(home) if home else None
        self.extra_env = dict(extra_env or {})
        self.gcs_port, self.dashboard_port, self.client_port = free_port(), free_port(), free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def client_address(self) -> str:
        """The Ray Client address (``ray://``), for ``ray.init`` from another process."""
        return f"ray://127.0.0.1:{self.client_port}"

    @property
    def dashboard_url(self) -> str:
        """The dashboard and Jobs API address."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def log_path(self) -> Path:
        return self.temp_dir / "head.log"

    def command(self) -> list[str]:
        ray = Path(sys.executable).parent / "ray"
        return [
            str(ray) if ray.exists() else "ray", "start", "--head", "--block", "--disable-usage-stats",
            "--node-ip-address=127.0.0.1", f"--port={self.gcs_port}", f"--num-cpus={self.num_cpus}",
            f"--ray-client-server-port={self.client_port}", f"--temp-dir={self.temp_dir}",
            f"--include-dashboard={'true' if self.dashboard else 'false'}",
            "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
            f"--dashboard-agent-listen-port={free_port()}",
        ]

    def start(self, timeout_s: float = 180.0) -> "LocalRayHead":
        """Start the head and wait until it (and its dashboard) answers; raises :class:`RayHeadError`."""
        env = ray_environment({**os.environ, **self.extra_env})
        if self.home:
            self.home.mkdir(parents=True, exist_ok=True)
            env["HOME"] = str(self.home)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RayHeadError(f"ray start exited with {self.process.returncode}:\n{self.log_tail()}")
            if READY_LINE in self.log_path.read_text(errors="replace") and self._dashboard_answers():
                return
            time.sleep(0.25)
        raise RayHeadError(f"the Ray head did not start within {timeout_s:.0f} s:\n{self.log_tail()}")

    def _dashboard_answers(self) -> bool:
        if not self.dashboard:
            return True
        try:
            with urllib.request.urlopen(f"{self.dashboard_url}/api/version", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def pids(self) -> list[int]:
        """The live processes of this head (the session its ``ray start`` leads, and their children)."""
        return session_tree(self.process.pid) if self.process else []

    def stop(self, grace_s: float = 0.0) -> None:
        """Kill this head's processes by id (a SIGTERM first when ``grace_s`` > 0); idempotent."""
        if self.process is None:
            return
        leader = self.process.pid
        if grace_s > 0 and self.process.poll() is None:
            os.kill(leader, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and session_tree(leader):
                time.sleep(0.1)
        for _ in range(50):  # Ray's processes may spawn while we kill: repeat until the session is empty
            members = session_tree(leader)
            if not members:
                break
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        self.process.wait(timeout=10)
        self.process = None
        if self._own_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> "LocalRayHead":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
