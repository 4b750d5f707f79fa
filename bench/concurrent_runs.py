"""200 concurrent 10-round tool runs against one local OpenAI-compatible server, against the
raw-httpx floor doing the same requests.

    .venv/bin/python bench/concurrent_runs.py [--quick] [--runs N] [--trials N]

A streaming HTTP/1.1 server with keep-alive runs in its own process on 127.0.0.1 and answers
Chat Completions like a (fast) provider: the first byte after `--latency` seconds (default 0.1),
then the stream in three flushes `--latency`/2 apart; 9 rounds that stream a sentence and a tool
call in fragments, then a streamed answer. Each trial, interleaved:

- **tether**: one agent built from a plain model config (``{"model": "openai:…", "base_url",
  "api_key"}``: the default pool of 100 connections, all kept alive) runs N sessions at once,
  each a 10-round turn with one tool;
- **floor**: one plain ``httpx.AsyncClient`` with the same connection budget (100, all kept
  alive, the same keep-alive expiry) sends the very same 10 request bodies per run, N runs at
  once, reading each streamed body to its end.

Reported: each trial's wall time of both, their ratio, the CPU time of this process (the server
runs in another), and the connections the server saw (a pool that reconnects shows up here
first). Target: tether ≤ 1.2× the floor in every trial.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import time
from typing import Any

import httpx

from tether import Session, create_agent, define_tool, reduce
from tether.llm._transport import DEFAULT_MAX_CONNECTIONS, KEEPALIVE_EXPIRY

ROUNDS = 10
WORDS = ["The", " weather", " in", " Oslo", " is", " mild", ",", " with", " light", " rain", "."]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "model": "gpt-bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _usage(prompt: int, completion: int) -> bytes:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    body = {"id": "chatcmpl-bench", "choices": [], "usage": usage}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def tool_round(round_no: int) -> list[bytes]:
    args = json.dumps({"city": "Oslo", "round": round_no})
    out = [_chunk({"role": "assistant", "content": ""})]
    out += [_chunk({"content": w}) for w in WORDS * 3]
    first = {
        "index": 0,
        "id": f"call_{round_no:02d}",
        "type": "function",
        "function": {"name": "weather", "arguments": ""},
    }
    out.append(_chunk({"tool_calls": [first]}))
    out += [
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 6]}}]})
        for i in range(0, len(args), 6)
    ]
    out += [_chunk({}, "tool_calls"), _usage(100 + 60 * round_no, 40), b"data: [DONE]\n\n"]
    return out


def answer() -> list[bytes]:
    out = [_chunk({"role": "assistant", "content": ""})]
    out += [_chunk({"content": w}) for w in WORDS * 4]
    return [*out, _chunk({}, "stop"), _usage(700, 44), b"data: [DONE]\n\n"]


# -- the server, in its own process ------------------------------------------------------------


async def _serve(port_out: Any, stats: Any, latency: float) -> None:
    replies = [b"".join(tool_round(n)) for n in range(ROUNDS - 1)] + [b"".join(answer())]

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with stats.get_lock():
            stats.value += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                size = 0
                for line in head.split(b"\r\n")[1:]:
                    if line[:15].lower() == b"content-length:":
                        size = int(line[15:])
                body = await reader.readexactly(size) if size else b""
                # The round is the number of tool results so far (a cheap scan, no JSON parse).
                rounds = body.count(b'"role":"tool"')
                reply = replies[min(rounds, ROUNDS - 1)]
                await asyncio.sleep(latency)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                # A few flushes per response, as a streaming server sends them.
                third = len(reply) // 3
                for i, piece in enumerate((reply[:third], reply[third:-third], reply[-third:])):
                    if i:
                        await asyncio.sleep(latency / 2)
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0, backlog=1024)
    port_out.put(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def _server_main(port_out: Any, stats: Any, latency: float) -> None:
    asyncio.run(_serve(port_out, stats, latency))


# -- the two clients ----------------------------------------------------------------------------


def weather(args: dict[str, Any]) -> str:
    return f"{args['city']}: 12°C (round {args['round']})"


WEATHER = define_tool(
    name="weather",
    description="Current weather for a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "round": {"type": "integer"}},
        "required": ["city", "round"],
    },
    execute=weather,
)
PROMPT = "Weather in Oslo, ten times?"


async def record_bodies(base: str) -> list[tuple[str, bytes]]:
    """The exact requests one tether run sends (captured on the wire side of httpx)."""
    from tether.llm.openai_chat import OpenAIChatClient

    sent: list[tuple[str, bytes]] = []

    async def record(request: httpx.Request) -> None:
        sent.append((str(request.url), request.content))

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as recording:
        client = OpenAIChatClient("gpt-bench", base_url=base, api_key="k", http_client=recording)
        agent = create_agent(
            llm=client, prompt=["You report the weather."], tools=[WEATHER], max_tool_rounds=ROUNDS
        )
        session = Session()
        async for event in agent.send(session, PROMPT):
            reduce(session, event)
    assert event["type"] == "done", event
    assert len(sent) == ROUNDS, len(sent)
    return sent


async def tether_runs(base: str, n: int) -> tuple[float, float]:
    agent = create_agent(
        llm={"model": "openai:gpt-bench", "base_url": base, "api_key": "k"},
        prompt=["You report the weather."],
        tools=[WEATHER],
        max_tool_rounds=ROUNDS,
    )

    async def one() -> None:
        session = Session()
        async for event in agent.send(session, PROMPT):
            reduce(session, event)
        assert event["type"] == "done", event

    async with agent:
        await one()  # warm: imports, the pool's first connection
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one() for _ in range(n)))
        return time.perf_counter() - started, time.process_time() - cpu


async def floor_runs(sent: list[tuple[str, bytes]], n: int) -> tuple[float, float]:
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "authorization": "Bearer k",
    }
    limits = httpx.Limits(
        max_connections=DEFAULT_MAX_CONNECTIONS,
        max_keepalive_connections=DEFAULT_MAX_CONNECTIONS,
        keepalive_expiry=KEEPALIVE_EXPIRY,
    )
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:

        async def one() -> None:
            for url, content in sent:
                async with http.stream("POST", url, content=content, headers=headers) as response:
                    async for _ in response.aiter_bytes():
                        pass

        await one()
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one() for _ in range(n)))
        return time.perf_counter() - started, time.process_time() - cpu


async def main(runs: int, trials: int, latency: float) -> bool:
    ctx = multiprocessing.get_context("spawn")
    ports: Any = ctx.Queue()
    connections: Any = ctx.Value("i", 0)
    server = ctx.Process(target=_server_main, args=(ports, connections, latency), daemon=True)
    server.start()
    try:
        base = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
        sent = await record_bodies(base)
        print(
            f"{runs} concurrent {ROUNDS}-round runs per trial "
            f"({runs * ROUNDS:,} requests), local OpenAI-compatible server, first byte after "
            f"{latency:g} s; both pools {DEFAULT_MAX_CONNECTIONS} connections"
        )
        print(
            f"   {'trial':<7}{'floor':>9}{'tether':>9}{'ratio':>8}"
            f"{'cpu floor':>11}{'cpu tether':>12}{'conns floor/tether':>21}"
        )
        ok = True
        for trial in range(1, trials + 1):
            before = connections.value
            floor, floor_cpu = await floor_runs(sent, runs)
            floor_conns = connections.value - before
            before = connections.value
            ours, our_cpu = await tether_runs(base, runs)
            our_conns = connections.value - before
            ratio = ours / floor
            ok = ok and ratio <= 1.2
            print(
                f"   {trial:<7}{floor:>8.2f}s{ours:>8.2f}s{ratio:>7.2f}×"
                f"{floor_cpu:>10.2f}s{our_cpu:>11.2f}s{floor_conns:>14}/{our_conns}"
            )
        print(f"   target: ≤ 1.2× in every trial: {'met' if ok else 'NOT met'}")
        return ok
    finally:
        server.terminate()
        server.join()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 trials instead of 7")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--trials", type=int)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.trials or (3 if args.quick else 7), args.latency))
