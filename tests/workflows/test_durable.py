"""Durable workflows: journaled steps, resume, cancellation, nested and isolated runs, scopes,
the active-context API and run events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import tether
from tether.errors import (
    NotJSONSafeError,
    StepOutputError,
    StoreCorruptError,
    WorkflowError,
)
from tether.stores import InMemoryWorkflowStore, SqliteWorkflowStore, WorkflowStore
from tether.testing import script_client
from tether.workflows import (
    StepLink,
    WorkflowContext,
    WorkflowEvent,
    create_workflow,
    current_run,
    current_step,
)

STORES = ["memory", "sqlite"]


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[WorkflowStore]:
    s: WorkflowStore = (
        InMemoryWorkflowStore()
        if request.param == "memory"
        else SqliteWorkflowStore.open(tmp_path / "wf.db")
    )
    yield s
    await s.aclose()


class Boom(Exception):
    pass


T = TypeVar("T")


def noting(calls: list[str], name: str, value: T) -> Callable[[], T]:
    """A step body that records that it executed, then returns `value`."""

    def body() -> T:
        calls.append(name)
        return value

    return body


def counting_workflow(
    calls: list[str], *, fail_at: str | None = None, wf_id: str = "count"
) -> tether.workflows.Workflow[int, dict[str, Any]]:
    """Three steps; each records that it executed; `fail_at` raises once inside that step."""
    failing = {fail_at} if fail_at else set()

    async def run(n: int, ctx: WorkflowContext[int]) -> dict[str, Any]:
        async def step(name: str, value: Any) -> Any:
            calls.append(name)
            if name in failing:
                failing.discard(name)
                raise Boom(name)
            return value

        a = await ctx.step("one", lambda: step("one", n + 1))
        b = await ctx.step("two", lambda: step("two", a * 10))
        c = await ctx.step("three", lambda: step("three", {"sum": a + b}))
        return {"a": a, "b": b, "c": c}

    return create_workflow(wf_id, run)


async def test_steps_are_journaled_in_order(store: WorkflowStore) -> None:
    calls: list[str] = []
    handle = counting_workflow(calls).run(1, store=store)
    assert await handle.result == {"a": 2, "b": 20, "c": {"sum": 22}}
    steps = await store.list_steps(handle.workflow_run_id)
    assert [(s.step_id, s.seq, s.output) for s in steps] == [
        ("one", 1, 2),
        ("two", 2, 20),
        ("three", 3, {"sum": 22}),
    ]
    run = await store.get_run(handle.workflow_run_id)
    assert run is not None
    assert (run.status, run.workflow_id, run.input, run.output) == (
        "completed",
        "count",
        1,
        {"a": 2, "b": 20, "c": {"sum": 22}},
    )
    assert calls == ["one", "two", "three"]


async def test_a_failed_run_resumes_without_repeating_completed_steps(
    store: WorkflowStore,
) -> None:
    calls: list[str] = []
    wf = counting_workflow(calls, fail_at="three")
    first = wf.run(1, store=store)
    with pytest.raises(Boom):
        await first.result
    failed = await store.get_run(first.workflow_run_id)
    assert failed is not None and failed.status == "failed"
    assert failed.error == {"type": "Boom", "message": "three"}
    assert calls == ["one", "two", "three"]

    again = wf.run(store=store, workflow_run_id=first.workflow_run_id)
    assert again.workflow_run_id == first.workflow_run_id
    assert await again == {"a": 2, "b": 20, "c": {"sum": 22}}
    assert calls == ["one", "two", "three", "three"]
    done = await store.get_run(first.workflow_run_id)
    assert done is not None and done.status == "completed" and done.attempts == 2


async def test_resume_with_the_same_input_is_allowed_and_a_different_one_is_not(
    store: WorkflowStore,
) -> None:
    calls: list[str] = []
    wf = counting_workflow(calls, fail_at="two")
    first = wf.run(5, store=store)
    with pytest.raises(Boom):
        await first
    with pytest.raises(WorkflowError, match="different input"):
        await wf.run(6, store=store, workflow_run_id=first.workflow_run_id)
    assert await wf.run(5, store=store, workflow_run_id=first.workflow_run_id) == {
        "a": 6,
        "b": 60,
        "c": {"sum": 66},
    }


async def test_rerunning_a_completed_run_returns_its_output_and_runs_nothing(
    store: WorkflowStore,
) -> None:
    calls: list[str] = []
    wf = counting_workflow(calls)
    first = await wf.run(1, store=store).result
    events: list[WorkflowEvent] = []
    handle = wf.run(store=store, workflow_run_id=(await store.list_runs())[0].run_id)
    handle2 = wf.run(store=store, workflow_run_id=handle.workflow_run_id, on_event=events.append)
    assert await handle == first == await handle2
    assert calls == ["one", "two", "three"]
    assert events == []


async def test_resume_checks_the_workflow_and_the_run(store: WorkflowStore) -> None:
    calls: list[str] = []
    done = counting_workflow(calls).run(1, store=store)
    await done
    other = counting_workflow(calls, wf_id="other")
    with pytest.raises(WorkflowError, match="belongs to workflow 'count'"):
        await other.run(store=store, workflow_run_id=done.workflow_run_id)
    with pytest.raises(WorkflowError, match="no stored run 'nope'"):
        await other.run(store=store, workflow_run_id="nope")
    # An id that is not stored yet, with input, starts a run under that id.
    named = other.run(2, store=store, workflow_run_id="order-42")
    assert named.workflow_run_id == "order-42"
    assert await named == {"a": 3, "b": 30, "c": {"sum": 33}}
    stored = await store.get_run("order-42")
    assert stored is not None and stored.workflow_id == "other"


async def test_cancel_stores_cancelled_and_the_run_resumes(store: WorkflowStore) -> None:
    entered = asyncio.Event()
    calls: list[str] = []
    block = True

    async def slow() -> str:
        calls.append("slow")
        if block:
            entered.set()
            await asyncio.Event().wait()
        return "slow-done"

    async def run(_: None, ctx: WorkflowContext[None]) -> list[str]:
        a = await ctx.step("fast", noting(calls, "fast", "fast-done"))
        b = await ctx.step("slow", slow)
        return [a, b]

    wf = create_workflow("cancellable", run)
    handle = wf.run(None, store=store)
    await entered.wait()
    handle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle.result
    stored = await store.get_run(handle.workflow_run_id)
    assert stored is not None and stored.status == "cancelled"
    assert stored.error is not None and stored.error["type"] == "CancelledError"
    block = False
    assert await wf.run(store=store, workflow_run_id=handle.workflow_run_id) == [
        "fast-done",
        "slow-done",
    ]
    assert calls == ["fast", "slow", "slow"]


class SlowWritesStore(InMemoryWorkflowStore):
    """Writes at once, then takes a few turns of the loop to return (as a database write in a
    worker thread does)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()

    async def _slowly(self) -> None:
        self.written.set()
        for _ in range(3):
            await asyncio.sleep(0)

    async def create_run(self, **kw: Any) -> Any:
        record = await super().create_run(**kw)
        await self._slowly()
        return record

    async def start_attempt(self, run_id: str, **kw: Any) -> Any:
        record = await super().start_attempt(run_id, **kw)
        await self._slowly()
        return record


