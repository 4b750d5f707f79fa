"""`tether.run_events`: every event a run records is a kind of the one vocabulary, its data has
the keys its payload type names, and mypy refuses a payload of the wrong shape."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

from tether import define_tool
from tether import run_events as rv
from tether.lab import Runtime
from tether.testing import script_client
from tether.workflows import WorkflowContext

PAYLOADS: dict[str, Any] = {
    rv.AGENT_STARTED: rv.AgentStartedData,
    rv.AGENT_TEXT_DELTA: rv.AgentTextDeltaData,
    rv.AGENT_TOOL_CALL: rv.AgentToolCallData,
    rv.AGENT_TOOL_RESULT: rv.AgentToolResultData,
    rv.AGENT_MESSAGES_COMMITTED: rv.AgentMessagesCommittedData,
    rv.AGENT_WARNING: rv.AgentWarningData,
    rv.AGENT_FINISHED: rv.AgentFinishedData,
    rv.AGENT_FAILED: rv.AgentFailedData,
    rv.MODEL_CALL_STARTED: rv.ModelCallStartedData,
    rv.MODEL_CALL_FINISHED: rv.ModelCallFinishedData,
    rv.MODEL_CALL_FAILED: rv.ModelCallFailedData,
}


def test_the_kinds_are_the_literal_type_and_the_union_members() -> None:
    assert typing.get_args(rv.RunEventKind) == rv.RUN_EVENT_KINDS
    members = typing.get_args(rv.RunEventBody)
    tags = [k for m in members for k in typing.get_args(typing.get_type_hints(m)["type"])]
    assert sorted(tags) == sorted(rv.RUN_EVENT_KINDS)


async def test_every_event_a_run_records_is_of_the_vocabulary_with_its_payload_keys() -> None:
    lookup = define_tool(
        name="lookup",
        description="Look a word up",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda args, ctx: "found",
    )
    client = script_client(
        [{"tool_use": [{"name": "lookup", "input": {"q": "x"}}]}, {"text": "the answer"}]
    )
    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(id="a", model=client, tools=[lookup])

    async def run(value: str, ctx: WorkflowContext[str]) -> str:
        async def step() -> str:
            return value.upper()

        return await ctx.step("upper", step)

    flow = lab.create_workflow("flow", run)
    episode = agent.run(user="hi")
    await episode.result
    workflow_run = flow.run("x")
    await workflow_run.result
    await lab.wait_idle()
    seen: set[str] = set()
    for run_id in (episode.run_id, workflow_run.workflow_run_id):
        for event in await lab.run_store.events(run_id):
            assert event["type"] in rv.RUN_EVENT_KINDS, event["type"]
            seen.add(event["type"])
            shape = PAYLOADS.get(event["type"])
            if shape is not None:
                keys = set(event["data"])
                assert shape.__required_keys__ <= keys <= set(shape.__annotations__), event
    assert {rv.AGENT_TOOL_CALL, rv.AGENT_FINISHED, rv.MODEL_CALL_FINISHED} <= seen
    assert {rv.WORKFLOW_STARTED, rv.WORKFLOW_STEP_FINISHED, rv.WORKFLOW_FINISHED} <= seen
    await lab.aclose()


def test_mypy_checks_an_emitted_payload_and_narrows_a_read_one(tmp_path: Path) -> None:
    user = tmp_path / "producer.py"
    user.write_text(
        textwrap.dedent(
            """
            from tether.lab._recorder import RunRecorder
            from tether.run_events import AGENT_TOOL_CALL, AGENT_TEXT_DELTA, typed
            from tether.stores.run_store import RunEvent

            def produce(recorder: RunRecorder) -> None:
                recorder.emit({"type": AGENT_TEXT_DELTA, "data": {"text": "ok"}})
                recorder.emit({"type": AGENT_TOOL_CALL, "data": {"id": "1", "nam": "x"}})

            def read(event: RunEvent) -> str:
                body = typed(event)
                if body["type"] == AGENT_TOOL_CALL:
                    return body["data"]["name"]
                return body["data"]["nothing"]
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    lines = [line for line in out.splitlines() if ": error:" in line]
    # the wrong payload (line 8) and the key no member has (line 14); the rest type-checks
    assert {line.split(":")[1] for line in lines} == {"8", "14"}, out
