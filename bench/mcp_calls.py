"""What the MCP client costs per connect and per call, in each protocol era, against the
in-process test server (no network, so the client's own work is what is measured).

    .venv/bin/python bench/mcp_calls.py [--connects N] [--calls N]

- connect: `server/discover`, then `tools/list` (the stateless revision), or the probe, then
  `initialize`, `notifications/initialized`, the GET stream and `tools/list` (the handshake
  era, whose probe is the price of speaking 2026-07-28 first); each connection is closed again;
- call: one `tools/call` of a tool with an `x-mcp-header` argument (checked locally, mirrored
  into a header in the stateless revision), through `Tool.call`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from tether import RunContext
from tether.mcp import mcp_server
from tether.testing import create_test_mcp_server

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "a": {"type": "integer"},
        "b": {"type": "integer"},
    },
    "required": ["a", "b"],
}


async def measure(modern: bool, connects: int, calls: int) -> tuple[float, float]:
    tool = {"name": "add", "input_schema": SCHEMA, "run": lambda a: str(a["a"] + a["b"])}
    server = create_test_mcp_server(tools=[tool], modern=modern)
    source = mcp_server(server.url, transport=server)
    started = time.perf_counter()
    for _ in range(connects):
        conn = await source.connect()
        assert conn.close is not None
        await conn.close()
    per_connect = (time.perf_counter() - started) / connects
    conn = await source.connect()
    [add] = conn.tools
    ctx = RunContext("bench")
    started = time.perf_counter()
    for i in range(calls):
        result = await add.call({"region": "eu-west1", "a": i, "b": 1}, ctx)
        assert not result.is_error, result.output
    per_call = (time.perf_counter() - started) / calls
    assert conn.close is not None
    await conn.close()
    await server.aclose()
    return per_connect, per_call


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connects", type=int, default=300)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    for modern in (True, False):
        connect, call = await measure(modern, args.connects, args.calls)
        era = "2026-07-28" if modern else "handshake (after the probe)"
        print(f"{era:30} connect {connect * 1e3:7.3f} ms   call {call * 1e6:7.1f} µs")


if __name__ == "__main__":
    asyncio.run(main())
