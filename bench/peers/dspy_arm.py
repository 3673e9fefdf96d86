"""Run a DSPy arm: llama_cpp.server on the same gguf, the counting proxy in front, a script in DSPy's venv.

    from peers.dspy_arm import run_dspy_script
    row = run_dspy_script(HERE / "run_dspy_rag.py", ["--inputs", "in.json"], timeout=5400, log_name="rag")

The script gets ``--proxy-url URL`` first and prints JSON lines; the last one is returned, with ``wire``: the
proxy's counts of what crossed it (requests, tokens, statuses), so the arm's model calls are counted at the
wire and not by DSPy's own history. Any failure comes back as ``{"error": ...}``; both servers are stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from counting_proxy import start_counting_proxy  # noqa: E402
from llama_server import LlamaServer  # noqa: E402

MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
DSPY_PYTHON = Path(os.environ.get("PROMPTGYM_BENCH_HOME", Path.home() / ".cache" / "promptgym-bench")) / "venvs" / \
    "dspy" / "bin" / "python"


def wire_counts(proxy_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{proxy_url}/stats", timeout=10) as reply:  # the proxy on loopback
        return json.loads(reply.read())


def run_dspy_script(script: Path, script_args: list[str], *, timeout: int, log_name: str,
                    server_args: list[str] | None = None, stderr_path: str | None = None) -> dict[str, Any]:
    """The last JSON row the script printed (plus ``wire``), or ``{"error": ...}``."""
    from promptgym.lm.local_models import ensure_local_model  # deferred: it finds (or assembles) the gguf

    if not DSPY_PYTHON.exists():
        return {"error": f"no DSPy venv at {DSPY_PYTHON}: run bench/peers/setup.sh"}
    server = LlamaServer(ensure_local_model(MODEL_NAME), n_threads=2, alias=MODEL_NAME,
                         log_path=f"/tmp/promptgym-bench-llama-{log_name}.log", extra_args=server_args or [])
    proxy = None
    try:
        server.start()
        proxy = start_counting_proxy(server.url, rewrite_json_schema=True)
        done = subprocess.run([str(DSPY_PYTHON), str(script), "--proxy-url", proxy.url, *script_args],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "local"})
        if stderr_path:
            Path(stderr_path).write_text(done.stderr)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not rows:
            return {"error": f"exit {done.returncode}: " + " | ".join(done.stderr.strip().splitlines()[-6:])}
        return {**rows[-1], "wire": wire_counts(proxy.url)}
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
