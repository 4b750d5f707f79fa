"""A Toolkit in the lab: a lab agent takes it as its `tools=` (it is a ToolProvider), and what
depends on the run — here, one workspace per memory scope — is read from each call's context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tether.lab import Runtime
from tether.testing import script_client
from tether.toolkits import Toolkit, file_tools, shell_tool


def read(path: str) -> dict[str, Any]:
    return {"tool_use": [{"name": "read_file", "input": {"path": path}}]}


async def test_a_lab_agent_gets_one_workspace_per_memory_scope(tmp_path: Path) -> None:
    for scope in ("alice", "bob"):
        (tmp_path / scope).mkdir()
        (tmp_path / scope / "notes.txt").write_text(f"notes of {scope}")
    client = script_client([read("notes.txt"), {"text": "ok"}, read("notes.txt"), {"text": "ok"}])
    lab = Runtime(store="memory", version=False, defaults={"model": client})
    try:
        tools = file_tools(lambda ctx: tmp_path / ctx.session_id) + shell_tool(
            lambda ctx: tmp_path / ctx.session_id, isolation="none", network=True, approval=False
        )
        assert isinstance(tools, Toolkit)
        agent = lab.create_agent(id="keeper", system_prompt="Keep notes.", tools=tools)
        assert agent.uses_tool_provider  # the lab sees a ToolProvider
        outputs = []
        for scope in ("alice", "bob"):
            result = await agent.run(memory_scope=scope, user="read my notes").result
            results = [
                part
                for message in result.new_messages
                for part in message["content"]
                if part["type"] == "tool_result"
            ]
            outputs.append(results[0]["output"])
        assert outputs == ["notes of alice", "notes of bob"]
        offered = [t["name"] for t in client.calls[0]["tools"]]
        assert offered[:5] == ["read_file", "list_dir", "glob", "grep", "shell"]
    finally:
        await lab.aclose()


async def test_toolkit_records_are_events_on_the_tool_span(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tether import Session, create_agent
    from tether.otel import OtelSink
    from tether.testing import collect

    (tmp_path / "a.txt").write_text("hello")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = script_client([read("a.txt"), {"text": "ok"}])
    agent = create_agent(llm=client, tools=[*file_tools(tmp_path)], trace=OtelSink(provider))
    await collect(agent, Session(), "read it")
    provider.shutdown()
    span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool read_file")
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert events == [
        (
            "tether.tool",
            {
                "tether.name": "file:read",
                "tether.path": "a.txt",
                "tether.bytes": 5,
                "tether.size": 5,
            },
        )
    ]
