"""``promptgym serve``: trained programs behind an OpenAI-compatible HTTP server, or MCP.

    promptgym serve qa.json                          # http://127.0.0.1:8000, POST /v1/programs/qa/predict
    promptgym serve qa.json triage=other.json --port 9000 --api-key-env SERVE_KEY
    promptgym serve --run RUN_ID                     # a run's best program
    promptgym serve qa.json --mcp stdio              # an MCP server on stdin/stdout (tools = programs)
    promptgym serve qa.json --mcp http               # MCP over streamable HTTP, under /mcp
"""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from promptgym.cli.common import console, fail, secret_masker
from promptgym.runs.folder import RunFolder, default_runs_dir
from promptgym.lm.language_model import LanguageModel

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
READ_TIMEOUT_S = 10.0
"""Seconds a client has to send each whole request (then 408): a slowloris client holds nothing for long."""
MAX_CONNECTIONS = 512
"""Open connections past which uvicorn answers 503 at once."""
LISTEN_BACKLOG = 2048  # uvicorn's default backlog


def serve_command(
    programs: list[str] = typer.Argument(None, metavar="[NAME=]PROGRAM.json...",
                                         help="Saved programs to serve (NAME= renames one)."),
    run_ids: list[str] = typer.Option(None, "--run", metavar="RUN_ID", help="Serve a run's best program (repeatable)."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Where run folders are (default ./runs)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (default: this machine only)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port (0: any free port, printed at start)."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="NAME",
                                              help="Require the key held by this environment variable (401 without)."),
    env_file: Optional[str] = typer.Option(None, "--env-file", help=".env file with secrets (never printed)."),
    models: list[str] = typer.Option(None, "--model", metavar="local/NAME",
                                     help="Also chat with this embedded or fine-tuned model directly (repeatable)."),
    concurrency: int = typer.Option(32, "--concurrency", min=1, help="Requests that run at once."),
    queue: int = typer.Option(256, "--queue", min=0, help="Requests that may wait for a slot; more get 429."),
    max_body_bytes: int = typer.Option(1_000_000, "--max-body-bytes", min=1, help="Larger bodies get 413."),
    shutdown_timeout: float = typer.Option(30.0, "--shutdown-timeout", min=0,
                                           help="On SIGTERM, seconds to let requests in flight finish."),
    read_timeout: float = typer.Option(READ_TIMEOUT_S, "--read-timeout", min=0.001,
                                       help="Seconds a client has to send a whole request (headers and body); "
                                            "slower ones get 408 and are disconnected."),
    max_connections: int = typer.Option(MAX_CONNECTIONS, "--max-connections", min=1,
                                        help="Open connections at once; more get 503."),
    log_inputs: bool = typer.Option(False, "--log-inputs", help="Put each request's body in its log line."),
    record: Optional[Path] = typer.Option(None, "--record", metavar="DIR",
                                          help="Store every served call as a trace in DIR/traces.db (personal data: "
                                               "see --redact) and take POST /v1/feedback."),
    redact: list[str] = typer.Option(None, "--redact", metavar="FIELD",
                                     help="Never store this dotted trace field (inputs.email, outputs.answer, "
                                          "modules.inputs.email; repeatable)."),
    record_max_age_days: Optional[float] = typer.Option(None, "--record-max-age-days", min=0.0001,
                                                        help="Delete traces older than this."),
    record_max_traces: Optional[int] = typer.Option(None, "--record-max-traces", min=1,
                                                    help="Keep at most this many traces (the oldest go first)."),
    mcp: Optional[str] = typer.Option(None, "--mcp", metavar="stdio|http",
                                      help="Serve the programs as MCP tools instead, over stdio or streamable HTTP."),
) -> None:
    """Serve trained programs: predict routes, OpenAI chat completions, /healthz, /metrics (or MCP tools)."""
    # Deferred: fastapi, uvicorn and prometheus_client load only for this command, not for every CLI call.
    from promptgym.serving import ServeSettings, create_app, load_programs
    from promptgym.serving.auth import MissingKeyEnvironment, api_key_from_env
    from promptgym.serving.recording import redact_fields

    if mcp not in (None, "stdio", "http"):
        fail(f"--mcp: expected 'stdio' or 'http', got {mcp!r}")
    if mcp == "stdio":
        console.file = sys.stderr  # stdout carries the MCP protocol: every message of ours goes to stderr
    masker = secret_masker(env_file)
    paths, names = program_sources(programs or [], run_ids or [], runs_dir or default_runs_dir(), models=models or [])
    try:
        api_key = api_key_from_env(api_key_env)
        served = load_programs(paths, names)
        direct = [direct_model(name) for name in models or []]
    except (MissingKeyEnvironment, FileNotFoundError, ValueError) as error:
        fail(masker.mask(str(error)))
    if api_key:
        masker.add(api_key)
    configure_logging(masker)
    settings = ServeSettings(api_key=api_key, concurrency=concurrency, queue=queue, max_body_bytes=max_body_bytes,
                             log_inputs=log_inputs, record=str(record) if record else None,
                             redact=redact_fields(redact) if redact else None,
                             record_max_age_days=record_max_age_days, record_max_traces=record_max_traces)
    if redact and not record:
        fail("--redact applies to recorded traces: give --record DIR too")
    try:
        app = create_app(served, models=direct, settings=settings)
    except ValueError as error:  # a --record folder that can't be written
        fail(str(error))
    if mcp == "stdio":
        run_mcp_stdio(app.state)
        return
    if host not in LOCAL_HOSTS:
        console.print(f"warning: listening on {host}: other machines can reach this server"
                      + ("" if api_key else " and no --api-key-env is set"), style="yellow", soft_wrap=True)
    if mcp == "http":  # deferred: mcp loads only for MCP over HTTP
        from promptgym.serving.mcp_server import mcp_server
        from promptgym.serving.middleware import ServingMiddleware

        app = ServingMiddleware(mcp_server(app.state).streamable_http_app(streamable_http_path="/mcp", host=host),
                                app.state)
    run_uvicorn(uvicorn_config(app, shutdown_timeout, read_timeout, max_connections), host, port,
                described=describe(served, app.state, mcp))


