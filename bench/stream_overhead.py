"""What the provider adapters cost on top of reading the bytes, against a real local server.

    .venv/bin/python bench/stream_overhead.py [--quick]

A streaming HTTP/1.1 server runs in its own process on 127.0.0.1 (so its CPU time is not ours)
and answers in each API's wire format. Two measurements, medians of several runs:

1. **Per SSE event.** A response of N delta events per API (1b: Bedrock's event stream
   messages, against httpx + botocore's own event stream decoder + `json.loads` per payload).
   The floor reads the same body with plain httpx (``aiter_bytes``, no parsing); the adapter
   run is ``client.chat()`` to the finish chunk. Reported: floor and adapter µs per event, and
   their difference, the adapter's cost.
   Also the parser alone (SSE decoder + adapter state machine on bytes in memory, no I/O).
2. **A 10-round tool loop.** An agent on the local OpenAI-compatible server: 9 rounds that each
   stream a sentence and a tool call in fragments, then a streamed answer (10 requests, with
   the transcript growing each round). The baseline sends the very same 10 request bodies with
   plain httpx and reads each streamed body to the end. Target: tether ≤ 1.2× the baseline.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from typing import Any

import httpx

from tether import Session, create_agent, define_tool, reduce
from tether._sse import SSEDecoder
from tether.llm._adapter import HTTPAdapter, StreamParser
from tether.llm._eventstream import EventStreamDecoder, encode_message
from tether.llm.anthropic import AnthropicClient, AnthropicStream
from tether.llm.bedrock import BedrockClient, BedrockStream
from tether.llm.gemini import GeminiClient, GeminiStream
from tether.llm.openai_chat import OpenAIChatClient, OpenAIChatStream
from tether.llm.openai_responses import OpenAIResponsesClient, OpenAIResponsesStream

QUICK = "--quick" in sys.argv
EVENTS = 2_000 if QUICK else 20_000
RUNS = 5 if QUICK else 15
LOOP_RUNS = 10 if QUICK else 40
ROUNDS = 10

# -- response bodies, in each API's shape ----------------------------------------------------


def _sse(name: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()


def _words(n: int) -> list[str]:
    vocabulary = [
        "The",
        " weather",
        " in",
        " Oslo",
        " is",
        " mild",
        ",",
        " around",
        " 12",
        "°C",
        ".",
    ]
    return [vocabulary[i % len(vocabulary)] for i in range(n)]


def anthropic_body(n: int) -> list[bytes]:
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-bench",
                    "stop_reason": None,
                    "usage": {"input_tokens": 25, "output_tokens": 1},
                },
            },
        ),
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    out += [
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
        )
        for w in _words(n)
    ]
    out += [
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": n},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return out


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _sse(
        None,
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1727346168,
            "model": "gpt-bench",
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        },
    )


def _chat_usage(prompt: int, completion: int) -> bytes:
    return _sse(
        None,
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        },
    )


def chat_body(n: int) -> list[bytes]:
    out = [_chat_chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [_chat_chunk({"content": w}) for w in _words(n)]
    out += [_chat_chunk({}, "stop"), _chat_usage(14, n), b"data: [DONE]\n\n"]
    return out


def chat_tool_round(round_no: int, words: int = 40) -> list[bytes]:
    call_id = f"call_{round_no:02d}"
    args = json.dumps({"city": "Oslo", "round": round_no})
    out = [_chat_chunk({"role": "assistant", "content": ""})]
    out += [_chat_chunk({"content": w}) for w in _words(words)]
    first = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "weather", "arguments": ""},
    }
    out.append(_chat_chunk({"tool_calls": [first]}))
    out += [
        _chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 4]}}]})
        for i in range(0, len(args), 4)
    ]
    out += [
        _chat_chunk({}, "tool_calls"),
        _chat_usage(100 + round_no * 60, words + 20),
        b"data: [DONE]\n\n",
    ]
    return out


def responses_body(n: int) -> list[bytes]:
    item = {
        "id": "msg_bench",
        "type": "message",
        "status": "in_progress",
        "content": [],
        "role": "assistant",
    }
    out = [
        _sse(
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {"id": "resp_bench", "status": "in_progress"},
            },
        ),
        _sse(
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": item,
            },
        ),
    ]
    out += [
        _sse(
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": i + 2,
                "item_id": "msg_bench",
                "output_index": 0,
                "content_index": 0,
                "delta": w,
                "logprobs": [],
                "obfuscation": "fnaZDlQxOXx",
            },
        )
        for i, w in enumerate(_words(n))
    ]
    out.append(
        _sse(
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": n + 2,
                "response": {
                    "id": "resp_bench",
                    "status": "completed",
                    "usage": {"input_tokens": 11, "output_tokens": n},
                },
            },
        )
    )
    return out


def gemini_body(n: int) -> list[bytes]:
    def chunk(text: str, finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": text}], "role": "model"},
            "index": 0,
        }
        if finish:
            candidate["finishReason"] = finish
        payload = {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": 11,
                "candidatesTokenCount": 1,
                "totalTokenCount": 12,
            },
            "modelVersion": "gemini-bench",
            "responseId": "bench",
        }
        return b"data: " + json.dumps(payload).encode() + b"\r\n\r\n"

    words = _words(n)
    return [chunk(w) for w in words[:-1]] + [chunk(words[-1], "STOP")]


def bedrock_body(n: int) -> list[bytes]:
    """A ConverseStream body: one event stream message per event, as Bedrock frames them."""

    def frame(kind: str, payload: dict[str, Any]) -> bytes:
        headers = {
            ":event-type": kind,
            ":content-type": "application/json",
            ":message-type": "event",
        }
        return encode_message(headers, json.dumps(payload, separators=(",", ":")).encode())

    out = [frame("messageStart", {"role": "assistant", "p": "abcdefgh"})]
    out += [
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": w}, "p": "abcd"})
        for w in _words(n)
    ]
    out.append(frame("contentBlockStop", {"contentBlockIndex": 0, "p": "abcdef"}))
    out.append(frame("messageStop", {"stopReason": "end_turn", "p": "ab"}))
    usage = {"inputTokens": 12, "outputTokens": n, "totalTokens": n + 12}
    out.append(frame("metadata", {"usage": usage, "metrics": {"latencyMs": 100}, "p": "abc"}))
    return out


BODIES = {
    "bedrock": bedrock_body,
    "anthropic": anthropic_body,
    "openai": chat_body,
    "openai-responses": responses_body,
    "gemini": gemini_body,
}

# -- the server (its own process) --------------------------------------------------------------


async def _serve(port_out: Any) -> None:
    cache: dict[tuple[str, int], list[bytes]] = {}

    def reply_for(path: str, body: bytes) -> list[bytes]:
        _, first, *rest = path.split("/")
        if first == "loop":
            request = json.loads(body)
            rounds = sum(1 for m in request["messages"] if m["role"] == "tool")
            if rounds < ROUNDS - 1:
                return chat_tool_round(rounds)
            return chat_body(60)
        provider, n = rest[0], int(first)
        key = (provider, n)
        if key not in cache:
            cache[key] = BODIES[provider](n)
        return cache[key]

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.split(b"\r\n")
                path = lines[0].split(b" ")[1].decode()
                size = 0
                for line in lines[1:]:
                    if line[:15].lower() == b"content-length:":
                        size = int(line[15:])
                body = await reader.readexactly(size) if size else b""
                events = reply_for(path, body)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                # One chunk per event, as a streaming server flushes them.
                for i, event in enumerate(events):
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    if i % 32 == 31:
                        await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    port_out.put(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def _server_main(port_out: Any) -> None:
    asyncio.run(_serve(port_out))


# -- measurements ---------------------------------------------------------------------------------

CLIENTS: dict[str, tuple[type[HTTPAdapter], str]] = {
    "anthropic": (AnthropicClient, ""),
    "openai": (OpenAIChatClient, "/v1"),
    "openai-responses": (OpenAIResponsesClient, "/v1"),
    "gemini": (GeminiClient, "/v1beta"),
}
PARSERS: dict[str, type[StreamParser]] = {
    "anthropic": AnthropicStream,
    "openai": OpenAIChatStream,
    "openai-responses": OpenAIResponsesStream,
    "gemini": GeminiStream,
}
REQUEST: Any = {
    "model": "bench",
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]}],
}


def _timed() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


async def per_event(base: str) -> None:
    print(f"1. Cost per SSE event ({EVENTS:,} events per response, median of {RUNS} runs)")
    print("   wall = elapsed; cpu = this process only (the server runs in another one)")
    print(
        f"   {'api':<18}{'raw wall':>10}{'raw cpu':>10}{'chat() wall':>13}{'chat() cpu':>12}"
        f"{'cost (cpu)':>12}{'parser only':>13}"
    )
    async with httpx.AsyncClient(timeout=60) as http:
        for provider, (cls, suffix) in CLIENTS.items():
            root = f"{base}/{EVENTS}/{provider}"
            client = cls("bench", base_url=root + suffix, api_key="k", http_client=http)
            url = client.url(REQUEST)
            content = client.encode(REQUEST)
            headers = client._headers

            async def floor(
                url: str = url, content: bytes = content, headers: Any = headers
            ) -> tuple[float, float]:
                wall, cpu = _timed()
                async with http.stream("POST", url, content=content, headers=headers) as response:
                    async for _ in response.aiter_bytes():
                        pass
                return time.perf_counter() - wall, time.process_time() - cpu

            async def adapter(client: HTTPAdapter = client) -> tuple[float, float]:
                wall, cpu = _timed()
                async for chunk in client.chat(REQUEST):
                    if chunk["type"] == "finish":
                        break
                return time.perf_counter() - wall, time.process_time() - cpu

            await floor()
            await adapter()
            raw_runs, adapter_runs = [], []
            for _ in range(RUNS):  # interleaved, so drift hits both alike
                raw_runs.append(await floor())
                adapter_runs.append(await adapter())
            body = b"".join(BODIES[provider](EVENTS))
            parser_times = []
            for _ in range(RUNS):
                decoder, parser = SSEDecoder(), PARSERS[provider]()
                start = time.process_time()
                for piece in (body[i : i + 4096] for i in range(0, len(body), 4096)):
                    for event in decoder.feed(piece):
                        parser.handle(event)
                for event in decoder.flush():
                    parser.handle(event)
                parser.finish()
                parser_times.append(time.process_time() - start)

            def per(values: list[float]) -> float:
                return statistics.median(values) / EVENTS * 1e6

            raw_wall, raw_cpu = per([w for w, _ in raw_runs]), per([c for _, c in raw_runs])
            wall, cpu = per([w for w, _ in adapter_runs]), per([c for _, c in adapter_runs])
            alone = per(parser_times)
            print(
                f"   {provider:<18}{raw_wall:>8.2f}µs{raw_cpu:>8.2f}µs{wall:>11.2f}µs{cpu:>10.2f}µs"
                f"{cpu - raw_cpu:>10.2f}µs{alone:>11.2f}µs"
            )


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


async def tool_loop(base: str) -> None:
    print(
        f"\n2. A {ROUNDS}-round tool loop, local OpenAI-compatible server (median of {LOOP_RUNS})"
    )
    sent: list[tuple[str, bytes]] = []

    async def record(request: httpx.Request) -> None:
        sent.append((str(request.url), request.content))

    # One run with a recording client captures the exact bodies tether sends.
    async with httpx.AsyncClient(event_hooks={"request": [record]}) as recording:
        agent = create_agent(
            llm=OpenAIChatClient(
                "gpt-bench", base_url=f"{base}/loop/v1", api_key="k", http_client=recording
            ),
            prompt=["You report the weather."],
            tools=[WEATHER],
            max_tool_rounds=ROUNDS,
        )
        session = Session()
        async for event in agent.send(session, "Weather in Oslo, ten times?"):
            reduce(session, event)
    assert len(sent) == ROUNDS, len(sent)
    assert session.messages[-1]["role"] == "assistant"
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "authorization": "Bearer k",
    }

    async with httpx.AsyncClient(timeout=60) as http:
        agent = create_agent(
            llm=OpenAIChatClient(
                "gpt-bench", base_url=f"{base}/loop/v1", api_key="k", http_client=http
            ),
            prompt=["You report the weather."],
            tools=[WEATHER],
            max_tool_rounds=ROUNDS,
        )

        async def with_tether() -> tuple[float, float]:
            session = Session()
            wall, cpu = _timed()
            async for event in agent.send(session, "Weather in Oslo, ten times?"):
                reduce(session, event)
            elapsed = time.perf_counter() - wall, time.process_time() - cpu
            assert event["type"] == "done", event
            return elapsed

        async def with_httpx() -> tuple[float, float]:
            wall, cpu = _timed()
            for url, content in sent:
                async with http.stream("POST", url, content=content, headers=headers) as response:
                    async for _ in response.aiter_bytes():
                        pass
            return time.perf_counter() - wall, time.process_time() - cpu

        async def with_httpx_json() -> tuple[float, float]:
            """The least a plain-httpx caller does to use the stream: lines, then JSON."""
            wall, cpu = _timed()
            for url, content in sent:
                async with http.stream("POST", url, content=content, headers=headers) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: {"):
                            json.loads(line[6:])
            return time.perf_counter() - wall, time.process_time() - cpu

        runs: dict[str, list[tuple[float, float]]] = {"tether": [], "bytes": [], "json": []}
        variants = [("tether", with_tether), ("bytes", with_httpx), ("json", with_httpx_json)]
        for _, run in variants:
            await run()
        for _ in range(LOOP_RUNS):  # interleaved, so drift hits all alike
            for name, run in variants:
                runs[name].append(await run())

    def ms(name: str, i: int) -> float:
        return statistics.median(v[i] for v in runs[name]) * 1e3

    rows = [
        ("plain httpx, same 10 requests, bytes only", "bytes"),
        ("plain httpx, same 10 requests, lines + JSON", "json"),
        ("tether agent turn (parse, loop, tools)", "tether"),
    ]
    print(f"   {'':<44}{'wall':>10}{'cpu':>10}")
    for label, name in rows:
        print(f"   {label:<44}{ms(name, 0):>8.2f}ms{ms(name, 1):>8.2f}ms")
    for base_name in ("bytes", "json"):
        print(
            f"   tether / {base_name:<6} {ms('tether', 0) / ms(base_name, 0):.2f}× wall, "
            f"{ms('tether', 1) / ms(base_name, 1):.2f}× cpu   (target ≤ 1.2× of bytes only)"
        )


async def bedrock_per_event(base: str) -> None:
    """Bedrock against the plain way to read the same body: httpx's bytes through botocore's
    own event stream decoder (CRC-checked, as ours) and `json.loads` of each payload — what any
    reader must do to get the answer out. Signing (botocore SigV4) is once per request and is
    included in chat()."""
    from botocore.credentials import Credentials as AWSKeys
    from botocore.eventstream import EventStreamBuffer

    print(f"1b. Bedrock, cost per event stream message ({EVENTS:,} per response, median of {RUNS})")
    print(
        f"   {'':<18}{'raw wall':>10}{'raw cpu':>10}{'decode loop':>13}{'chat() cpu':>12}"
        f"{'ratio':>8}{'decode only':>13}{'ours only':>11}{'ratio':>8}"
    )
    async with httpx.AsyncClient(timeout=60) as http:
        client = BedrockClient(
            "bench",
            base_url=f"{base}/{EVENTS}/bedrock",
            region="us-east-1",
            aws_credentials=AWSKeys("AKIDBENCH", "secret"),
            http_client=http,
        )
        url = client.url(REQUEST)
        content = client.encode(REQUEST)

        async def floor(decode: bool) -> tuple[float, float]:
            wall, cpu = _timed()
            async with http.stream("POST", url, content=content) as response:
                buffer = EventStreamBuffer()
                async for piece in response.aiter_bytes():
                    if decode:
                        buffer.add_data(piece)
                        for message in buffer:
                            json.loads(message.payload)
            return time.perf_counter() - wall, time.process_time() - cpu

        async def adapter() -> tuple[float, float]:
            wall, cpu = _timed()
            async for chunk in client.chat(REQUEST):
                if chunk["type"] == "finish":
                    break
            return time.perf_counter() - wall, time.process_time() - cpu

        await floor(True)
        await adapter()
        raw, plain, ours = [], [], []
        for _ in range(RUNS):
            raw.append(await floor(False))
            plain.append(await floor(True))
            ours.append(await adapter())
        body = b"".join(bedrock_body(EVENTS))
        pieces = [body[i : i + 4096] for i in range(0, len(body), 4096)]
        alone_plain, alone_ours = [], []
        for _ in range(RUNS):
            start = time.process_time()
            buffer = EventStreamBuffer()
            for piece in pieces:
                buffer.add_data(piece)
                for message in buffer:
                    json.loads(message.payload)
            alone_plain.append(time.process_time() - start)
            start = time.process_time()
            decoder, parser = EventStreamDecoder(), BedrockStream()
            for piece in pieces:
                for event in decoder.feed(piece):
                    parser.handle(event)
            decoder.flush()
            parser.finish()
            alone_ours.append(time.process_time() - start)

    def per(values: list[float]) -> float:
        return statistics.median(values) / EVENTS * 1e6

    raw_wall, raw_cpu = per([w for w, _ in raw]), per([c for _, c in raw])
    plain_cpu, chat_cpu = per([c for _, c in plain]), per([c for _, c in ours])
    only_plain, only_ours = per(alone_plain), per(alone_ours)
    print(
        f"   {'bedrock':<18}{raw_wall:>8.2f}µs{raw_cpu:>8.2f}µs{plain_cpu:>11.2f}µs"
        f"{chat_cpu:>10.2f}µs{chat_cpu / plain_cpu:>7.2f}×{only_plain:>11.2f}µs"
        f"{only_ours:>9.2f}µs{only_ours / only_plain:>7.2f}×   (target ≤ 1.2× the decode loop)"
    )


async def main(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    await per_event(base)
    await bedrock_per_event(base)
    await tool_loop(base)


if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    port_out = ctx.Queue()
    server = ctx.Process(target=_server_main, args=(port_out,), daemon=True)
    server.start()
    try:
        asyncio.run(main(port_out.get(timeout=30)))
    finally:
        server.terminate()
        server.join()