@pytest.mark.parametrize("where", ["create_run", "start_attempt", "workflow_started"])
async def test_a_run_cancelled_while_it_is_being_started_is_stored_cancelled(where: str) -> None:
    store = SlowWritesStore()
    announced = asyncio.Event()

    async def slow_recorder(event: WorkflowEvent) -> None:
        if event["type"] == "workflow_started":
            announced.set()
            for _ in range(3):
                await asyncio.sleep(0)

    calls: list[str] = []
    wf = counting_workflow(calls, fail_at="one" if where == "start_attempt" else None)
    wf.on_event = slow_recorder
    run_id = None
    if where == "start_attempt":
        first = wf.run(1, store=store)
        with pytest.raises(Boom):
            await first
        run_id = first.workflow_run_id
        store.written.clear()
    handle = wf.run(store=store, workflow_run_id=run_id) if run_id else wf.run(1, store=store)
    await (announced if where == "workflow_started" else store.written).wait()
    handle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle.result
    record = await store.get_run(handle.workflow_run_id)
    assert record is not None and record.status == "cancelled"
    # ... and it resumes like any cancelled run.
    assert await wf.run(store=store, workflow_run_id=handle.workflow_run_id) == {
        "a": 2,
        "b": 20,
        "c": {"sum": 22},
    }


