"""A lab world for the experiment tests: an echoing agent, a tool-calling agent, a judge and a
durable workflow, all on scripted models, on in-memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether import define_tool
from tether.lab import Runtime
from tether.testing import script_client
from tether.workflows import WorkflowContext


def last_text(request: Any) -> str:
    for message in reversed(request["messages"]):
        for part in message["content"]:
            if part["type"] == "text" and message["role"] == "user":
                return str(part["text"])
    return ""


def echo(request: Any) -> dict[str, Any]:
    """Echoes the user; 'fail' fails the provider call, 'json' answers with a JSON object."""
    text = last_text(request)
    if text == "fail":
        from tether.errors import LLMError

        return {"error": LLMError("the provider is down", provider="script")}
    if text == "json":
        return {"text": '{"answer": 42}'}
    return {"text": f"echo: {text}", "usage": {"input_tokens": 3, "output_tokens": 2}}


def tooler(request: Any) -> dict[str, Any]:
    """Calls `lookup` with the user's text, then answers with what it returned."""
    messages = request["messages"]
    results = [p for p in messages[-1]["content"] if p["type"] == "tool_result"]
    if results:
        return {"text": f"found {results[0]['output']}"}
    return {"tool_use": [{"name": "lookup", "input": {"q": last_text(request), "n": 1}}]}


def judge(request: Any) -> dict[str, Any]:
    """Passes an answer that says 'echo'."""
    text = last_text(request)
    answer = text.split("Answer:\n", 1)[1] if "Answer:\n" in text else ""
    ok = "echo" in answer
    return {"text": json.dumps({"passed": ok, "reason": "says echo" if ok else "no echo"})}


class Counter:
    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.model = script_client([echo] * 500)
        """The runtime's default model (its `.calls` are the requests it was sent)."""

    def hit(self, key: str) -> None:
        self.calls[key] = self.calls.get(key, 0) + 1


def make_lab(store: str, counter: Counter) -> Runtime:
    lab = Runtime(store=store, version="1.0", defaults={"model": counter.model})
    lab.create_agent(id="echo", system_prompt="Echo.")
    lookup = define_tool(
        name="lookup",
        description="Look up",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda args: f"<{args['q']}>",
    )
    lab.create_agent(id="tooler", tools=[lookup], model=script_client([tooler] * 200))
    lab.create_agent(id="judge", model=script_client([judge] * 200))

    async def pipeline(input: Any, ctx: WorkflowContext[Any]) -> Any:
        async def first() -> str:
            counter.hit(f"first:{input['text']}")
            return str(input["text"]).upper()

        async def second(value: str) -> dict[str, Any]:
            counter.hit(f"second:{input['text']}")
            if input.get("fail_once") and counter.calls[f"second:{input['text']}"] == 1:
                raise RuntimeError("second step broken once")
            return {"shout": value}

        value = await ctx.step("first", first)
        return await ctx.step("second", lambda: second(value))

    lab.create_workflow("pipeline", pipeline)
    return lab


@pytest.fixture
def counter() -> Counter:
    return Counter()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def lab(
    request: pytest.FixtureRequest, tmp_path: Path, counter: Counter
) -> AsyncIterator[Runtime]:
    """The runtime on each store: an experiment's record is the same on all three."""
    if request.param == "postgres":
        from tests.postgres_server import postgres_url

        store = postgres_url()
    elif request.param == "sqlite":
        store = f"sqlite:///{tmp_path / 'evals.db'}"
    else:
        store = "memory"
    runtime = make_lab(store, counter)
    yield runtime
    await runtime.aclose()
