"""Replaying one long run to several clients at once: the memory `tether serve` needs for it.

    .venv/bin/python bench/serve_replay.py [--events 20000] [--size 1000] [--clients 10]
                                           [--store sqlite|postgres]

A real `tether serve` process (one worker) stores one finished run of `--events` text events of
`--size` characters each (about 20 MB by default), then `--clients` clients read its stream
from `after=0` at once, to the end. Reported: the server's resident set before, its peak while
they read (sampled every 5 ms from /proc), the peak's rise, and the time the replay took. The
stream reads the store a page at a time (`tether.serve._feed.PAGE` events) and the next page
only once the last one was sent, so the rise should not depend on the run's size; before that
change a stream read and encoded the whole run in one write. With the default `--size` the
answer is 20 MB, and the run's last events carry it whole: a stream passes them on a few stored
pieces at a time (`tether.stores.run_store.EventPieces`), so that does not count either.

Nothing is asserted; the numbers go in docs/serve.md and the closing note. To measure another
checkout of the server, run this file with PYTHONPATH pointing at that checkout's src.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.serve.conftest import Server, start_server, write_project


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field}")


async def read_stream(base: str, run_id: str) -> int:
    """Read the stream to its end as fast as a client can; the bytes received."""
    received = 0
    async with (
        httpx.AsyncClient(base_url=base, timeout=600) as client,
        client.stream("GET", f"/api/runs/{run_id}/stream") as response,
    ):
        async for chunk in response.aiter_raw():
            received += len(chunk)
    return received


async def sample_peak(pid: int, stop: asyncio.Event) -> int:
    peak = 0
    while not stop.is_set():
        peak = max(peak, status_kib(pid, "VmRSS"))
        await asyncio.sleep(0.005)
    return peak


async def replay(server: Server, events: int, size: int, clients: int) -> None:
    async with httpx.AsyncClient(base_url=server.base, timeout=600) as client:
        started = await client.post(
            "/api/agents/chat/runs", json={"input": f"chunks {events} {size}"}
        )
        started.raise_for_status()
        run_id = started.json()["run_id"]
    await read_stream(server.base, run_id)  # to the run's end: it is stored whole
    pid = server.process.pid
    await asyncio.sleep(1)
    before = status_kib(pid, "VmRSS")
    stop = asyncio.Event()
    sampler = asyncio.ensure_future(sample_peak(pid, stop))
    began = time.perf_counter()
    sizes = await asyncio.gather(*(read_stream(server.base, run_id) for _ in range(clients)))
    elapsed = time.perf_counter() - began
    stop.set()
    peak = await sampler
    print(
        f"  a run of {events} events of {size} characters ({sizes[0] / 1e6:.1f} MB as SSE), "
        f"replayed from after=0 by {clients} clients at once in {elapsed:.1f} s"
    )
    print(
        f"  server RSS {before / 1024:.0f} MiB before, {peak / 1024:.0f} MiB at its peak: "
        f"+{(peak - before) / 1024:.1f} MiB for {clients} streams "
        f"({(peak - before) / clients:.0f} KiB each)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = write_project(Path(tmp) / "project")
        if args.store == "postgres":
            from tests.postgres_server import postgres_url, shutdown

            store = postgres_url()
        else:
            store = f"sqlite:///{project / 'tether.db'}"
        server = start_server(project, {"TETHER_TEST_STORE": store, "TETHER_TEST_DELAY": "0"})
        try:
            print(f"{args.store}:")
            asyncio.run(replay(server, args.events, args.size, args.clients))
        finally:
            server.stop()
            if args.store == "postgres":
                shutdown()


if __name__ == "__main__":
    main()