async def test_an_abort_signal_cancels_the_run(store: WorkflowStore) -> None:
    entered = asyncio.Event()

    async def run(_: None, ctx: WorkflowContext[None]) -> None:
        entered.set()
        await asyncio.Event().wait()

    controller = tether.AbortController()
    handle = create_workflow("abortable", run).run(None, store=store, signal=controller.signal)
    await entered.wait()
    controller.abort("stop")
    with pytest.raises(asyncio.CancelledError):
        await handle
    stored = await store.get_run(handle.workflow_run_id)
    assert stored is not None and stored.status == "cancelled"


async def test_a_step_output_that_is_not_json_safe_names_step_and_path(
    store: WorkflowStore,
) -> None:
    events: list[WorkflowEvent] = []

    async def run(_: None, ctx: WorkflowContext[None]) -> None:
        await ctx.step("fine", lambda: 1)
        await ctx.step("bad", lambda: {"rows": [{"when": {1, 2}}]})

    handle = create_workflow("unsafe", run).run(None, store=store, on_event=events.append)
    with pytest.raises(StepOutputError) as info:
        await handle
    assert info.value.step == "bad"
    assert info.value.path == "output.rows[0].when"
    assert "'bad'" in str(info.value) and "output.rows[0].when" in str(info.value)
    assert [s.step_id for s in await store.list_steps(handle.workflow_run_id)] == ["fine"]
    failed = [e for e in events if e["type"] == "workflow_step_failed"]
    assert [(e["step"], e["error"]["type"]) for e in failed] == [("bad", "StepOutputError")]
    stored = await store.get_run(handle.workflow_run_id)
    assert stored is not None and stored.status == "failed"


@pytest.mark.parametrize(
    ("value", "path", "what"),
    [
        ({"score": float("nan")}, "output.score", "float nan"),
        ([1, (2, 3)], "output[1]", "tuple"),
        ({1: "int key"}, "output[1]", "int key"),
    ],
)
async def test_nan_tuples_and_non_string_keys_cannot_be_journaled(
    value: Any, path: str, what: str
) -> None:
    async def run(_: None, ctx: WorkflowContext[None]) -> None:
        await ctx.step("odd", lambda: value)

    with pytest.raises(StepOutputError) as info:
        await create_workflow("odd", run).run(None, store=InMemoryWorkflowStore())
    assert (info.value.step, info.value.path, info.value.what) == ("odd", path, what)


async def test_input_and_output_must_be_json_safe(store: WorkflowStore) -> None:
    async def run(x: Any, ctx: WorkflowContext[Any]) -> Any:
        return {"at": (1, 2)}

    wf = create_workflow("io", run)
    with pytest.raises(NotJSONSafeError) as info:
        wf.run({"x": float("inf")}, store=store)
    assert info.value.path == "input.x"
    assert await store.list_runs() == []
    handle = wf.run({"x": 1}, store=store)
    with pytest.raises(NotJSONSafeError) as out:
        await handle
    assert out.value.path == "output.at"
    stored = await store.get_run(handle.workflow_run_id)
    assert stored is not None and stored.status == "failed"


async def test_step_values_are_the_journaled_copies() -> None:
    shared: dict[str, Any] = {"items": [1]}

    async def run(_: None, ctx: WorkflowContext[None]) -> Any:
        got = await ctx.step("s", lambda: shared)
        shared["items"].append(2)
        return got

    assert await create_workflow("copies", run).run(None, store=InMemoryWorkflowStore()) == {
        "items": [1]
    }


