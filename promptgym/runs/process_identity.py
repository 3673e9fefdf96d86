"""Which process a run folder's ``pid`` means: the pid plus the process's start time and a digest of its command line.

    status["process"] = process_identity(os.getpid())     # recorded when a run's process starts
    is_same_process(status["process"])                     # False once it died, even if its pid was reused

A pid alone is not an identity: when a run's process dies without updating ``run.json`` (kill -9, OOM,
a reboot), the system hands its pid to another program sooner or later, and signalling it would stop
an unrelated process. The start time (clock ticks since boot in ``/proc/<pid>/stat``, or psutil's
``create_time`` elsewhere) changes with every new process; the command line is kept as a SHA-256 digest
only, so that nothing a user typed lands in the run folder.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any


def _from_proc(pid: int) -> tuple[str, bytes] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the name in parentheses may hold spaces
    return f"ticks:{fields[19]}", command  # field 22 of stat: start time, after pid, name and 19 more


def _from_psutil(pid: int) -> tuple[str, bytes] | None:
    try:
        import psutil  # optional (Ray brings it): only where /proc is missing, e.g. macOS
    except ImportError:
        return None
    try:
        process = psutil.Process(pid)
        return f"created:{process.create_time():.3f}", "\0".join(process.cmdline()).encode()
    except (psutil.Error, OSError):
        return None


def process_identity(pid: int) -> dict[str, Any] | None:
    """``{"pid", "started", "command_sha256"}`` of a live process, or None when it is gone or can't be read."""
    found = _from_proc(pid) if Path("/proc/self/stat").is_file() else _from_psutil(pid)
    if found is None:
        return None
    started, command = found
    return {"pid": pid, "started": started, "command_sha256": hashlib.sha256(command.rstrip(b"\0")).hexdigest()}


def is_same_process(recorded: Any) -> bool:
    """Whether the process ``recorded`` (a :func:`process_identity`) still runs: same pid, start and command."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("pid"), int):
        return False
    return process_identity(recorded["pid"]) == recorded
