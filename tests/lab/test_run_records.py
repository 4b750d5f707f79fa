"""Run records: the events an episode writes to the RunStore, live listeners, tags with
provenance, and workflow runs recorded next to episodes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tether import define_tool
from tether.errors import LLMError, StoreError
from tether.lab import Runtime
from tether.stores import (
    EventBatch,
    InMemoryRunStore,
    NewRunEvent,
    RunEvent,
    RunInfo,
    RunStatus,
)
from tether.stores.run_store import TurnEnds
from tether.testing import paced_client
from tether.workflows import WorkflowContext

from .conftest import event_types, scripted

SHA = "0123456789abcdef0123456789abcdef01234567"


async def test_a_run_records_started_deltas_commits_and_finished(lab: Runtime) -> None:
    live: list[RunEvent] = []
    unsubscribe = lab.subscribe(live.append)
    client = scripted(
        {"tool_use": [{"name": "add", "input": {"a": 1, "b": 2}}]},
        {"text": ["The sum ", "is 3."], "usage": {"input_tokens": 7, "output_tokens": 4}},
    )
    add = define_tool(name="add", description="Add", execute=lambda v: v["a"] + v["b"])
    agent = lab.create_agent(id="calc", model=client, tools=[add])
    result = await agent.run(memory_scope="m", user="1+2?", tags=["demo"]).result
    events = await lab.run_store.events(result.run_id)
    assert [e["type"] for e in events] == [
        "agent_started",
        "model_call_started",
        "model_call_finished",
        "agent_tool_call",
        "agent_tool_result",
        "agent_messages_committed",
        "model_call_started",
        "agent_text_delta",
        "agent_text_delta",
        "model_call_finished",
        "agent_messages_committed",
        "agent_finished",
    ]
    started, _, _, call, res, first, _, d1, d2, _, second, finished = (e["data"] for e in events)
    assert started["agent_id"] == "calc" and started["memory_scope"] == "m"
    assert started["memory_scope_generated"] is False
    assert started["tags"] == ["demo"]
    assert call == {"id": "call_1", "name": "add", "input": {"a": 1, "b": 2}}
    started_at = res.pop("started_at")
    assert res == {"id": "call_1", "name": "add", "output": "3", "is_error": False}
    assert isinstance(started_at, float) and started_at <= events[4]["at"]
    assert (first["start"], first["count"]) == (0, 3)
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "tool"]
    assert (d1["text"], d2["text"]) == ("The sum ", "is 3.")
    assert (second["start"], second["count"]) == (3, 1)
    assert finished["text"] == "The sum is 3." and finished["turns"] == 2
    assert finished["usage"]["output_tokens"] == 5
    # Live listeners saw the same events, numbered the same way, before they were stored.
    assert [(e["seq"], e["type"]) for e in live] == [(e["seq"], e["type"]) for e in events]
    unsubscribe()
    seen = len(live)
    await lab.create_agent(id="quiet", model=scripted({"text": "x"})).run(user="q").result
    assert len(live) == seen
    info = await lab.run_store.get_run(result.run_id)
    assert info is not None
    assert (info.kind, info.name, info.status, info.memory_scope) == (
        "agent",
        "calc",
        "completed",
        "m",
    )
    assert info.ended_at is not None and info.ended_at >= info.started_at


class CountingRunStore(InMemoryRunStore):
    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        self.appends += 1
        await asyncio.sleep(0)  # a store write takes a turn of the loop at least
        return await super().append_events(run_id, events, lease=lease)


async def test_thousands_of_text_deltas_are_stored_in_order_in_a_few_batched_writes() -> None:
    runs = CountingRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    chunks = [f"{i} " for i in range(3000)]
    agent = lab.create_agent(id="a", model=scripted({"text": chunks}))
    result = await agent.run(user="count").result
    events = await runs.events(result.run_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    deltas = [e["data"]["text"] for e in events if e["type"] == "agent_text_delta"]
    assert deltas == chunks
    assert "".join(deltas) == result.text
    # One write per batch, not one per token.
    assert runs.appends < 10
    await lab.aclose()


async def test_a_failed_run_records_the_error(lab: Runtime) -> None:
    agent = lab.create_agent(id="a", model=scripted({"error": LLMError("quota", provider="x")}))
    handle = agent.run(user="q")
    with pytest.raises(LLMError):
        await handle.result
    events = await lab.run_store.events(handle.run_id)
    assert events[-1]["type"] == "agent_failed"
    assert events[-1]["data"]["error"] == {"type": "LLMError", "message": "quota"}
    assert events[-1]["data"]["cancelled"] is False
    info = await lab.run_store.get_run(handle.run_id)
    assert info is not None and info.status == "failed" and info.error == "LLMError: quota"


class SlowStartRunStore(InMemoryRunStore):
    """Writes a run's summary, then takes a few turns of the loop to return (as a database
    write in a worker thread does)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()

    async def start_run(
        self, info: RunInfo, *, lease_ttl: float | None = None, lease: str | None = None
    ) -> None:
        await super().start_run(info, lease_ttl=lease_ttl, lease=lease)
        self.written.set()
        for _ in range(3):
            await asyncio.sleep(0)