async def test_repeated_and_nested_step_names_get_stable_ids(store: WorkflowStore) -> None:
    async def run(_: None, ctx: WorkflowContext[None]) -> list[Any]:
        out: list[Any] = []
        for i in range(3):
            out.append(await ctx.step("fetch", noting([], "fetch", i)))

        async def outer() -> Any:
            return await ctx.step("fetch", lambda: "inner")

        out.append(await ctx.step("outer", outer))
        return out

    handle = create_workflow("ids", run).run(None, store=store)
    assert await handle == [0, 1, 2, "inner"]
    ids = [s.step_id for s in await store.list_steps(handle.workflow_run_id)]
    assert ids == ["fetch", "fetch#2", "fetch#3", "outer/fetch", "outer"]


async def test_a_replayed_outer_step_does_not_shift_later_step_ids() -> None:
    store = InMemoryWorkflowStore()
    calls: list[str] = []
    fail = True

    async def run(_: None, ctx: WorkflowContext[None]) -> list[Any]:
        async def outer() -> str:
            return str(await ctx.step("x", noting(calls, "inner-x", "inner")))

        a = await ctx.step("outer", outer)

        def later() -> str:
            calls.append("later-x")
            if fail:
                raise Boom("later")
            return "later"

        b = await ctx.step("x", later)
        return [a, b]

    wf = create_workflow("shift", run)
    first = wf.run(None, store=store)
    with pytest.raises(Boom):
        await first
    fail = False
    assert await wf.run(store=store, workflow_run_id=first.workflow_run_id) == ["inner", "later"]
    assert calls == ["inner-x", "later-x", "later-x"]


@pytest.mark.parametrize("name", ["", "a#2", "a/b"])
async def test_bad_step_names_are_refused(name: str) -> None:
    async def run(_: None, ctx: WorkflowContext[None]) -> None:
        await ctx.step(name, lambda: 1)

    with pytest.raises(WorkflowError, match="step name"):
        await create_workflow("names", run).run(None, store=InMemoryWorkflowStore())


def test_run_outside_an_event_loop_says_what_to_do() -> None:
    async def run(_: None, ctx: WorkflowContext[None]) -> None:
        return None

    with pytest.raises(WorkflowError, match="running event loop"):
        create_workflow("sync", run).run(None)


def test_create_workflow_checks_its_arguments() -> None:
    async def run(_: None, ctx: WorkflowContext[None]) -> None:
        return None

    with pytest.raises(WorkflowError, match="id"):
        create_workflow("", run)
    with pytest.raises(WorkflowError, match="async function"):
        create_workflow("x", "not callable")  # type: ignore[arg-type]


# -- nesting ---------------------------------------------------------------------------------


async def test_nested_runs_join_the_parent_tree(store: WorkflowStore) -> None:
    seen: dict[str, Any] = {}

    async def leaf(x: str, ctx: WorkflowContext[str]) -> str:
        seen["leaf"] = (ctx.parent_run_id, ctx.root_run_id, ctx.workflow_run_id)
        seen["leaf_scopes"] = (ctx.memory_scope_with_suffix("s"), ctx.run_local_scope("s"))
        return x.upper()

    leaf_wf = create_workflow("leaf", leaf)

    async def middle(x: str, ctx: WorkflowContext[str]) -> str:
        seen["middle"] = (ctx.parent_run_id, ctx.root_run_id, ctx.workflow_run_id)
        return await ctx.step("call-leaf", lambda: leaf_wf.run(x).result)

    middle_wf = create_workflow("middle", middle)

    async def root(x: str, ctx: WorkflowContext[str]) -> str:
        seen["root"] = (ctx.parent_run_id, ctx.root_run_id, ctx.workflow_run_id)
        seen["root_scopes"] = (ctx.memory_scope_with_suffix("s"), ctx.run_local_scope("s"))
        return await middle_wf.run(x)

    handle = create_workflow("root", root).run("hi", store=store)
    assert await handle == "HI"
    root_id = handle.workflow_run_id
    assert seen["root"] == (None, root_id, root_id)
    middle_id = seen["middle"][2]
    assert seen["middle"] == (root_id, root_id, middle_id)
    leaf_id = seen["leaf"][2]
    assert seen["leaf"] == (middle_id, root_id, leaf_id)
    assert len({root_id, middle_id, leaf_id}) == 3
    assert seen["root_scopes"] == (f"{root_id}:s", f"{root_id}:s")
    assert seen["leaf_scopes"] == (f"{root_id}:s", f"{leaf_id}:s")
    tree = await store.list_runs(root_run_id=root_id)
    assert {r.run_id: (r.workflow_id, r.parent_step_id) for r in tree} == {
        root_id: ("root", None),
        middle_id: ("middle", None),
        leaf_id: ("leaf", "call-leaf"),
    }


