"""The Runtime: lazy stores, store URLs, owned clients, cancellation across agent tools, and
recording that never decides whether work succeeds."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import tether.lab._host as host_module
from tether import AbortedError, RunContext, define_tool
from tether.errors import ConfigError, StoreError
from tether.lab import Runtime
from tether.stores import InMemoryRunStore, NewRunEvent, RunStatus
from tether.testing import ScriptClient, script_client
from tether.workflows import WorkflowContext

from .conftest import scripted


async def test_declaring_things_touches_no_disk_until_the_first_episode(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "tether.db"
    lab = Runtime(store=f"sqlite:///{db}", version=False)
    agent = lab.create_agent(id="a", model=scripted({"text": "x"}))

    async def run(input: Any, ctx: Any) -> Any:
        return input

    lab.create_workflow("wf", run)
    lab.create_template(source="hi")
    assert not db.exists()
    await agent.run(user="hi").result
    assert db.is_file()
    await lab.aclose()


async def test_the_default_store_is_a_file_under_dot_tether(tmp_path: Path) -> None:
    lab = Runtime(version=False, root=tmp_path)
    await lab.create_agent(id="a", model=scripted({"text": "x"})).run(user="q").result
    assert (tmp_path / ".tether" / "tether.db").is_file()
    await lab.aclose()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://x", "unknown store URL"),
        ("sqlite://relative.db", "sqlite:///relative/path.db"),
    ],
)
async def test_a_bad_store_url_is_a_clear_config_error(url: str, message: str) -> None:
    lab = Runtime(store=url, version=False)
    agent = lab.create_agent(id="a", model=scripted({"text": "x"}))
    with pytest.raises(ConfigError, match=message):
        agent.run(user="q")
    await lab.aclose()


def test_unknown_runtime_defaults_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'modle' \(did you mean 'model'\?\)"):
        Runtime(defaults={"modle": "openai:gpt-4o"})


class CountingClient(ScriptClient):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_clients_built_from_model_strings_are_shared_and_closed_by_the_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[tuple[dict[str, Any], CountingClient]] = []

    def fake_client_from_config(config: dict[str, Any]) -> CountingClient:
        client = CountingClient([{"text": "ok"}] * 4, model=config["model"])
        built.append((dict(config), client))
        return client

    monkeypatch.setattr(host_module, "client_from_config", fake_client_from_config)
    lab = Runtime(store="memory", version=False, defaults={"model": "openai:gpt-4o"})
    a = lab.create_agent(id="a")
    b = lab.create_agent(id="b")
    await a.run(user="1").result
    await b.run(user="2").result
    await a.run(user="3", max_retries=0).result
    assert [c for c, _ in built] == [
        {"model": "openai:gpt-4o"},
        {"model": "openai:gpt-4o", "max_retries": 0},
    ]
    given = CountingClient([{"text": "mine"}])
    await lab.create_agent(id="c", model=given).run(user="4").result
    await lab.aclose()
    await lab.aclose()
    assert [client.closed for _, client in built] == [1, 1]
    assert given.closed == 0  # a client passed in stays the caller's


async def test_cancel_before_the_episode_starts(lab: Runtime) -> None:
    client = scripted({"text": "never"})
    agent = lab.create_agent(id="a", model=client)
    handle = agent.run(memory_scope="s", user="q")
    handle.cancel()
    with pytest.raises(AbortedError):
        await handle.result
    assert client.calls == []
    assert await lab.message_store.load("s") == []
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None and info.status == "cancelled"


async def test_aborting_the_outer_turn_cancels_an_inner_agent_episode(lab: Runtime) -> None:
    started = asyncio.Event()

    async def hang(value: Any, ctx: RunContext) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    inner = lab.create_agent(
        id="inner",
        model=scripted({"tool_use": [{"name": "hang", "input": {}}]}),
        tools=[define_tool(name="hang", description="Hangs", execute=hang)],
    )
    outer = lab.create_agent(
        id="outer",
        model=scripted({"tool_use": [{"name": "inner", "input": {"user": "go"}}]}),
        tools=[lab.tool_from_agent(inner, description="Inner")],
    )
    handle = outer.run(user="start")
    await started.wait()
    handle.cancel()
    with pytest.raises(AbortedError):
        await handle.result
    await lab.wait_idle()
    statuses = {r.name: r.status for r in await lab.run_store.list_runs(kind="agent")}
    assert statuses == {"outer": "cancelled", "inner": "cancelled"}


async def test_a_workflow_tool_called_inside_a_workflow_nests_under_it(lab: Runtime) -> None:
    async def child(input: Any, ctx: WorkflowContext[Any]) -> Any:
        return {"parent": ctx.parent_run_id}

    tool = lab.tool_from_workflow(lab.create_workflow("child", child), description="Child")
    agent = lab.create_agent(
        id="a",
        model=scripted({"tool_use": [{"name": "child", "input": {}}]}, {"text": "done"}),
        tools=[tool],
    )

    async def parent(input: Any, ctx: WorkflowContext[Any]) -> str:
        async def ask() -> str:
            return (await agent.run(user="go").result).text

        return await ctx.step("ask", ask)

    handle = lab.create_workflow("parent", parent).run({})
    assert await handle.result == "done"
    [child_run] = await lab.workflow_store.list_runs(workflow_id="child")
    assert child_run.parent_run_id == handle.workflow_run_id
    assert child_run.parent_step_id == "ask"
    assert child_run.output == {"parent": handle.workflow_run_id}


class BrokenRunStore(InMemoryRunStore):
    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        raise OSError("disk full")

    async def finish_run(self, run_id: str, status: RunStatus, **options: Any) -> int:
        if options.get("events"):  # a run's last events go with its end
            raise OSError("disk full")
        return await super().finish_run(run_id, status, **options)


async def test_a_run_store_that_cannot_take_the_events_fails_the_episode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A gap in a run's record would hand a stream reader a different story than the one that
    # happened (issue 15): the run fails instead, and says why.
    lab = Runtime(store="memory", run_store=BrokenRunStore(), version=False)
    agent = lab.create_agent(id="a", model=script_client([{"text": "fine, but unrecorded"}]))
    with caplog.at_level(logging.ERROR, logger="tether.lab"):
        handle = agent.run(memory_scope="s", user="q")
        with pytest.raises(StoreError, match="could not be recorded"):
            await handle.result
    assert "disk full" in caplog.text
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None and info.status == "failed"
    assert info.error is not None and "disk full" in info.error
    await lab.aclose()


async def test_aclose_waits_for_title_workflows(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def slow_title(input: Any, ctx: Any) -> Any:
        await release.wait()
        return {"title": "Late but stored"}

    lab = Runtime(store="memory", version=False)
    agent = lab.create_agent(
        id="a", model=scripted({"text": "x"}), title_workflow=lab.create_workflow("t", slow_title)
    )
    await agent.run(memory_scope="s", user="q").result
    store = lab.message_store
    closing = asyncio.ensure_future(lab.aclose())
    await asyncio.sleep(0)
    assert not closing.done()
    release.set()
    await closing
    assert await store.get_title("s") == "Late but stored"


async def test_cancelling_aclose_ends_a_title_workflow_that_never_finishes(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def endless_title(input: Any, ctx: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    db = tmp_path / "lab.db"
    lab = Runtime(store=f"sqlite:///{db}", version=False)
    agent = lab.create_agent(
        id="a",
        model=scripted({"text": "x"}),
        title_workflow=lab.create_workflow("t", endless_title),
    )
    await agent.run(memory_scope="s", user="q").result
    await started.wait()
    closing = asyncio.ensure_future(lab.aclose())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    # The runtime is closed all the same, and the title run says how it ended.
    with pytest.raises(ConfigError, match="closed"):
        lab.message_store  # noqa: B018
    await lab.aclose()  # idempotent: nothing left to wait for
    again = Runtime(store=f"sqlite:///{db}", version=False)
    [title_run] = await again.workflow_store.list_runs(workflow_id="t")
    assert title_run.status == "cancelled"
    assert await again.message_store.get_title("s") is None
    await again.aclose()


class StepEventsLostRunStore(InMemoryRunStore):
    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        if any(e["type"] == "workflow_step_finished" for e in events):
            raise OSError("disk full")
        return await super().append_events(run_id, events, lease=lease)


async def test_a_workflow_event_the_run_store_cannot_take_fails_the_run() -> None:
    lab = Runtime(store="memory", run_store=StepEventsLostRunStore(), version=False)
    ran: list[str] = []

    def step(name: str) -> Callable[[], Awaitable[str]]:
        async def run() -> str:
            ran.append(name)
            return name

        return run

    async def flow(input: Any, ctx: WorkflowContext[Any]) -> str:
        await ctx.step("one", step("one"))
        await ctx.step("two", step("two"))
        return "done"

    handle = lab.create_workflow("flow", flow).run({})
    with pytest.raises(StoreError, match="workflow_step_finished could not be recorded"):
        await handle.result
    assert ran == ["one"]  # nothing ran past the event that could not be recorded
    record = await lab.workflow_store.get_run(handle.workflow_run_id)
    assert record is not None and record.status == "failed"
    info = await lab.run_store.get_run(handle.workflow_run_id)
    assert info is not None and info.status == "failed"
    await lab.aclose()
