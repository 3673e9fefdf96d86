"""promptgym's one HTTP client: framing, reuse, a connection the server closed, timeouts, streams, TLS."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess

import pytest

from promptgym.lm.http_client import ConnectionPool, HttpClient, HttpError


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


SSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
       b"9\r\ndata: a\n\n\r\n" b"f\r\ndata: b\n\ndata: \r\n" b"4\r\nc\n\n\n\r\n" b"0\r\n\r\n")


async def test_a_streamed_body_comes_line_by_line_and_a_finished_one_gives_its_connection_back():
    server, port, connections = await serve([SSE, OK])
    client = HttpClient(timeout=5)
    async with client.stream("POST", f"http://127.0.0.1:{port}/v1/x", json={"stream": True}) as streamed:
        lines = [line async for line in streamed.lines()]
    after = await client.request("GET", f"http://127.0.0.1:{port}/")
    await client.close()
    server.close()
    assert streamed.status == 200 and streamed.headers["content-type"] == "text/event-stream"
    assert lines == [b"data: a\n", b"\n", b"data: b\n", b"\n", b"data: c\n", b"\n", b"\n"]
    assert after.json() == {} and after.url == f"http://127.0.0.1:{port}/"
    assert len(connections) == 1


async def test_a_stream_left_before_its_end_drops_the_connection():
    server, port, connections = await serve([SSE, OK])
    client = HttpClient(timeout=5)
    async with client.stream("POST", f"http://127.0.0.1:{port}/v1/x", b"{}") as streamed:
        async for line in streamed.lines():
            assert line == b"data: a\n"
            break
    assert (await client.request("GET", f"http://127.0.0.1:{port}/")).status == 200
    await client.close()
    server.close()
    assert len(connections) == 2


async def test_urls_it_cannot_serve_are_refused_by_name():
    client = HttpClient()
    with pytest.raises(HttpError, match="expected an http:// or https:// URL"):
        client.pool_of("ftp://example.org/x")
    with pytest.raises(HttpError, match="credentials in the URL"):
        client.pool_of("http://user:secret@example.org/x")
    pool, path = client.pool_of("https://example.org/v1/models?limit=2")
    assert (pool.port, path, pool._host_header) == (443, "/v1/models?limit=2", "example.org")


@pytest.fixture
def tls_context(tmp_path):
    """(server, client) TLS contexts on a self-signed certificate for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


async def test_https_checks_the_certificate_and_reuses_the_connection(tls_context):
    server_context, client_context = tls_context
    answers, connections = [OK, OK], []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while answers:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answers.pop(0))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    trusting = HttpClient(timeout=5, ssl_context=client_context)
    replies = [await trusting.request("GET", f"https://127.0.0.1:{port}/v1/models") for _ in range(2)]
    with pytest.raises(HttpError, match="CERTIFICATE_VERIFY_FAILED"):
        await HttpClient(timeout=5).request("GET", f"https://127.0.0.1:{port}/")  # the system's CAs don't know it
    await trusting.close()
    server.close()
    assert [reply.status for reply in replies] == [200, 200]
    assert len(connections) == 1  # reused; the untrusting client never got past the handshake