async def test_an_isolated_run_is_a_separate_root_in_the_same_store(store: WorkflowStore) -> None:
    seen: dict[str, Any] = {}

    async def title(x: str, ctx: WorkflowContext[str]) -> str:
        seen["title"] = (ctx.parent_run_id, ctx.root_run_id, ctx.workflow_run_id)
        seen["scope"] = ctx.memory_scope_with_suffix("namer")
        return f"title of {x}"

    title_wf = create_workflow("title", title)

    async def conversation(x: str, ctx: WorkflowContext[str]) -> str:
        return await title_wf.run(x, isolated=True)

    handle = create_workflow("conversation", conversation).run("chat", store=store)
    assert await handle == "title of chat"
    parent, root, own = seen["title"]
    assert parent is None and root == own != handle.workflow_run_id
    assert seen["scope"] == f"{own}:namer"
    stored = await store.get_run(own)
    assert stored is not None and stored.status == "completed" and stored.parent_run_id is None
    assert [r.run_id for r in await store.list_runs(root_run_id=handle.workflow_run_id)] == [
        handle.workflow_run_id
    ]


async def test_resuming_a_parent_resumes_its_child(store: WorkflowStore) -> None:
    calls: list[str] = []
    fail_parent = True

    async def child(x: int, ctx: WorkflowContext[int]) -> int:
        a = await ctx.step("c1", noting(calls, f"c1({x})", x + 1))
        return await ctx.step("c2", noting(calls, f"c2({x})", a * 2))

    child_wf = create_workflow("child", child)

    async def parent(x: int, ctx: WorkflowContext[int]) -> list[int]:
        in_step = await ctx.step("inside-step", lambda: child_wf.run(100).result)
        in_body = await child_wf.run(x)

        def last() -> int:
            calls.append("last")
            if fail_parent:
                raise Boom("parent")
            return 0

        return [in_step, in_body, await ctx.step("last", last)]

    wf = create_workflow("parent", parent)
    first = wf.run(1, store=store)
    with pytest.raises(Boom, match="parent"):
        await first
    assert calls == ["c1(100)", "c2(100)", "c1(1)", "c2(1)", "last"]
    fail_parent = False
    assert await wf.run(store=store, workflow_run_id=first.workflow_run_id) == [202, 4, 0]
    # Neither child ran again: the body-level one was found completed under its derived id,
    # and the one inside the journaled step was not reached at all.
    assert calls == ["c1(100)", "c2(100)", "c1(1)", "c2(1)", "last", "last"]
    assert len(await store.list_runs(workflow_id="child")) == 2


async def test_a_step_run_again_may_start_its_child_with_another_input(
    store: WorkflowStore,
) -> None:
    # A step that failed after its child completed runs again on resume; what it passes the
    # child need not be what it passed before (a model picks a tool's arguments anew).
    calls: list[int] = []

    async def child(x: int, ctx: WorkflowContext[int]) -> int:
        calls.append(x)
        return x * 10

    child_wf = create_workflow("child", child)

    async def parent(_: None, ctx: WorkflowContext[None]) -> int:
        async def ask() -> int:
            answer = await child_wf.run(len(calls) + 1)
            if len(calls) == 1:
                raise Boom("after the child")
            return answer

        return await ctx.step("ask", ask)

    wf = create_workflow("parent", parent)
    first = wf.run(None, store=store)
    with pytest.raises(Boom):
        await first
    assert await wf.run(store=store, workflow_run_id=first.workflow_run_id) == 20
    assert calls == [1, 2]
    children = await store.list_runs(workflow_id="child")
    assert sorted(r.input for r in children) == [1, 2]
    assert {r.parent_run_id for r in children} == {first.workflow_run_id}


