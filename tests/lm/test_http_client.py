"""promptgym's keep-alive HTTP/1.1 client: framing, reuse, a connection the server closed, timeouts."""

from __future__ import annotations

import asyncio

import pytest

from promptgym.lm.http_client import ConnectionPool, HttpError


async def serve(answers: list[bytes], close_after_each: bool = False):
    """A server answering each request with the next raw answer; returns (server, port, connections seen)."""
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while answers:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            answer = answers.pop(0)
            if answer == b"hang":
                await asyncio.sleep(10)
            writer.write(answer)
            await writer.drain()
            if close_after_each:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], connections


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=1\r\n\": 1\r\n1\r\n}\r\n0\r\n\r\n"
UNFRAMED = b"HTTP/1.0 500 Oops\r\nRetry-After: 2\r\n\r\nbroken"


async def test_answers_are_read_by_length_by_chunks_and_to_the_end_and_connections_reused():
    server, port, connections = await serve([b"HTTP/1.1 100 Continue\r\n\r\n" + OK, CHUNKED, UNFRAMED])
    pool = ConnectionPool("127.0.0.1", port, timeout=5)
    first = await pool.request("POST", "/v1/x", b"{}", {"Content-Type": "application/json"})
    second = await pool.request("POST", "/v1/x", b"{}")
    third = await pool.request("POST", "/v1/x", b"{}")
    await pool.close()
    server.close()

    assert (first.status, first.body, first.headers["content-type"]) == (200, b"{}", "application/json")
    assert (second.status, second.body) == (200, b'{"a": 1}')
    assert (third.status, third.body, third.headers["retry-after"]) == (500, b"broken", "2")
    assert len(connections) == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced():
    server, port, connections = await serve([OK, OK], close_after_each=True)
    pool = ConnectionPool("127.0.0.1", port, timeout=5)
    assert (await pool.request("GET", "/")).status == 200
    await asyncio.sleep(0.05)
    assert (await pool.request("GET", "/")).status == 200
    await pool.close()
    server.close()
    assert len(connections) == 2


async def test_a_server_that_does_not_answer_times_out_and_one_that_is_down_fails_clearly():
    server, port, _ = await serve([b"hang"])
    with pytest.raises(asyncio.TimeoutError):
        await ConnectionPool("127.0.0.1", port, timeout=0.2).request("GET", "/")
    server.close()
    await server.wait_closed()
    with pytest.raises(HttpError, match="cannot connect"):
        await ConnectionPool("127.0.0.1", port, timeout=1).request("GET", "/")
