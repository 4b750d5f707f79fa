"""A 10-turn lab conversation carrying a 5 MB image, against the same conversation without it.

    .venv/bin/python bench/media_turns.py [--turns 10] [--mb 5] [--repeat 3]

Each turn is one lab episode on one memory scope in a SQLite file, its model an Anthropic
adapter talking HTTP to a local server that reads the whole request and answers a short SSE
reply (so the request's own encoding — the JSON body with the image's base64, sent each turn,
as a provider needs it — is real work, measured apart). The first turn sends
`["what is this?", image(<5 MB>)]`; the others send text. Prints:

- bytes written to the store per turn (records + run events + blobs, read from the tables):
  after the first turn the goal is only the new records, no image bytes;
- the median ms per turn after the first, with and without the image, their ratio, and the
  time `json` takes to encode the request body with the image once (the goal: ratio <= 1.2
  plus that encoding);
- the first turn's time (it builds the part, writes the blob and sends it);
- the blob reads of the whole conversation (the resolver's: none in the process that wrote
  the blob, which serves the text it has; a later process reads it once);
- the peak traced memory (tracemalloc) of each conversation, in MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx

from tether import image
from tether.lab import Runtime
from tether.llm.anthropic import AnthropicClient

REPLY = "".join(
    f"event: {name}\ndata: {json.dumps(data)}\n\n"
    for name, data in [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {"id": "m", "model": "claude-bench", "usage": {"input_tokens": 9}},
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "A chart."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
).encode()


class Server:
    """Reads each request whole and answers `REPLY`; counts the request bytes.

    It reads the way a provider's front end would cost us nothing: an `asyncio.Protocol` that
    counts the body's bytes as they arrive and drops them, so what the turn times show is the
    client's work (building, encoding and sending the body) and not a server that keeps 7 MB in
    a buffer in the bench's own event loop."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Connection(self), "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class _Connection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.head = bytearray()
        self.left: int | None = None  # body bytes still to come; None: reading a head
        self.length = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.left is None:
                self.head += view
                view = memoryview(b"")
                end = self.head.find(b"\r\n\r\n")
                if end < 0:
                    return
                head, view = bytes(self.head[:end]), memoryview(bytes(self.head[end + 4 :]))
                self.head.clear()
                self.length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        self.length = int(line.split(b":", 1)[1])
                self.left = self.length
            take = min(len(view), self.left)
            view, self.left = view[take:], self.left - take
            if self.left == 0:
                self.left = None
                self.server.received.append(self.length)
                assert self.transport is not None
                self.transport.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + f"content-length: {len(REPLY)}\r\n\r\n".encode()
                    + REPLY
                )


def stored_bytes(db: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        total = 0
        for sql in (
            "SELECT coalesce(sum(length(record)), 0) FROM tether_messages",
            "SELECT coalesce(sum(length(data)), 0) FROM tether_run_events",
            "SELECT coalesce(sum(length(text)), 0) FROM tether_run_event_pieces",
            "SELECT coalesce(sum(length(data)), 0) FROM tether_blobs",
        ):
            total += int(conn.execute(sql).fetchone()[0])
        return total
    finally:
        conn.close()


async def conversation(
    db: Path, turns: int, picture: bytes | None, trace: bool = False
) -> dict[str, Any]:
    server = Server()
    url = await server.start()
    lab = Runtime(store=f"sqlite:///{db}", version=False)
    client = AnthropicClient("claude-bench", base_url=url, api_key="k")
    agent = lab.create_agent(id="looker", model=client, system_prompt="Describe images.")
    times: list[float] = []
    written: list[int] = []
    before = 0
    if trace:
        tracemalloc.start()
    try:
        for turn in range(turns):
            user: Any = "and now?"
            if turn == 0:
                user = ["what is this?", image(picture)] if picture is not None else "what is this?"
            t0 = time.perf_counter()
            await agent.run(memory_scope="chat", user=user).result
            times.append(time.perf_counter() - t0)
            if not trace:
                after = stored_bytes(db)
                written.append(after - before)
                before = after
        peak = tracemalloc.get_traced_memory()[1] if trace else 0
    finally:
        if trace:
            tracemalloc.stop()
        resolver = lab.blob_resolver(lab.message_store)
        reads = resolver.reads if resolver is not None else 0
        await lab.aclose()
        await client.aclose()
        await server.stop()
    return {
        "times": times,
        "written": written,
        "peak": peak,
        "reads": reads,
        "sent": server.received,
    }


async def send_seconds(size: int, times: int = 5) -> float:
    """What sending a body of `size` bytes costs over sending a small one: the medians of
    `times` POSTs of each on a warm connection to the same kind of server. The part of a media
    turn that no client can save (a provider needs the bytes in every request)."""
    server = Server()
    url = await server.start()
    big = b'{"d":"' + b"A" * (size - 8) + b'"}'
    medians: list[float] = []
    async with httpx.AsyncClient() as client:
        for content in (big, b'{"d":""}'):
            await client.post(url, content=content)
            spent: list[float] = []
            for _ in range(times):
                t0 = time.perf_counter()
                await client.post(url, content=content)
                spent.append(time.perf_counter() - t0)
            medians.append(statistics.median(spent))
    await server.stop()
    return medians[0] - medians[1]


def encode_seconds(picture: bytes) -> float:
    """What encoding a request body that carries the image's base64 costs, once."""
    body = {"messages": [{"role": "user", "content": [image(picture), {"type": "text"}]}]}
    t0 = time.perf_counter()
    json.dumps(body).encode()
    return time.perf_counter() - t0


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # PNG magic, then bytes that do not compress (as a photo's do not).
    picture = b"\x89PNG\r\n\x1a\n" + os.urandom(int(args.mb * 1024 * 1024) - 8)
    with_image: list[float] = []
    without: list[float] = []
    firsts: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            a = await conversation(Path(tmp) / f"img{r}.db", args.turns, picture)
            b = await conversation(Path(tmp) / f"txt{r}.db", args.turns, None)
            with_image += a["times"][1:]
            firsts.append(a["times"][0])
            without += b["times"][1:]
            if r == 0:
                first = a
                plain = b
        peak_img = (await conversation(Path(tmp) / "pi.db", args.turns, picture, True))["peak"]
        peak_txt = (await conversation(Path(tmp) / "pt.db", args.turns, None, True))["peak"]
    enc = encode_seconds(picture)
    send = await send_seconds(first["sent"][1])
    med_img = statistics.median(with_image) * 1000
    med_txt = statistics.median(without) * 1000
    print(f"image: {len(picture):,} bytes; {args.turns} turns; {args.repeat} conversations each")
    print(f"bytes written per turn, with image:    {first['written']}")
    print(f"bytes written per turn, without image: {plain['written']}")
    print(f"request bytes sent per turn, with image: {first['sent']}")
    print(
        f"median ms per turn after the first: with image {med_img:.1f}, without {med_txt:.1f}, "
        f"ratio {med_img / med_txt:.2f}; encoding the body once: {enc * 1000:.1f} ms; "
        f"(with - encoding) / without = {(med_img - enc * 1000) / med_txt:.2f}"
    )
    print(
        f"sending the body (over a small one): {send * 1000:.1f} ms; "
        f"(with - sending) / without = {(med_img - send * 1000) / med_txt:.2f}"
    )
    print(
        f"first turn with the image (image() made in it, blob written): "
        f"{statistics.median(firsts) * 1000:.1f} ms median"
    )
    print(f"blob reads in the conversation (resolver): {first['reads']}")
    print(
        f"peak traced memory: with image {peak_img / 2**20:.1f} MiB, without {peak_txt / 2**20:.1f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