async def test_a_failed_child_is_resumed_in_place(store: WorkflowStore) -> None:
    calls: list[str] = []
    fail = True

    async def child(x: int, ctx: WorkflowContext[int]) -> int:
        a = await ctx.step("c1", noting(calls, "c1", x + 1))

        def c2() -> int:
            calls.append("c2")
            if fail:
                raise Boom("child")
            return a * 2

        return await ctx.step("c2", c2)

    child_wf = create_workflow("child", child)

    async def parent(x: int, ctx: WorkflowContext[int]) -> int:
        return await child_wf.run(x)

    wf = create_workflow("parent", parent)
    first = wf.run(1, store=store)
    with pytest.raises(Boom):
        await first
    fail = False
    assert await wf.run(store=store, workflow_run_id=first.workflow_run_id) == 4
    assert calls == ["c1", "c2", "c2"]
    runs = await store.list_runs(workflow_id="child")
    assert len(runs) == 1 and runs[0].attempts == 2 and runs[0].status == "completed"


async def test_a_child_left_running_is_cancelled_when_the_parent_ends(
    store: WorkflowStore,
) -> None:
    started = asyncio.Event()
    handles: list[tether.workflows.WorkflowHandle[None]] = []

    async def forever(_: None, ctx: WorkflowContext[None]) -> None:
        started.set()
        await asyncio.Event().wait()

    forever_wf = create_workflow("forever", forever)

    async def parent(_: None, ctx: WorkflowContext[None]) -> str:
        handles.append(forever_wf.run(None))
        await started.wait()
        return "done"

    assert await create_workflow("leaves-child", parent).run(None, store=store) == "done"
    with pytest.raises(asyncio.CancelledError):
        await handles[0].result
    child = await store.get_run(handles[0].workflow_run_id)
    assert child is not None and child.status == "cancelled"


async def test_the_parent_ends_only_after_the_child_it_cancelled_recorded_its_end(
    store: WorkflowStore,
) -> None:
    # A recorder that takes a few turns of the loop (as one writing to a database does) delays
    # the child's own bookkeeping; the parent must still not end before the child has, or a
    # caller that closes the store on the parent's result leaves the child "running" forever.
    started = asyncio.Event()
    handles: list[tether.workflows.WorkflowHandle[None]] = []
    order: list[str] = []

    async def slow_recorder(event: WorkflowEvent) -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        if event["type"] in ("workflow_failed", "workflow_finished"):
            order.append(f"{event['workflow_id']}:{event['type']}")

    async def forever(_: None, ctx: WorkflowContext[None]) -> None:
        async def wait() -> None:
            started.set()
            await asyncio.Event().wait()

        await ctx.step("wait", wait)

    forever_wf = create_workflow("forever", forever)

    async def parent(_: None, ctx: WorkflowContext[None]) -> str:
        handles.append(forever_wf.run(None))
        await started.wait()
        return "done"

    handle = create_workflow("leaves-child", parent, on_event=slow_recorder).run(None, store=store)
    assert await handle.result == "done"
    assert handles[0].result.cancelled()
    child = await store.get_run(handles[0].workflow_run_id)
    assert child is not None and child.status == "cancelled"
    assert order == ["forever:workflow_failed", "leaves-child:workflow_finished"]


