"""Many clients streaming runs from `tether serve`: the latency the server adds per event, and the
memory an open stream costs it.

    .venv/bin/python bench/serve_streams.py [--clients 500] [--chunks 100] [--delay 0.1]
                                            [--no-sqlite] [--no-postgres]

A real `tether serve` process (one worker) serves the test project of tests/serve on a paced
fake model: each answer is `--chunks` text chunks, `--delay` seconds apart. `--clients`
concurrent clients each start a run (POST /api/agents/chat/runs) and read its SSE stream to the
end. For every text event the client notes when it arrived; the event's `at` is when the episode
got the chunk from the model (one clock: one machine), so the difference is what the serving
path adds: the batched write to the run store, the commit-then-notify, the SSE response and the
loopback socket (events made before a client's stream was open are left out: their wait is the
client's). Reported: p50 / p99 / max of that, per store, and how soon each start was answered
(its 202: the server answers once the run's first event is stored).

Memory per open stream: the server's resident set with `--clients` long runs going and no
stream open, then with one stream open on each of them (all delivering), divided by the count.

PostgreSQL is a throwaway cluster (tests/postgres_server.py) unless TETHER_TEST_POSTGRES_URL
names one. Nothing is asserted; the numbers go in the closing note.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.serve.conftest import Server, start_server, write_project


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def start_request(host: str, text: str) -> bytes:
    """The bytes of a POST that starts a run of the test project's chat agent on `text`."""
    body = json.dumps({"input": text}).encode()
    return (
        f"POST /api/agents/chat/runs HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )


async def start_run(server: Server, text: str) -> str:
    """POST a run and read its 202: a bare HTTP/1.1 request on an asyncio socket, as `follow`
    reads streams (httpx spends ~7 ms of CPU per request here, which 500 clients in one
    process would count as the server's wait)."""
    host, port = server.base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(start_request(host, text))
        status = await reader.readline()
        if b" 202 " not in status:
            raise RuntimeError(f"a start answered {status!r}")
        answer = await reader.read()
    finally:
        writer.close()
    run_id: str = json.loads(answer.split(b"\r\n\r\n", 1)[1])["run_id"]
    return run_id


async def follow(
    server: Server,
    run_id: str,
    lags: list[float],
    opened: asyncio.Event | None = None,
) -> int:
    """Read a run's stream to its end; note each text event's added latency. A bare HTTP/1.1
    client on an asyncio socket, so the bench's own parsing stays small beside the server's."""
    host, port = server.base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"GET /api/runs/{run_id}/stream HTTP/1.1\r\nHost: {host}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"stream answered {status!r}")
    while (await reader.readline()) not in (b"\r\n", b""):
        pass  # the headers (the body is chunked)
    # Events the run made before this stream was open came from the store's backlog: their
    # wait is the client's, not the server's.
    opened_at = time.time()
    events = 0
    kind = b""
    pending = b""
    try:
        while True:
            size = int((await reader.readline()).strip() or b"0", 16)
            if size == 0:
                return events
            chunk = await reader.readexactly(size + 2)
            now = time.time()
            pending += chunk[:-2]
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.startswith(b"event:"):
                    kind = line[6:].strip()
                elif line.startswith(b"data:"):
                    if kind == b"run_ended":
                        return events
                    events += 1
                    if opened is not None and not opened.is_set():
                        opened.set()
                    if kind == b"agent_text_delta":
                        at = json.loads(line[5:])["at"]
                        if at >= opened_at:
                            lags.append(now - at)
    finally:
        writer.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(server: Server, clients: int, chunks: int) -> dict[str, Any]:
    lags: list[float] = []
    started = time.perf_counter()
    starts: list[float] = []

    async def one() -> int:
        begin = time.perf_counter()
        run_id = await start_run(server, f"words {chunks}")
        starts.append(time.perf_counter() - begin)
        return await follow(server, run_id, lags)

    counts = await asyncio.gather(*(one() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return {
        "runs": clients,
        "events": sum(counts),
        "text_events": len(lags),
        "p50_ms": statistics.median(lags) * 1000 if lags else float("nan"),
        "p99_ms": pct(lags, 0.99) * 1000 if lags else float("nan"),
        "max_ms": max(lags) * 1000 if lags else float("nan"),
        "wall_s": elapsed,
        "start_p50_ms": statistics.median(starts) * 1000,
        "start_p99_ms": pct(starts, 0.99) * 1000,
        "start_max_ms": max(starts) * 1000,
    }


async def memory(server: Server, clients: int) -> dict[str, Any]:
    """RSS with `clients` long runs going, then with a stream open on each."""
    pid = server.process.pid
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx.AsyncClient(base_url=server.base, timeout=300, limits=limits) as client:
        runs = await asyncio.gather(*(start_run(server, "words 600") for _ in range(clients)))
        await asyncio.sleep(2)
        before = rss_kib(pid)
        lags: list[float] = []
        opened = [asyncio.Event() for _ in runs]
        streams = [
            asyncio.ensure_future(follow(server, run_id, lags, ev))
            for run_id, ev in zip(runs, opened, strict=True)
        ]
        await asyncio.wait_for(asyncio.gather(*(ev.wait() for ev in opened)), 120)
        await asyncio.sleep(2)
        during = rss_kib(pid)
        for run_id in runs:
            await client.post(f"/api/runs/{run_id}/cancel")
        await asyncio.gather(*streams, return_exceptions=True)
    return {
        "rss_runs_mib": before / 1024,
        "rss_runs_and_streams_mib": during / 1024,
        "per_stream_kib": (during - before) / clients,
    }


def bench(store: str, root: Path, args: argparse.Namespace) -> None:
    project = write_project(root)
    server = start_server(
        project,
        {"TETHER_TEST_STORE": store, "TETHER_TEST_DELAY": str(args.delay)},
        # One address opens every client's connections: over the per-address cap (64).
        ["--max-body", "1048576", "--max-client-connections", str(args.clients * 4)],
    )
    try:
        lat = asyncio.run(latency(server, args.clients, args.chunks))
        mem = asyncio.run(memory(server, args.clients))
    finally:
        server.stop()
    print(
        f"  {lat['runs']} runs, {lat['events']} events streamed in {lat['wall_s']:.1f} s; "
        f"added latency per text event p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms, "
        f"max {lat['max_ms']:.1f} ms ({lat['text_events']} text events timed); a start "
        f"answered (202) in {lat['start_p50_ms']:.0f} ms median, {lat['start_p99_ms']:.0f} ms p99, "
        f"{lat['start_max_ms']:.0f} ms at most"
    )
    print(
        f"  memory: {mem['rss_runs_mib']:.0f} MiB with {args.clients} runs going, "
        f"{mem['rss_runs_and_streams_mib']:.0f} MiB with a stream open on each: "
        f"{mem['per_stream_kib']:.1f} KiB per open stream"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print(
        f"{args.clients} concurrent streaming clients, {args.chunks} chunks per answer, "
        f"{args.delay * 1000:.0f} ms apart"
    )
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_sqlite:
            print("SQLite:")
            db = Path(tmp) / "sqlite" / "bench.db"
            bench(f"sqlite:///{db}", Path(tmp) / "sqlite", args)
        if not args.no_postgres:
            from tests.postgres_server import postgres_url, shutdown

            try:
                url = postgres_url()
                sep = "&" if "?" in url else "?"
                print("PostgreSQL:")
                bench(f"{url}{sep}pool_max_size=20", Path(tmp) / "postgres", args)
            finally:
                shutdown()


if __name__ == "__main__":
    main()
