"""Slow clients against one `tether serve` worker while a normal client's stream flows.

    .venv/bin/python bench/serve_slow_clients.py [--slow 1000] [--seconds 20] [--runs 10]

A real `tether serve` process (one worker, SQLite, default limits) is attacked by `--slow`
clients at once, each from its own loopback address (127.0.x.y, so the per-address connection
limit does not simply refuse them): half trickle a request's headers one byte a second
(slowloris; cut at the header timeout, they connect again), half open a stream of a long run and
never read it (cut at the send timeout, they open another). Meanwhile a normal client starts
`--runs` runs one after another and reads each stream; for every text event it notes the delay
between the event's `at` (when the episode got the chunk) and its arrival. Reported: p50 / p99 /
max of that delay with the slow clients and, first, without them, and how often the slow
clients were cut. Nothing is asserted; the numbers go in docs/serve.md and the closing note.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.serve.conftest import Server, start_server, write_project


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def normal_client(server: Server, runs: int) -> list[float]:
    lags: list[float] = []
    async with httpx.AsyncClient(base_url=server.base, timeout=120) as client:
        for _ in range(runs):
            started = await client.post("/api/agents/chat/runs", json={"input": "words 200"})
            started.raise_for_status()
            run_id = started.json()["run_id"]
            opened = time.time()
            async with client.stream("GET", f"/api/runs/{run_id}/stream") as response:
                kind = ""
                async for line in response.aiter_lines():
                    if line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:") and kind == "agent_text_delta":
                        at = json.loads(line[5:])["at"]
                        if at >= opened:
                            lags.append(time.time() - at)
    return lags


class Counts:
    cut = 0
    connected = 0


async def slowloris(host: str, port: int, source: str, stop: asyncio.Event, counts: Counts) -> None:
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
        except OSError:
            await asyncio.sleep(0.5)
            continue
        counts.connected += 1
        try:
            writer.write(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            while not stop.is_set() and not reader.at_eof():
                writer.write(b"a")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        if await reader.read(1024) == b"":
                            break
                        counts.cut += 1
                        break
        except OSError:
            counts.cut += 1
        finally:
            writer.close()


async def stalled_reader(
    host: str, port: int, source: str, run_id: str, stop: asyncio.Event, counts: Counts
) -> None:
    import socket

    while not stop.is_set():
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            sock.bind((source, 0))
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
            await asyncio.get_running_loop().sock_sendall(
                sock, f"GET /api/runs/{run_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            )
            counts.connected += 1
            # Never read: wait until the server cuts the connection (or the bench ends).
            while not stop.is_set():
                await asyncio.sleep(1)
                try:
                    sock.send(b"")
                    if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                        counts.cut += 1
                        break
                except BlockingIOError:
                    continue
                except OSError:
                    counts.cut += 1
                    break
        except OSError:
            await asyncio.sleep(0.5)
        finally:
            sock.close()


async def attack(server: Server, slow: int, seconds: float, runs: int) -> None:
    host, port_text = server.base.removeprefix("http://").split(":")
    port = int(port_text)
    calm = await normal_client(server, max(2, runs // 3))
    print(
        f"  alone: p50 {pct(calm, 0.5) * 1000:.1f} ms, p99 {pct(calm, 0.99) * 1000:.1f} ms, "
        f"max {max(calm) * 1000:.1f} ms per text event ({len(calm)} timed)"
    )
    async with httpx.AsyncClient(base_url=server.base, timeout=600) as client:
        long = await client.post("/api/agents/chat/runs", json={"input": "chunks 20000 1000"})
        long.raise_for_status()
        long_run = long.json()["run_id"]
    stop = asyncio.Event()
    counts = Counts()
    sources = [f"127.{1 + i // 250}.{i % 250}.{2 + (i % 3)}" for i in range(slow)]
    tasks = [
        asyncio.ensure_future(
            slowloris(host, port, src, stop, counts)
            if i % 2 == 0
            else stalled_reader(host, port, src, long_run, stop, counts)
        )
        for i, src in enumerate(sources)
    ]
    await asyncio.sleep(3)  # all of them in place
    began = time.monotonic()
    lags = await normal_client(server, runs)
    left = seconds - (time.monotonic() - began)
    if left > 0:
        await asyncio.sleep(left)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(
        f"  with {slow} slow clients ({slow // 2} trickling headers, {slow - slow // 2} not "
        f"reading a stream): p50 {pct(lags, 0.5) * 1000:.1f} ms, p99 "
        f"{pct(lags, 0.99) * 1000:.1f} ms, max {max(lags) * 1000:.1f} ms per text event "
        f"({len(lags)} timed); the slow clients connected {counts.connected} times and were "
        f"cut {counts.cut} times"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = write_project(Path(tmp) / "project")
        server = start_server(
            project,
            {
                "TETHER_TEST_STORE": f"sqlite:///{project / 'tether.db'}",
                "TETHER_TEST_DELAY": "0.02",
            },
            ["--send-timeout", "5", "--header-timeout", "5"],
        )
        try:
            print("one worker, SQLite, --header-timeout 5 --send-timeout 5:")
            asyncio.run(attack(server, args.slow, args.seconds, args.runs))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
