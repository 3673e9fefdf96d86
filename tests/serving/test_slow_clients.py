"""Slow clients can't hold ``serve``: a request must arrive within ``--read-timeout``; connections are capped."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest
import uvicorn

from promptgym.cli.commands.serve import listening_socket, uvicorn_config
from promptgym.serving.slow_clients import read_timeout_protocol
from tests.serving.process import serve_process
from tests.serving.test_serve_process import fake_server, save_program  # noqa: F401 - a fixture, used by name


async def hello(scope, receive, send):
    if scope["type"] != "http":
        return
    while True:
        message = await receive()
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain"),
                                                                       (b"content-length", b"5")]})
    await send({"type": "http.response.body", "body": b"hello"})


@contextmanager
def server(read_timeout: float, max_connections: int = 100) -> Iterator[int]:
    sock = listening_socket("127.0.0.1", 0)
    config = uvicorn_config(hello, shutdown_timeout=1.0, read_timeout=read_timeout, max_connections=max_connections)
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not running.started:
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        running.should_exit = True
        thread.join(10)


def trickle(port: int, lines: list[bytes], every_s: float) -> tuple[bytes, int]:
    """Send ``lines`` one at a time; (what the server answered, how many lines it took before closing)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        sent = 0
        for line in lines:
            try:
                client.sendall(line)
            except OSError:  # the server closed the connection
                break
            sent += 1
            time.sleep(every_s)
        client.settimeout(5)
        try:
            answer = client.recv(65536)
        except OSError:
            answer = b""
    return answer, sent


HEADERS = [b"POST /x HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n"] + [f"X-Slow-{i}: {i}\r\n".encode() for i in range(20)]


def test_a_client_that_sends_headers_a_line_at_a_time_is_cut_off_at_the_read_timeout():
    with server(read_timeout=1.0) as port:
        answer, sent = trickle(port, HEADERS, every_s=0.25)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert sent < len(HEADERS)  # cut off while it was still sending


def test_a_body_that_trickles_in_is_cut_off_too():
    head = b"POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n"
    with server(read_timeout=1.0) as port:
        answer, sent = trickle(port, [head] + [b"x"] * 40, every_s=0.1)
    assert sent < 41 and not answer.startswith(b"HTTP/1.1 200"), answer


def test_a_prompt_client_is_served_and_keeps_its_connection_between_requests():
    request = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with server(read_timeout=1.0) as port, socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        for _ in range(3):
            client.sendall(request)
            answer = b""
            while not answer.endswith(b"hello"):
                chunk = client.recv(65536)
                assert chunk, f"closed after {answer!r}"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200")
            time.sleep(0.6)  # idle between requests is the keep-alive's business, not the read timeout's


def test_connections_past_the_cap_are_refused_with_503():
    with server(read_timeout=30.0, max_connections=2) as port:
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
        time.sleep(0.2)
        answer, _ = trickle(port, [b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"], every_s=0)
        for sock in held:
            sock.close()
    assert answer.startswith(b"HTTP/1.1 503"), answer


def test_the_protocol_refuses_a_timeout_that_is_not_positive():
    with pytest.raises(ValueError, match="read timeout"):
        read_timeout_protocol(0)


async def test_serve_cuts_off_a_slowloris_client(fake_server, tmp_path):  # noqa: F811 - the fixture
    program = await save_program(fake_server, tmp_path / "qa.json")
    with serve_process([program, "--read-timeout", "1"]) as served:
        port = int(served.url.rsplit(":", 1)[1])
        answer, sent = await asyncio.to_thread(trickle, port, HEADERS, 0.25)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert sent < len(HEADERS)


@pytest.mark.parametrize("pieces", [1, 40], ids=["in one write", "in many writes"])
def test_request_headers_past_the_limit_get_431_however_they_arrive(pieces):
    head = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 40_000 + b"\r\n\r\n"
    size = -(-len(head) // pieces)
    with server(read_timeout=10.0) as port:
        answer, _ = trickle(port, [head[i:i + size] for i in range(0, len(head), size)], every_s=0)
    assert answer.startswith(b"HTTP/1.1 431 "), answer


def test_headers_under_the_limit_split_anywhere_are_served():
    head = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Mid: " + b"m" * 8_000 + b"\r\n\r\n"
    with server(read_timeout=10.0) as port:
        answer, _ = trickle(port, [head[:-3], head[-3:-1], head[-1:]], every_s=0.05)
    assert answer.startswith(b"HTTP/1.1 200"), answer


def test_the_socket_listens_before_serve_says_it_is_serving():
    # "serving on ..." is printed before uvicorn starts; a client that connects at once must be queued, not refused
    sock = listening_socket("127.0.0.1", 0)
    try:
        socket.create_connection(sock.getsockname()[:2], timeout=2).close()
    finally:
        sock.close()
