"""Harness overhead of the tool-call loop, with the scripted client (no network).

    .venv/bin/python bench/loop_overhead.py

Prints medians of:
- µs per tool round: one 10-round turn (one trivial `add` tool) per run, divided by 10, and as
  a ratio to the floor measured in the same run: a hand-written loop over the same scripted
  client (the request, the stream, the tool called directly, its result JSON-encoded, the
  messages appended, one event dict per step; no checks, guardrails or tracing). Target
  (issue 23): at most 2x;
- µs per streamed text chunk: one turn of 2,000 chunks, minus a 1-chunk turn, per chunk;
- reduce() over one turn's events on a 10-message and a 10,000-message session;
- bytes held by a finished 10-round session against the size of its JSON.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time
from typing import Any

from tether import Session, create_agent, define_tool, reduce
from tether.testing import ScriptClient, script_client

ADD = define_tool(
    name="add",
    description="Add two integers",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    execute=lambda i: i["a"] + i["b"],
)
ROUNDS = 10


def tool_turns() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"tool_use": [{"name": "add", "input": {"a": i, "b": 1}, "id": f"c{i}"}]}
        for i in range(ROUNDS - 1)
    ]
    turns.append({"text": "done"})
    return turns


async def one_tool_run(client: ScriptClient | None = None) -> tuple[float, Session, list[Any]]:
    # max_tool_rounds=ROUNDS: the default bound (8) would end the turn before the floor's
    # 9 tool calls and 10 model calls; same_work() checks both do the same.
    agent = create_agent(
        llm=client or script_client(tool_turns()),
        prompt=["You add."],
        tools=[ADD],
        max_tool_rounds=ROUNDS,
    )
    session = Session()
    events: list[Any] = []
    start = time.perf_counter()
    async for event in agent.send(session, "count"):
        reduce(session, event)
        events.append(event)
    return time.perf_counter() - start, session, events


def work_of(client: ScriptClient, events: list[Any]) -> tuple[int, int]:
    """(model requests, tool calls) of a run: the requests the client was sent, the
    `tool_result` events of the calls made."""
    return len(client.calls), sum(1 for e in events if e["type"] == "tool_result")


async def same_work() -> None:
    """The harness's turn and the floor do the same model requests and tool calls."""
    client, floor_client = script_client(tool_turns()), script_client(tool_turns())
    _, _, events = await one_tool_run(client)
    floor_events: list[Any] = []
    await hand_written_run(floor_events, floor_client)
    harness, floor = work_of(client, events), work_of(floor_client, floor_events)
    if harness != floor or floor != (ROUNDS, ROUNDS - 1):
        raise SystemExit(
            f"the harness's turn and the floor differ in work: (model requests, tool calls) "
            f"{harness} vs {floor}, expected {(ROUNDS, ROUNDS - 1)}"
        )


async def hand_written_run(
    events: list[Any] | None = None, client: ScriptClient | None = None
) -> float:
    """The floor: the loop a user writes by hand around the same client."""
    client = client or script_client(tool_turns())
    tools = {"add": ADD}
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    if events is None:
        events = []
    start = time.perf_counter()
    while True:
        request: Any = {"model": client.model, "system": [], "messages": list(messages)}
        request["tools"] = [ADD.spec]
        finish: Any = None
        async for chunk in client.chat(request):
            if chunk["type"] == "finish":
                finish = chunk
            else:
                events.append(chunk)  # type: ignore[arg-type]
        messages.append({"role": "assistant", "content": finish["content"]})
        calls = [p for p in finish["content"] if p["type"] == "tool_call"]
        if not calls:
            events.append({"type": "done", "text": "", "usage": finish["usage"]})
            break
        results = []
        for part in calls:
            events.append({"type": "tool_use", **part})
            execute: Any = tools[part["name"]].execute
            output = execute(part["input"])
            text = json.dumps(output)
            result = {"type": "tool_result", "id": part["id"], "name": part["name"]}
            result.update(output=text, is_error=False)
            events.append(result)
            results.append(result)
        messages.append({"role": "tool", "content": results})
    return time.perf_counter() - start


async def chunk_run(n: int) -> float:
    agent = create_agent(llm=script_client([{"text": ["x"] * n}]))
    session = Session()
    start = time.perf_counter()
    async for event in agent.send(session, "stream"):
        reduce(session, event)
    return time.perf_counter() - start


async def realistic_session() -> Session:
    lookup = define_tool(name="lookup", execute=lambda i: "r" * 300)
    turns: list[dict[str, Any]] = [
        {"text": "t" * 200, "tool_use": [{"name": "lookup", "input": {"q": f"query {i}"}}]}
        for i in range(ROUNDS - 1)
    ]
    turns.append({"text": "a" * 200})
    agent = create_agent(llm=script_client(turns), tools=[lookup])
    session = Session()
    async for event in agent.send(session, "research"):
        reduce(session, event)
    return session


def deep_size(obj: Any, seen: set[int]) -> int:
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list):
        size += sum(deep_size(v, seen) for v in obj)
    return size


def reduce_cost(prefill: int, events: list[Any], repeats: int = 200) -> float:
    base = [
        {"role": "user", "content": [{"type": "text", "text": f"m{i}"}]} for i in range(prefill)
    ]
    samples = []
    for _ in range(repeats):
        session = Session(messages=list(base))
        start = time.perf_counter()
        for event in events:
            reduce(session, event)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def main() -> None:
    await same_work()
    for _ in range(20):  # warm up
        await one_tool_run()
    gc.collect()
    samples, floor = [], []
    for _ in range(300):  # interleaved, so that load on the machine falls on both alike
        samples.append((await one_tool_run())[0])
        floor.append(await hand_written_run())
    per_round = statistics.median(samples) / ROUNDS * 1e6
    floor_round = statistics.median(floor) / ROUNDS * 1e6
    ratios = sorted(a / b for a, b in zip(samples, floor, strict=True))
    _, session, events = await one_tool_run()

    big = [await chunk_run(2000) for _ in range(30)]
    small = [await chunk_run(1) for _ in range(30)]
    per_chunk = (statistics.median(big) - statistics.median(small)) / 1999 * 1e6

    r10 = reduce_cost(10, events)
    r10k = reduce_cost(10_000, events)

    held = deep_size(session.messages, set()) + deep_size(session.memory, set())
    json_size = len(session.to_json().encode())
    realistic = await realistic_session()
    held_r = deep_size(realistic.messages, set())
    json_r = len(realistic.to_json().encode())

    print(f"tool round (10 rounds/run, median of 300): {per_round:8.1f} µs per round")
    print(f"hand-written loop round (the floor):       {floor_round:8.1f} µs per round")
    print(
        f"harness / floor: median {statistics.median(ratios):.2f} (middle 80%: "
        f"{ratios[len(ratios) // 10]:.2f}-{ratios[-1 - len(ratios) // 10]:.2f}; target <= 2)"
    )
    print(f"streamed text chunk:                       {per_chunk:8.2f} µs per chunk")
    print(f"reduce over one turn ({len(events)} events), 10 msgs:   {r10:8.1f} µs")
    print(f"reduce over one turn ({len(events)} events), 10k msgs:  {r10k:8.1f} µs")
    print(
        f"finished 10-round session: {held} bytes in memory, {json_size} bytes of JSON "
        f"({held / json_size:.2f}x)"
    )
    print(
        f"10-round session, 300-byte tool outputs, 200-char replies: {held_r} bytes in memory, "
        f"{json_r} bytes of JSON ({held_r / json_r:.2f}x)"
    )


if __name__ == "__main__":
    asyncio.run(main())