def program_sources(programs: list[str], run_ids: list[str], runs_dir: Path,
                    models: list[str] = ()) -> tuple[list[str], list[str | None]]:
    """(files, names): ``NAME=FILE`` arguments split, each ``--run`` resolved to its best program."""
    paths: list[str] = []
    names: list[str | None] = []
    for argument in programs:
        name, sep, path = argument.partition("=")
        if sep and name and not Path(argument).exists():
            paths.append(path)
            names.append(name)
        else:
            paths.append(argument)
            names.append(None)
    for run_id in run_ids:
        try:
            run = RunFolder.open(runs_dir, run_id)
        except FileNotFoundError as error:
            fail(str(error))
        best = run.path / "best_program.json"
        if not best.is_file():
            fail(f"run {run.id} has no best_program.json yet (status: {run.status().get('status', 'unknown')}); "
                 "serve it when it has finished")
        paths.append(str(best))
        names.append(None)
    if not paths and not models:
        fail("nothing to serve: give PROGRAM.json files, --run RUN_ID or --model local/NAME")
    return paths, names


def direct_model(name: str) -> LanguageModel:
    if not name.startswith("local/"):
        raise ValueError(f"--model {name!r}: only embedded or fine-tuned models (local/NAME) are served directly")
    return LanguageModel(model=name)


def configure_logging(masker: Any) -> None:
    """One line per request on stderr (stdout stays free for the MCP stdio protocol)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(MaskingFormatter(masker, "%(asctime)s %(levelname)s %(message)s"))
    log = logging.getLogger("promptgym.serve")
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False


class MaskingFormatter(logging.Formatter):
    """Log lines with every known secret masked (a key pasted into a body, an error quoting it)."""

    def __init__(self, masker: Any, fmt: str) -> None:
        super().__init__(fmt)
        self.masker = masker

    def format(self, record: logging.LogRecord) -> str:
        return self.masker.mask(super().format(record))


def describe(served: dict[str, Any], state: Any, mcp: Optional[str]) -> list[str]:
    if mcp == "http":
        return [f"MCP tools: {', '.join(sorted(served))} (streamable HTTP under /mcp)"]
    lines = [f"  POST /v1/programs/{name}/predict" for name in sorted(served)]
    if state.recorder is not None:
        lines.append(f"  POST /v1/feedback  (traces recorded in {state.recorder.store.path})")
    lines.append(f"  POST /v1/chat/completions  (model: {', '.join([*sorted(served), *state.model_names()])})")
    lines.append("  GET /healthz, /metrics, /docs")
    return lines


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one), for uvicorn to serve on."""
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without it
    # every response waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening now, before "serving on ..." is printed: a client that connects at once waits in the backlog
    # until uvicorn accepts, instead of being refused (uvicorn's own listen() comes later, in its startup).
    sock.listen(LISTEN_BACKLOG)
    return sock


KEEP_ALIVE_S = 5.0
"""An idle connection between two requests is closed after this long (uvicorn's default)."""
MAX_HEADER_BYTES = 16 * 1024
"""Request heads (request line and headers) larger than this get 431 (``serving/slow_clients.py``)."""


def uvicorn_config(app: Any, shutdown_timeout: float, read_timeout: float, max_connections: int) -> Any:
    """uvicorn's settings for ``serve``: the limits a slow or greedy client meets (docs/serving.md)."""
    import uvicorn  # deferred with the rest of the server

    from promptgym.serving.slow_clients import read_timeout_protocol

    # limit_concurrency counts open connections (and running tasks): past it uvicorn answers 503 at once.
    return uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=shutdown_timeout,
                          server_header=False, lifespan="auto",
                          http=read_timeout_protocol(read_timeout, max_header_bytes=MAX_HEADER_BYTES),
                          limit_concurrency=max_connections, timeout_keep_alive=KEEP_ALIVE_S,
                          h11_max_incomplete_event_size=MAX_HEADER_BYTES)


def run_uvicorn(config: Any, host: str, port: int, described: list[str]) -> None:
    """Serve until SIGTERM or Ctrl-C; requests in flight then finish (up to the config's graceful timeout)."""
    import uvicorn  # deferred with the rest of the server

    try:
        sock = listening_socket(host, port)
    except OSError as error:
        fail(f"can't listen on {host}:{port}: {error.strerror or error}" +
             (" (another server uses that port; pick another with --port)" if error.errno == 98 else ""))
    bound = sock.getsockname()[1]
    server = uvicorn.Server(config)
    console.print(f"serving on http://{host}:{bound}", soft_wrap=True)
    for line in described:
        console.print(line, soft_wrap=True, markup=False)
    sys.stdout.flush()
    server.run(sockets=[sock])
    console.print("server stopped")


def run_mcp_stdio(state: Any) -> None:
    import anyio

    from promptgym.serving.mcp_server import mcp_server, run_stdio  # deferred: mcp loads only for MCP over stdio

    try:
        anyio.run(run_stdio, mcp_server(state))
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