async def test_store_precedence() -> None:
    mine, theirs, parents = (
        InMemoryWorkflowStore(),
        InMemoryWorkflowStore(),
        InMemoryWorkflowStore(),
    )

    async def leaf(_: None, ctx: WorkflowContext[None]) -> None:
        return None

    leaf_wf = create_workflow("leaf", leaf, store=theirs)
    await leaf_wf.run(None).result
    assert len(await theirs.list_runs()) == 1
    await leaf_wf.run(None, store=mine)
    assert len(await mine.list_runs()) == 1

    async def parent(_: None, ctx: WorkflowContext[None]) -> None:
        await leaf_wf.run(None)

    await create_workflow("parent", parent).run(None, store=parents)
    assert sorted(r.workflow_id for r in await parents.list_runs()) == ["leaf", "parent"]
    assert len(await theirs.list_runs()) == 1


# -- the active context ----------------------------------------------------------------------


async def test_current_step_reports_the_active_run_and_step() -> None:
    seen: list[StepLink | None] = []

    async def run(_: None, ctx: WorkflowContext[None]) -> str:
        seen.append(current_step())
        assert current_run() is ctx

        async def inside() -> str:
            seen.append(current_step())
            return "x"

        await ctx.step("work", inside)
        seen.append(current_step())
        return ctx.workflow_run_id

    assert current_step() is None and current_run() is None
    run_id = await create_workflow("links", run).run(None, store=InMemoryWorkflowStore())
    assert seen == [
        StepLink("links", run_id, run_id, None),
        StepLink("links", run_id, run_id, "work"),
        StepLink("links", run_id, run_id, None),
    ]
    assert current_step() is None


async def test_an_agent_run_inside_a_step_picks_up_the_workflow_link() -> None:
    links: list[StepLink | None] = []

    def where(input: dict[str, Any]) -> str:
        links.append(current_step())
        return "noted"

    agent = tether.create_agent(
        llm=script_client(
            [
                {"tool_use": [{"name": "where", "input": {}}]},
                {"text": "done"},
            ]
        ),
        tools=[tether.define_tool(name="where", input_schema={"type": "object"}, execute=where)],
    )

    async def ask() -> str:
        text = ""
        async for event in agent.send(agent.create_session(), "where am I?"):
            if event["type"] == "done":
                text = event["text"]
        return text

    async def run(_: None, ctx: WorkflowContext[None]) -> str:
        return await ctx.step("ask", ask)

    handle = create_workflow("agentic", run).run(None, store=InMemoryWorkflowStore())
    assert await handle == "done"
    run_id = handle.workflow_run_id
    assert links == [StepLink("agentic", run_id, run_id, "ask")]


async def test_concurrent_runs_of_one_workflow_never_see_each_others_steps(
    store: WorkflowStore,
) -> None:
    # The two runs are forced to interleave step by step: a, b, a, b, …
    turns = {"a": asyncio.Event(), "b": asyncio.Event()}
    order: list[str] = []
    seen_links: dict[str, list[str | None]] = {"a": [], "b": []}

    async def run(who: str, ctx: WorkflowContext[str]) -> list[str]:
        out = []
        for i in range(3):
            await turns[who].wait()
            turns[who].clear()

            def work(i: int = i) -> str:
                link = current_step()
                assert link is not None
                seen_links[who].append(link.workflow_run_id)
                order.append(f"{who}{i}")
                return f"{who}-{i}-{ctx.input}"

            out.append(await ctx.step("work", work))
            turns["b" if who == "a" else "a"].set()
        return out

    wf = create_workflow("shared", run)
    ha, hb = wf.run("a", store=store), wf.run("b", store=store)
    turns["a"].set()
    ra, rb = await asyncio.gather(ha.result, hb.result)
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert ra == ["a-0-a", "a-1-a", "a-2-a"]
    assert rb == ["b-0-b", "b-1-b", "b-2-b"]
    assert seen_links == {"a": [ha.workflow_run_id] * 3, "b": [hb.workflow_run_id] * 3}
    for handle, who in ((ha, "a"), (hb, "b")):
        steps = await store.list_steps(handle.workflow_run_id)
        assert [(s.step_id, s.output) for s in steps] == [
            ("work", f"{who}-0-{who}"),
            ("work#2", f"{who}-1-{who}"),
            ("work#3", f"{who}-2-{who}"),
        ]


# -- events ----------------------------------------------------------------------------------