async def test_an_episode_cancelled_while_its_run_is_being_created_is_recorded_cancelled() -> None:
    runs = SlowStartRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    agent = lab.create_agent(id="a", model=scripted({"text": "never"}))
    handle = agent.run(memory_scope="s", user="q")
    await runs.written.wait()
    handle.result.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle.result
    info = await runs.get_run(handle.run_id)
    assert info is not None and info.status == "cancelled"
    assert await event_types(lab, handle.run_id) == ["agent_failed"]
    assert await lab.message_store.load("s") == []
    await lab.aclose()


@pytest.mark.parametrize(
    ("last", "status"), [("agent_finished", "completed"), ("agent_failed", "failed")]
)
async def test_a_cancellation_while_the_run_is_being_closed_still_records_its_end(
    lab: Runtime, last: str, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = (
        [{"text": "answer"}]
        if last == "agent_finished"
        else [{"error": LLMError("x", provider="x")}]
    )
    agent = lab.create_agent(id="a", model=scripted(*turns))
    handles: list[Any] = []
    # A completed turn on SQLite ends in one write with its last records (finish_turn).
    ending = (
        "finish_turn"
        if isinstance(lab.run_store, TurnEnds) and status == "completed"
        else "finish_run"
    )
    finish = getattr(lab.run_store, ending)

    async def cancelled_while_finishing(*args: Any, **kwargs: Any) -> int | None:
        # The run's last events and its end are one write: cancel the episode while it runs.
        assert [e["type"] for e in kwargs["events"]][-1] == last
        handles[0].result.cancel()
        await asyncio.sleep(0)
        seq: int | None = await finish(*args, **kwargs)
        return seq

    monkeypatch.setattr(lab.run_store, ending, cancelled_while_finishing)
    handles.append(agent.run(memory_scope="s", user="q"))
    with pytest.raises(asyncio.CancelledError):
        await handles[0].result
    info = await lab.run_store.get_run(handles[0].run_id)
    assert info is not None and info.status == status
    assert (await event_types(lab, handles[0].run_id))[-1] == last


async def test_a_listener_that_raises_does_not_break_the_run(
    lab: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: RunEvent) -> None:
        raise RuntimeError("listener bug")

    lab.subscribe(broken)
    agent = lab.create_agent(id="a", model=scripted({"text": "fine"}))
    result = await agent.run(user="q").result
    assert result.text == "fine"
    assert await event_types(lab, result.run_id) == [
        "agent_started",
        "model_call_started",
        "agent_text_delta",
        "model_call_finished",
        "agent_messages_committed",
        "agent_finished",
    ]
    assert "listener bug" in caplog.text


def project(tmp_path: Path, *, version: str | None = "2.3.4", head: str | None = "branch") -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    if version is not None:
        (root / "pyproject.toml").write_text(
            f'[project]\nname = "proj"\nversion = "{version}"\n', encoding="utf-8"
        )
    if head is not None:
        git = root / ".git"
        (git / "refs" / "heads").mkdir(parents=True)
        if head == "branch":
            (git / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
            (git / "refs" / "heads" / "main").write_text(SHA + "\n", encoding="utf-8")
        elif head == "packed":
            (git / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
            (git / "packed-refs").write_text(
                f"# pack-refs with: peeled\n{SHA} refs/heads/main\n", encoding="utf-8"
            )
        else:
            (git / "HEAD").write_text(SHA + "\n", encoding="utf-8")
    return root / "pkg"


async def tags_of(lab: Runtime, **run: Any) -> list[str]:
    agent = lab.create_agent(id="a", model=scripted({"text": "x"}))
    result = await agent.run(user="q", **run).result
    info = await lab.run_store.get_run(result.run_id)
    assert info is not None
    return info.tags


@pytest.mark.parametrize("head", ["branch", "packed", "detached"])
async def test_runs_get_version_and_commit_tags_automatically(tmp_path: Path, head: str) -> None:
    lab = Runtime(store="memory", root=project(tmp_path, head=head))
    assert await tags_of(lab, tags=["nightly"]) == ["nightly", "version:2.3.4", f"commit:{SHA}"]
    await lab.aclose()


async def test_a_dynamic_version_is_the_installed_distributions(tmp_path: Path) -> None:
    # Like tether's own pyproject (hatch reads the version from a file): the project says only
    # that the build computes it, so the installed distribution is where it is known.
    from importlib import metadata

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "httpx"\ndynamic = ["version"]\n', encoding="utf-8"
    )
    lab = Runtime(store="memory", root=tmp_path)
    assert await tags_of(lab) == [f"version:{metadata.version('httpx')}"]
    await lab.aclose()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "no-such-dist-tether"\ndynamic = ["version"]\n', encoding="utf-8"
    )
    absent = Runtime(store="memory", root=tmp_path)
    assert await tags_of(absent) == []
    await absent.aclose()


async def test_a_given_tag_with_the_prefix_replaces_the_automatic_one(tmp_path: Path) -> None:
    lab = Runtime(store="memory", root=project(tmp_path))
    assert await tags_of(lab, tags=["version:custom"]) == ["version:custom", f"commit:{SHA}"]
    assert await tags_of(lab, tags=["commit:abc", "version:v"]) == ["commit:abc", "version:v"]
    await lab.aclose()


async def test_version_false_records_no_provenance_and_a_string_is_the_version(
    tmp_path: Path,
) -> None:
    off = Runtime(store="memory", root=project(tmp_path), version=False)
    assert await tags_of(off) == []
    await off.aclose()
    named = Runtime(store="memory", root=project(tmp_path / "b"), version="9.9")
    assert await tags_of(named) == ["version:9.9", f"commit:{SHA}"]
    await named.aclose()


async def test_a_worktree_git_file_is_followed(tmp_path: Path) -> None:
    main = tmp_path / "main" / ".git"
    (main / "refs" / "heads").mkdir(parents=True)
    (main / "refs" / "heads" / "feature").write_text(SHA, encoding="utf-8")
    worktree_git = main / "worktrees" / "wt"
    worktree_git.mkdir(parents=True)
    (worktree_git / "HEAD").write_text("ref: refs/heads/feature\n", encoding="utf-8")
    (worktree_git / "commondir").write_text("../..\n", encoding="utf-8")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {worktree_git}\n", encoding="utf-8")
    lab = Runtime(store="memory", root=wt)
    assert await tags_of(lab) == [f"commit:{SHA}"]
    await lab.aclose()


async def test_outside_a_project_there_is_nothing_to_tag(tmp_path: Path) -> None:
    lab = Runtime(store="memory", root=project(tmp_path, version=None, head=None))
    assert await tags_of(lab) == []
    await lab.aclose()


async def test_an_episode_inside_a_workflow_step_is_linked_to_it(lab: Runtime) -> None:
    agent = lab.create_agent(id="a", model=scripted({"text": "x"}, {"text": "y"}))

    async def run(input: str, ctx: WorkflowContext[str]) -> str:
        return await ctx.step("ask", lambda: _text(agent.run(user=input)))

    handle = lab.create_workflow("wf", run).run("q")
    await handle.result
    [episode] = await lab.run_store.list_runs(kind="agent")
    assert (episode.workflow_run_id, episode.step_id) == (handle.workflow_run_id, "ask")
    # A standalone call can link itself explicitly.
    result = await agent.run(user="q", workflow={"workflow_run_id": "wf-7", "step_id": None}).result
    info = await lab.run_store.get_run(result.run_id)
    assert info is not None and (info.workflow_run_id, info.step_id) == ("wf-7", None)


async def _text(handle: Any) -> str:
    return str((await handle.result).text)


async def test_workflow_runs_are_recorded_with_their_events(lab: Runtime) -> None:
    async def review(topic: str, ctx: WorkflowContext[str]) -> dict[str, Any]:
        papers = await ctx.step("search", lambda: [topic])
        return {"papers": papers}

    async def failing(topic: str, ctx: WorkflowContext[str]) -> None:
        raise ValueError("no papers")

    ok = lab.create_workflow("review", review).run("CRISPR")
    await ok.result
    bad = lab.create_workflow("failing", failing).run("x")
    with pytest.raises(ValueError):
        await bad.result
    info = await lab.run_store.get_run(ok.workflow_run_id)
    assert info is not None and (info.kind, info.name, info.status) == (
        "workflow",
        "review",
        "completed",
    )
    assert await event_types(lab, ok.workflow_run_id) == [
        "workflow_started",
        "workflow_step_started",
        "workflow_step_finished",
        "workflow_finished",
    ]
    failed = await lab.run_store.get_run(bad.workflow_run_id)
    assert failed is not None and failed.status == "failed"
    assert failed.error == "ValueError: no papers"


async def test_a_resumed_workflow_run_is_running_again_then_completed(lab: Runtime) -> None:
    attempts: list[int] = []

    async def flaky(topic: str, ctx: WorkflowContext[str]) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("transient")
        return "ok"

    workflow = lab.create_workflow("flaky", flaky)
    first = workflow.run("x")
    with pytest.raises(RuntimeError):
        await first.result
    failed = await lab.run_store.get_run(first.workflow_run_id)
    assert failed is not None and failed.status == "failed"
    assert await workflow.run(workflow_run_id=first.workflow_run_id).result == "ok"
    info = await lab.run_store.get_run(first.workflow_run_id)
    assert info is not None and (info.status, info.error) == ("completed", None)
    assert await event_types(lab, first.workflow_run_id) == [
        "workflow_started",
        "workflow_failed",
        "workflow_started",
        "workflow_finished",
    ]
    assert attempts == [1, 2]


class CommitCountingRunStore(InMemoryRunStore):
    def __init__(self) -> None:
        super().__init__()
        self.committed: dict[str, int] = {}

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        await asyncio.sleep(0)
        last = await super().append_events(run_id, events, lease=lease)
        self.committed[run_id] = last
        return last

    async def finish_run(self, run_id: str, status: RunStatus, **options: Any) -> int:
        # The run's last events are committed with its end.
        await asyncio.sleep(0)
        last = await super().finish_run(run_id, status, **options)
        self.committed[run_id] = last
        return last


async def test_listeners_see_only_committed_events_numbered_as_stored() -> None:
    runs = CommitCountingRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    checks: list[tuple[int, bool]] = []

    def listener(event: RunEvent) -> None:
        # Told after the commit: a reader of the store already finds the event, same number.
        checks.append((event["seq"], runs.committed.get(event["run_id"], 0) >= event["seq"]))

    lab.subscribe(listener)
    agent = lab.create_agent(id="a", model=scripted({"text": ["one ", "two ", "three"]}))
    result = await agent.run(user="q").result
    events = await runs.events(result.run_id)
    assert [seq for seq, _ in checks] == [e["seq"] for e in events]
    assert all(committed for _, committed in checks)
    await lab.aclose()


class FailingAppendRunStore(InMemoryRunStore):
    """Takes the run's summary and its first write of events, then fails every write."""

    def __init__(self, fail_after: int = 1) -> None:
        super().__init__()
        self.fail_after = fail_after
        self.appends = 0
        self.first_write = asyncio.Event()

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        self.appends += 1
        self.first_write.set()
        if self.appends > self.fail_after:
            raise StoreError("disk full")
        return await super().append_events(run_id, events, lease=lease)

    async def finish_run(self, run_id: str, status: RunStatus, **options: Any) -> int:
        if options.get("events"):  # the run's last events, written with its end
            self.appends += 1
            if self.appends > self.fail_after:
                raise StoreError("disk full")
        return await super().finish_run(run_id, status, **options)


async def test_a_failed_write_of_events_fails_the_run_instead_of_leaving_a_gap() -> None:
    runs = FailingAppendRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    live: list[RunEvent] = []
    lab.subscribe(live.append)
    gate = asyncio.Event()

    async def slow(value: Any) -> str:
        await gate.wait()
        return "done"

    tool = define_tool(name="wait", description="Wait", execute=slow)
    agent = lab.create_agent(
        id="a",
        model=scripted({"tool_use": [{"name": "wait", "input": {}}]}, {"text": "never"}),
        tools=[tool],
    )
    handle = agent.run(memory_scope="s", user="q")
    await runs.first_write.wait()
    gate.set()
    with pytest.raises(StoreError, match="could not be recorded"):
        await handle.result
    info = await runs.get_run(handle.run_id)
    assert info is not None and info.status == "failed"
    assert info.error is not None and "disk full" in info.error
    stored = await runs.events(handle.run_id)
    # Listeners saw exactly what the store holds: no event past the failed write.
    assert [(e["seq"], e["type"]) for e in live] == [(e["seq"], e["type"]) for e in stored]
    # The episode stopped: the second model request was never made.
    assert "never" not in [e["data"].get("text") for e in stored]
    await lab.aclose()


class FailingStartRunStore(InMemoryRunStore):
    async def start_run(self, info: RunInfo, **options: Any) -> None:
        raise StoreError("read-only database")


async def test_a_run_whose_start_cannot_be_recorded_fails_before_the_model_is_called() -> None:
    lab = Runtime(store="memory", run_store=FailingStartRunStore(), version=False)
    client = scripted({"text": "never"})
    agent = lab.create_agent(id="a", model=client)
    with pytest.raises(StoreError, match="read-only database"):
        await agent.run(memory_scope="s", user="q").result
    assert client.calls == []
    assert await lab.message_store.load("s") == []
    await lab.aclose()


class WriteCountingRunStore(InMemoryRunStore):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.runs_per_write: list[int] = []

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        self.writes += 1
        self.runs_per_write.append(1)
        await asyncio.sleep(0.002)  # a database write takes a while
        return await super().append_events(run_id, events, lease=lease)

    async def append_events_many(self, batches: Sequence[EventBatch]) -> list[int]:
        self.writes += 1
        self.runs_per_write.append(len(batches))
        await asyncio.sleep(0.002)
        return await super().append_events_many(batches)


async def test_the_events_of_runs_recording_at_once_share_their_writes() -> None:
    runs = WriteCountingRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    # Paced: each run streams for longer than the flush interval, so its events are written
    # while it runs (a run that ends sooner writes them all with its end, in one write).
    model = paced_client(lambda request: {"text": ["a ", "b ", "c"]}, delay=0.003)
    agent = lab.create_agent(id="a", model=model)
    results = await asyncio.gather(*(agent.run(user=f"q{i}").result for i in range(50)))
    for result in results:
        events = await runs.events(result.run_id)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[-1]["type"] == "agent_finished"
    total_batches = sum(runs.runs_per_write)
    # Every run wrote a few batches; most of them went to the store together with others'.
    assert runs.writes < total_batches / 5
    assert max(runs.runs_per_write) > 10
    await lab.aclose()


class OneBadRunStore(WriteCountingRunStore):
    """A shared write fails whenever the doomed run is in it; alone, only its batch fails."""

    def __init__(self) -> None:
        super().__init__()
        self.doomed: str | None = None

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        if run_id == self.doomed and any(e["type"] == "agent_text_delta" for e in events):
            raise StoreError("this run's disk is full")
        return await super().append_events(run_id, events, lease=lease)

    async def append_events_many(self, batches: Sequence[EventBatch]) -> list[int]:
        if any(
            r == self.doomed and any(e["type"] == "agent_text_delta" for e in events)
            for r, events, _ in batches
        ):
            raise StoreError("one run's batch is bad")
        return await super().append_events_many(batches)


async def test_a_bad_batch_in_a_shared_write_fails_only_its_run() -> None:
    runs = OneBadRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    # Paced, as above: the text deltas are written while the runs go on.
    model = paced_client(lambda request: {"text": ["a ", "b ", "c"]}, delay=0.003)
    agent = lab.create_agent(id="a", model=model)
    handles = [agent.run(user=f"q{i}") for i in range(20)]
    runs.doomed = handles[7].run_id
    outcomes = await asyncio.gather(*(h.result for h in handles), return_exceptions=True)
    assert isinstance(outcomes[7], StoreError)
    assert all(not isinstance(o, BaseException) for i, o in enumerate(outcomes) if i != 7)
    info = await runs.get_run(handles[7].run_id)
    assert info is not None and info.status == "failed"
    await lab.aclose()


class StuckRunStore(InMemoryRunStore):
    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        self.writing.set()
        await asyncio.Event().wait()  # a write that never returns
        raise AssertionError("unreachable")


async def _past_the_flush_window(_: Any) -> str:
    await asyncio.sleep(0.05)  # the run's first events are written while it goes on
    return "done"


def stuck_while_running(lab: Runtime) -> Any:
    tool = define_tool(name="wait", description="Wait", execute=_past_the_flush_window)
    client = scripted({"tool_use": [{"name": "wait", "input": {}}]}, {"text": "x"})
    return lab.create_agent(id="a", model=client, tools=[tool])


async def test_a_cancelled_writer_of_run_events_leaves_no_recorder_waiting() -> None:
    # asyncio.run cancels every task when Ctrl-C stops it: the shared writer among them.
    runs = StuckRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    agent = stuck_while_running(lab)
    handle = agent.run(user="q")
    await runs.writing.wait()
    (writer,) = [t for t in asyncio.all_tasks() if t.get_name() == "tether-lab:run-events"]
    writer.cancel()
    with pytest.raises(StoreError, match="stopped"):
        await asyncio.wait_for(handle.result, 5)
    await lab.aclose()


async def test_a_cancelled_recorder_task_fails_its_run_instead_of_cancelling_it() -> None:
    # The recorder's own writer task cancelled (by asyncio.run's shutdown, say) while its batch
    # is being written: the batch may be lost, so the run fails, saying so; nothing hangs.
    runs = StuckRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    agent = stuck_while_running(lab)
    handle = agent.run(user="q")
    await runs.writing.wait()
    (own,) = [t for t in asyncio.all_tasks() if t.get_name() == "tether-lab:run-recorder"]
    own.cancel()
    with pytest.raises(StoreError, match="stopped"):
        await asyncio.wait_for(handle.result, 5)
    await lab.aclose()


class WriteSizesRunStore(InMemoryRunStore):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    async def append_events(
        self, run_id: str, events: Sequence[NewRunEvent], *, lease: str | None = None
    ) -> int:
        self.writes.append(len(events))
        return await super().append_events(run_id, events, lease=lease)

    async def append_events_many(self, batches: Sequence[EventBatch]) -> list[int]:
        self.writes.extend(len(events) for _, events, _ in batches)
        return await super().append_events_many(batches)

    async def finish_run(self, run_id: str, status: RunStatus, **options: Any) -> int:
        if options.get("events"):  # the run's last events, in one write with its end
            self.writes.append(len(options["events"]))
        return await super().finish_run(run_id, status, **options)


async def test_a_short_turns_events_are_written_together_at_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A turn shorter than the flush window (made long here, so that a slow machine cannot
    # stretch the turn past it) writes its events once, when it ends.
    monkeypatch.setattr("tether.lab._recorder.FLUSH_EVERY", 5.0)
    runs = WriteSizesRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    add = define_tool(name="add", description="Add", execute=lambda v: v["a"] + v["b"])
    client = scripted(
        {"tool_use": [{"name": "add", "input": {"a": 1, "b": 2}}]}, {"text": ["3", "."]}
    )
    agent = lab.create_agent(id="calc", model=client, tools=[add])
    result = await agent.run(user="1+2?").result
    events = await runs.events(result.run_id)
    assert len(events) == 12
    assert runs.writes == [12]  # one write, not one per moment the episode yielded
    await lab.aclose()


async def test_events_of_a_run_that_goes_on_are_written_while_it_runs() -> None:
    # The flush window bounds how long an event waits: a listener (a live page, an SSE
    # client) sees the run's events while it still runs, not only when it ends.
    runs = WriteSizesRunStore()
    lab = Runtime(store="memory", run_store=runs, version=False)
    live: list[RunEvent] = []
    lab.subscribe(live.append)
    seen = asyncio.Event()
    release = asyncio.Event()

    async def slow(_: dict[str, Any]) -> str:
        seen.set()
        await release.wait()
        return "done"

    tool = define_tool(name="slow", description="Waits", execute=slow)
    client = scripted({"tool_use": [{"name": "slow", "input": {}}]}, {"text": "ok"})
    agent = lab.create_agent(id="a", model=client, tools=[tool])
    handle = agent.run(user="go")
    await seen.wait()
    for _ in range(100):  # well past the 2 ms window
        if any(e["type"] == "agent_tool_call" for e in live):
            break
        await asyncio.sleep(0.01)
    assert [e["type"] for e in live][:4] == [
        "agent_started",
        "model_call_started",
        "model_call_finished",
        "agent_tool_call",
    ]
    assert not handle.result.done()
    release.set()
    await handle.result
    assert len(runs.writes) >= 2
    await lab.aclose()
