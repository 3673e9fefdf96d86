"""Start and stop ``llama_cpp.server`` on 127.0.0.1 for the training benchmarks.

    with LlamaServer(model="model.gguf", python=".venv/bin/python") as server:
        server.base_url  # http://127.0.0.1:<port>/v1

or ``python bench/llama_server.py --model model.gguf --port 8080`` (runs until Ctrl-C).
``extra_models={"alias": path}`` serves more models from the same server (through
``--config_file``): a request names one by its alias, anything else gets the first model,
and the server swaps the loaded model when a request asks for another one.
The server needs ``llama-cpp-python[server]`` in the given interpreter's environment
(built with portable CMAKE_ARGS, see MODELS.md). It rejects ``response_format`` of type
``json_schema`` (HTTP 422); put ``counting_proxy.py --json-object-schema`` in front.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """One ``python -m llama_cpp.server`` child process, started and stopped by us."""

    def __init__(
        self,
        model: str | Path,
        python: str | Path = sys.executable,
        port: int | None = None,
        n_threads: int = 2,
        n_ctx: int = 4096,
        extra_args: tuple[str, ...] = (),
        log_path: str | Path | None = None,
        alias: str | None = None,
        extra_models: dict[str, str | Path] | None = None,
    ) -> None:
        self.model = Path(model)
        self.models = [self.model, *(Path(p) for p in (extra_models or {}).values())]
        self.python = str(python)
        self.port = port or free_port()
        self.config_path: Path | None = None
        if extra_models:
            served = [{"model": str(self.model), "model_alias": alias or self.model.stem}]
            served += [{"model": str(path), "model_alias": name} for name, path in extra_models.items()]
            config = {"host": "127.0.0.1", "port": self.port,
                      "models": [{**m, "n_threads": n_threads, "n_ctx": n_ctx} for m in served]}
            self.config_path = Path(f"/tmp/promptgym-bench-llama-{self.port}.json")
            self.config_path.write_text(json.dumps(config))
            self.command = [self.python, "-m", "llama_cpp.server", "--config_file", str(self.config_path), *extra_args]
        else:
            self.command = [
                self.python, "-m", "llama_cpp.server", "--model", str(self.model), "--host", "127.0.0.1",
                "--port", str(self.port), "--n_threads", str(n_threads), "--n_ctx", str(n_ctx), *extra_args,
            ]
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root to give a client as ``api_base``."""
        return f"{self.url}/v1"

    def start(self, timeout: float = 180.0) -> Self:
        """Launch the server and block until ``GET /v1/models`` answers 200."""
        for path in self.models:
            if not path.is_file():
                raise FileNotFoundError(f"model file not found: {path}")
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}: {' '.join(self.command)}"
                                   + (f" (log: {self.log_path})" if self.log_path else ""))
            if self.healthy():
                return self
            time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"llama_cpp.server not healthy after {timeout:.0f}s on {self.url}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate our child (its own process group), then kill it if it lingers; remove its config file."""
        if self.config_path is not None:
            self.config_path.unlink(missing_ok=True)
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="path to a .gguf file")
    parser.add_argument("--python", default=sys.executable, help="interpreter with llama-cpp-python[server]")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args()
    server = LlamaServer(args.model, args.python, args.port, args.n_threads, args.n_ctx).start()
    print(f"llama_cpp.server ready at {server.base_url} (pid {server.process.pid if server.process else '?'})", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