async def test_run_events_describe_the_run(store: WorkflowStore) -> None:
    events: list[WorkflowEvent] = []
    calls: list[str] = []
    wf = counting_workflow(calls, fail_at="two")
    wf.on_event = events.append
    first = wf.run(1, store=store)
    with pytest.raises(Boom):
        await first
    rid = first.workflow_run_id
    assert [(e["type"], e.get("step_id")) for e in events] == [
        ("workflow_started", None),
        ("workflow_step_started", "one"),
        ("workflow_step_finished", "one"),
        ("workflow_step_started", "two"),
        ("workflow_step_failed", "two"),
        ("workflow_failed", None),
    ]
    assert all(
        (e["workflow_id"], e["workflow_run_id"], e["root_run_id"], e["parent_run_id"])
        == ("count", rid, rid, None)
        for e in events
    )
    started, failed = events[0], events[-1]
    assert started["type"] == "workflow_started" and started["attempt"] == 1
    assert failed["type"] == "workflow_failed"
    assert failed["status"] == "failed"
    assert failed["error"] == {"type": "Boom", "message": "two"}
    events.clear()
    await wf.run(store=store, workflow_run_id=rid)
    assert [(e["type"], e.get("step_id"), e.get("replayed")) for e in events] == [
        ("workflow_started", None, None),
        ("workflow_step_finished", "one", True),
        ("workflow_step_started", "two", None),
        ("workflow_step_finished", "two", False),
        ("workflow_step_started", "three", None),
        ("workflow_step_finished", "three", False),
        ("workflow_finished", None, None),
    ]
    started, finished = events[0], events[-1]
    assert started["type"] == "workflow_started" and started["attempt"] == 2
    assert finished["type"] == "workflow_finished"
    assert finished["output"] == {"a": 2, "b": 20, "c": {"sum": 22}}


async def test_async_recorders_are_awaited_and_nested_runs_inherit_them() -> None:
    events: list[tuple[str, str]] = []

    async def record(event: WorkflowEvent) -> None:
        await asyncio.sleep(0)
        events.append((event["workflow_id"], event["type"]))

    async def child(_: None, ctx: WorkflowContext[None]) -> int:
        return 1

    child_wf = create_workflow("child", child)

    async def parent(_: None, ctx: WorkflowContext[None]) -> int:
        return await child_wf.run(None)

    await create_workflow("parent", parent).run(
        None, store=InMemoryWorkflowStore(), on_event=record
    )
    assert events == [
        ("parent", "workflow_started"),
        ("child", "workflow_started"),
        ("child", "workflow_finished"),
        ("parent", "workflow_finished"),
    ]


async def test_a_raising_recorder_warns_once_and_the_run_goes_on() -> None:
    def broken(event: WorkflowEvent) -> None:
        raise RuntimeError("recorder down")

    calls: list[str] = []
    with pytest.warns(RuntimeWarning, match="recorder down") as warned:
        out = await counting_workflow(calls).run(1, store=InMemoryWorkflowStore(), on_event=broken)
    assert out == {"a": 2, "b": 20, "c": {"sum": 22}}
    assert len(warned) == 1


async def test_a_corrupt_journal_stops_the_resume_and_keeps_the_record(tmp_path: Path) -> None:
    calls: list[str] = []
    store = SqliteWorkflowStore.open(tmp_path / "wf.db")
    wf = counting_workflow(calls, fail_at="three")
    first = wf.run(1, store=store)
    with pytest.raises(Boom):
        await first
    rid = first.workflow_run_id
    store._conn.execute(
        "UPDATE tether_workflow_steps SET output = '{broken' WHERE run_id = ? AND step_id = 'two'",
        (rid,),
    )
    with pytest.raises(StoreCorruptError, match="'two'"):
        await wf.run(store=store, workflow_run_id=rid)
    (text,) = store._conn.execute(
        "SELECT output FROM tether_workflow_steps WHERE run_id = ? AND step_id = 'two'", (rid,)
    ).fetchone()
    assert text == "{broken"
    assert calls == ["one", "two", "three"]
    await store.aclose()
