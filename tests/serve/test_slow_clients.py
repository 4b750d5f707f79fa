"""Slow and stalled clients against a real `tether serve` process with short limits: headers
and bodies that trickle get 408, one address gets a bounded number of connections, a reader that
stops reading is cut — and a normal client is answered throughout."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from .conftest import Server, start_server, write_project

LIMITS = [
    "--header-timeout", "1",
    "--body-timeout", "1",
    "--send-timeout", "1",
    "--max-client-connections", "8",
]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_project(tmp_path_factory.mktemp("slow") / "project")
    server = start_server(
        root,
        {"TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}", "TETHER_TEST_DELAY": "0"},
        LIMITS,
    )
    yield server
    server.stop()


def connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    port = int(server.base.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    return sock


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        chunks.append(b"<reset>")
    return b"".join(chunks)


def normal_request_works(server: Server) -> None:
    with server.client() as client:
        assert client.get("/api/runs").status_code == 200


def test_headers_that_trickle_get_408_and_the_server_stays_reachable(server: Server) -> None:
    # Half-open requests from many addresses (loopback has 2^24): none holds the server.
    slow = [connect(server, f"127.0.{i // 200}.{i % 200 + 2}") for i in range(120)]
    for sock in slow:
        sock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    normal_request_works(server)
    began = time.monotonic()
    for _ in range(4):
        for sock in slow[:3]:
            try:
                sock.sendall(b"a")  # a byte now and then: the deadline stands
            except OSError:
                pass
        time.sleep(0.3)
    answers = [read_all(sock) for sock in slow]
    took = time.monotonic() - began
    assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[:3]
    assert took < 5
    for sock in slow:
        sock.close()
    normal_request_works(server)


def test_a_body_that_trickles_gets_408(server: Server) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /api/agents/chat/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"input": '
        )
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"request_timeout" in answer


def test_one_address_gets_a_bounded_number_of_connections(server: Server) -> None:
    held = [connect(server, "127.0.5.1") for _ in range(8)]
    try:
        with connect(server, "127.0.5.1") as extra:
            assert read_all(extra).startswith(b"HTTP/1.1 503")
        # Another address is not affected.
        with connect(server, "127.0.5.2") as other:
            other.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert read_all(other).startswith(b"HTTP/1.1 200")
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    with connect(server, "127.0.5.1") as again:
        again.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert read_all(again).startswith(b"HTTP/1.1 200")


def test_a_reader_that_stops_reading_is_cut(server: Server) -> None:
    with server.client() as client:
        started = client.post("/api/agents/chat/runs", json={"input": "chunks 3000 1000"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        # The whole answer is stored before its stream is read (the start is answered before
        # the run's first step; its model, at no delay, never waits): the stream has 12 MB to
        # send at once, to a client that reads none of it.
        deadline = time.monotonic() + 60
        while client.get(f"/api/runs/{run_id}").json()["run"]["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    port = int(server.base.rsplit(":", 1)[1])
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET /api/runs/{run_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    time.sleep(4)  # reads nothing: the server's buffer fills, then the send timeout passes
    normal_request_works(server)
    received = read_all(sock)
    sock.close()
    # Cut mid-stream: never the end of the run.
    assert b"run_ended" not in received
    assert received.endswith(b"<reset>") or len(received) < 3_000_000
    assert "read nothing for 1 s" in server.log.read_text(errors="replace")
    with (
        httpx.Client(base_url=server.base, timeout=60) as client,
        client.stream("GET", f"/api/runs/{run_id}/stream") as response,
    ):
        assert sum(len(c) for c in response.iter_bytes()) > 3_000_000  # a reader is served
