"""A2A `SendStreamingMessage` against `tether serve`'s own SSE, for the same run: what the A2A
stream adds per text event, and its bytes.

    .venv/bin/python bench/a2a_stream.py [--runs 10] [--chunks 200] [--delay 0.005]

A real `tether serve` process (SQLite, the test project of tests/serve on a paced fake model:
each answer is `--chunks` text chunks, `--delay` seconds apart). For each run, the bench sends
the message over A2A (POST /a2a/chat, SendStreamingMessage) and, as soon as the task's first
event names the run, opens the run's own stream (GET /api/runs/{id}/stream) beside it; both are
read with the same line reader. For every text chunk that both streams delivered live (the
first `--skip` are left out: the tether stream may still be reading its backlog), the
difference of the two arrival times is what the A2A path adds: the JSON-RPC envelope, the
artifact mapping, a second SSE response. Reported: p50 / p99 / max of it, the bytes per chunk of
each stream, and each stream's time from the first chunk to its end. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.serve.conftest import Server, start_server, write_project


async def a2a_stream(
    client: httpx.AsyncClient, text: str, run_id: asyncio.Future[str], out: list[float]
) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    body["params"]["message"]["parts"] = [{"text": text}]
    size = 0
    async with client.stream("POST", "/a2a/chat", json=body, headers={"A2A-Version": "1.0"}) as r:
        async for line in r.aiter_lines():
            size += len(line) + 1
            if not line.startswith("data:"):
                continue
            if not run_id.done():
                run_id.set_result(json.loads(line[5:])["result"]["task"]["id"])
            elif '"artifactUpdate"' in line:
                out.append(time.perf_counter())
    return size


async def tether_stream(client: httpx.AsyncClient, run_id: str, out: list[float]) -> int:
    size = 0
    kind = ""
    async with client.stream("GET", f"/api/runs/{run_id}/stream") as r:
        async for line in r.aiter_lines():
            size += len(line) + 1
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                if kind == "run_ended":
                    break
                if kind == "agent_text_delta":
                    out.append(time.perf_counter())
    return size


async def one_run(client: httpx.AsyncClient, chunks: int) -> dict[str, Any]:
    run_id: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    a2a: list[float] = []
    own: list[float] = []
    a2a_task = asyncio.ensure_future(a2a_stream(client, f"words {chunks}", run_id, a2a))
    await asyncio.wait([run_id, a2a_task], return_when=asyncio.FIRST_COMPLETED)
    if not run_id.done():  # the A2A stream ended (or broke) before naming its run
        await a2a_task
        raise RuntimeError("the A2A stream named no task")
    own_bytes = await tether_stream(client, run_id.result(), own)
    a2a_bytes = await a2a_task
    return {"a2a": a2a, "own": own, "a2a_bytes": a2a_bytes, "own_bytes": own_bytes}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(server: Server, args: argparse.Namespace) -> None:
    async with httpx.AsyncClient(base_url=server.base, timeout=120) as client:
        await one_run(client, 5)  # warm up: imports, the store, the connections
        added: list[float] = []
        a2a_bytes = own_bytes = counted = 0
        a2a_spans: list[float] = []
        own_spans: list[float] = []
        for _ in range(args.runs):
            got = await one_run(client, args.chunks)
            a2a, own = got["a2a"], got["own"]
            if len(a2a) != len(own):
                raise RuntimeError(f"{len(a2a)} A2A chunks but {len(own)} tether text events")
            added.extend(a - o for a, o in list(zip(a2a, own, strict=True))[args.skip :])
            a2a_bytes += got["a2a_bytes"]
            own_bytes += got["own_bytes"]
            counted += len(a2a)
            a2a_spans.append(a2a[-1] - a2a[0])
            own_spans.append(own[-1] - own[0])
    ms = [x * 1000 for x in added]
    print(
        f"  A2A minus tether SSE arrival, per text chunk ({len(ms)} chunks): "
        f"p50 {statistics.median(ms):.2f} ms, p99 {pct(ms, 0.99):.2f} ms, max {max(ms):.2f} ms"
    )
    print(
        f"  bytes per chunk: A2A {a2a_bytes / counted:.0f}, tether SSE {own_bytes / counted:.0f}; "
        f"first to last chunk: A2A {statistics.median(a2a_spans) * 1000:.0f} ms, tether SSE "
        f"{statistics.median(own_spans) * 1000:.0f} ms (medians)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.005)
    parser.add_argument("--skip", type=int, default=20)
    args = parser.parse_args()
    print(
        f"{args.runs} runs of {args.chunks} chunks, {args.delay * 1000:.0f} ms apart, each read "
        "over A2A and over tether's own stream at once"
    )
    with tempfile.TemporaryDirectory() as tmp:
        project = write_project(Path(tmp) / "project")
        server = start_server(
            project,
            {
                "TETHER_TEST_STORE": f"sqlite:///{project / 'tether.db'}",
                "TETHER_TEST_DELAY": str(args.delay),
            },
        )
        try:
            asyncio.run(measure(server, args))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
