"""The WorkflowStore contract: every backend passes this same suite.

Adding a backend is one entry in `BACKENDS`: how to make a store on fresh storage, a second handle
on the same storage, and how to damage a stored record (for the corruption rules).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.postgres_server import postgres_url

from tether.errors import (
    LeaseLostError,
    NotJSONSafeError,
    StoreCorruptError,
    StoreError,
    WorkflowRunBusyError,
)
from tether.stores import InMemoryWorkflowStore, RunLease, SqliteWorkflowStore, WorkflowStore
from tether.stores.postgres import PostgresWorkflowStore
from tether.stores.sqlite import connect


@dataclass(frozen=True)
class Backend:
    name: str
    make: Callable[[Path], WorkflowStore]
    """A store on fresh storage under the given directory."""
    corrupt_step: Callable[[WorkflowStore, str, str, str], None]
    """Overwrite the stored output text of (run_id, step_id)."""
    corrupt_run: Callable[[WorkflowStore, str, str, str], None]
    """Overwrite one stored column (input, status, error) of a run with raw text."""


def _mem_step(store: WorkflowStore, run_id: str, step_id: str, text: str) -> None:
    # The in-memory store keeps JSON values as the text a database holds: damage one the same way.
    assert isinstance(store, InMemoryWorkflowStore)
    steps = store._steps[run_id]
    steps[step_id] = dataclasses.replace(steps[step_id], output=text)


def _mem_run(store: WorkflowStore, run_id: str, column: str, text: str) -> None:
    assert isinstance(store, InMemoryWorkflowStore)
    setattr(store._runs[run_id], column, text)


def _sqlite_conn(store: WorkflowStore) -> sqlite3.Connection:
    assert isinstance(store, SqliteWorkflowStore)
    return store._conn


def _sqlite_step(store: WorkflowStore, run_id: str, step_id: str, text: str) -> None:
    _sqlite_conn(store).execute(
        "UPDATE tether_workflow_steps SET output = ? WHERE run_id = ? AND step_id = ?",
        (text, run_id, step_id),
    )


def _sqlite_run(store: WorkflowStore, run_id: str, column: str, text: str) -> None:
    assert column in ("input", "status", "error", "output")
    _sqlite_conn(store).execute(
        f"UPDATE tether_workflow_runs SET {column} = ? WHERE run_id = ?", (text, run_id)
    )


def _pg_execute(store: WorkflowStore, sql: str, params: tuple[str, ...]) -> None:
    assert isinstance(store, PostgresWorkflowStore) and store._conninfo is not None
    with psycopg.connect(store._conninfo, autocommit=True) as conn:
        conn.execute(sql, params)


def _pg_step(store: WorkflowStore, run_id: str, step_id: str, text: str) -> None:
    _pg_execute(
        store,
        "UPDATE tether_workflow_steps SET output = %s WHERE run_id = %s AND step_id = %s",
        (text, run_id, step_id),
    )


def _pg_run(store: WorkflowStore, run_id: str, column: str, text: str) -> None:
    assert column in ("input", "status", "error", "output")
    _pg_execute(
        store, f"UPDATE tether_workflow_runs SET {column} = %s WHERE run_id = %s", (text, run_id)
    )


BACKENDS = [
    Backend("memory", lambda _: InMemoryWorkflowStore(), _mem_step, _mem_run),
    Backend("sqlite", lambda d: SqliteWorkflowStore.open(d / "wf.db"), _sqlite_step, _sqlite_run),
    Backend("postgres", lambda _: PostgresWorkflowStore(postgres_url()), _pg_step, _pg_run),
]


@pytest.fixture(params=BACKENDS, ids=[b.name for b in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.param
    return b


@pytest.fixture
async def store(backend: Backend, tmp_path: Path) -> AsyncIterator[WorkflowStore]:
    s = backend.make(tmp_path)
    yield s
    await s.aclose()


async def test_implements_the_protocol(store: WorkflowStore) -> None:
    assert isinstance(store, WorkflowStore)


async def test_create_and_get_a_root_run(store: WorkflowStore) -> None:
    created = await store.create_run(run_id="r1", workflow_id="wf", input={"topic": "x"})
    assert created.status == "running"
    assert created.root_run_id == "r1"
    assert created.parent_run_id is None
    assert created.attempts == 1
    assert created.input == {"topic": "x"}
    assert created.output is None and created.error is None
    assert await store.get_run("r1") == created
    assert await store.get_run("missing") is None


async def test_a_nested_run_records_its_tree(store: WorkflowStore) -> None:
    await store.create_run(run_id="root", workflow_id="wf", input=None)
    child = await store.create_run(
        run_id="child",
        workflow_id="inner",
        input=[1],
        parent_run_id="root",
        root_run_id="root",
        parent_step_id="fetch",
    )
    assert (child.parent_run_id, child.root_run_id, child.parent_step_id) == (
        "root",
        "root",
        "fetch",
    )


async def test_a_run_id_is_created_once(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=1)
    with pytest.raises(StoreError, match="already exists"):
        await store.create_run(run_id="r1", workflow_id="other", input=2)
    run = await store.get_run("r1")
    assert run is not None and run.workflow_id == "wf" and run.input == 1


async def test_input_must_be_json_safe_and_nothing_is_stored(store: WorkflowStore) -> None:
    with pytest.raises(NotJSONSafeError) as info:
        await store.create_run(run_id="r1", workflow_id="wf", input={"when": {1, 2}})
    assert info.value.path == "input.when"
    assert await store.get_run("r1") is None


async def test_start_attempt_and_finish(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    failed = await store.finish_run(
        "r1", status="failed", error={"type": "ValueError", "message": "no"}
    )
    assert failed.status == "failed"
    assert failed.error == {"type": "ValueError", "message": "no"}
    again = await store.start_attempt("r1")
    assert again.status == "running" and again.attempts == 2
    done = await store.finish_run("r1", status="completed", output={"answer": [1, 2]})
    assert done.status == "completed" and done.output == {"answer": [1, 2]}
    assert done.error is None
    cancelled = await store.finish_run("r1", status="cancelled", error={"type": "C", "message": ""})
    assert cancelled.status == "cancelled"


async def test_finish_and_attempt_on_a_missing_run_fail(store: WorkflowStore) -> None:
    with pytest.raises(StoreError):
        await store.start_attempt("nope")
    with pytest.raises(StoreError):
        await store.finish_run("nope", status="completed", output=1)


async def test_finish_refuses_running_status_and_unsafe_output(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    with pytest.raises(ValueError, match="status"):
        await store.finish_run("r1", status="running")  # type: ignore[arg-type]
    with pytest.raises(NotJSONSafeError):
        await store.finish_run("r1", status="completed", output=float("nan"))
    run = await store.get_run("r1")
    assert run is not None and run.status == "running"


async def test_list_runs_newest_first_with_filters(store: WorkflowStore) -> None:
    await store.create_run(run_id="a", workflow_id="wf", input=None)
    await store.create_run(run_id="b", workflow_id="other", input=None)
    await store.create_run(
        run_id="c", workflow_id="wf", input=None, parent_run_id="a", root_run_id="a"
    )
    assert [r.run_id for r in await store.list_runs()] == ["c", "b", "a"]
    assert [r.run_id for r in await store.list_runs(workflow_id="wf")] == ["c", "a"]
    assert [r.run_id for r in await store.list_runs(root_run_id="a")] == ["c", "a"]
    assert [r.run_id for r in await store.list_runs(limit=2)] == ["c", "b"]


async def test_steps_append_in_order_and_read_back(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    first = await store.append_step("r1", step_id="fetch", name="fetch", output={"n": 1})
    second = await store.append_step("r1", step_id="fetch#2", name="fetch", output=[2])
    assert (first.seq, second.seq) == (1, 2)
    assert first.run_id == "r1" and first.name == "fetch" and first.output == {"n": 1}
    got = await store.get_step("r1", "fetch#2")
    assert got is not None and got.output == [2] and got.name == "fetch"
    assert await store.get_step("r1", "never") is None
    assert await store.get_step("missing-run", "fetch") is None
    assert [s.step_id for s in await store.list_steps("r1")] == ["fetch", "fetch#2"]
    assert await store.list_steps("missing-run") == []


async def test_the_first_output_of_a_step_wins(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    await store.append_step("r1", step_id="s", name="s", output="first")
    again = await store.append_step("r1", step_id="s", name="s", output="second")
    assert again.output == "first" and again.seq == 1
    assert [s.output for s in await store.list_steps("r1")] == ["first"]


async def test_append_to_a_missing_run_fails(store: WorkflowStore) -> None:
    with pytest.raises(StoreError, match="no workflow run"):
        await store.append_step("nope", step_id="s", name="s", output=1)


async def test_unsafe_step_output_is_refused_with_its_path(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    with pytest.raises(NotJSONSafeError) as info:
        await store.append_step("r1", step_id="s", name="s", output={"items": [1, (2, 3)]})
    assert info.value.path == "output.items[1]"
    assert await store.list_steps("r1") == []


async def test_runs_never_see_each_others_steps(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=1)
    await store.create_run(run_id="r2", workflow_id="wf", input=2)
    await store.append_step("r1", step_id="s", name="s", output="one")
    await store.append_step("r2", step_id="s", name="s", output="two")
    await store.append_step("r2", step_id="t", name="t", output="two-t")
    assert [(s.step_id, s.output, s.seq) for s in await store.list_steps("r1")] == [("s", "one", 1)]
    assert [(s.step_id, s.output, s.seq) for s in await store.list_steps("r2")] == [
        ("s", "two", 1),
        ("t", "two-t", 2),
    ]


async def test_values_read_back_are_copies(store: WorkflowStore) -> None:
    data: dict[str, Any] = {"items": [1]}
    await store.create_run(run_id="r1", workflow_id="wf", input=data)
    step = await store.append_step("r1", step_id="s", name="s", output=data)
    data["items"].append(2)
    step.output["items"].append(3)
    got = await store.get_step("r1", "s")
    run = await store.get_run("r1")
    assert got is not None and got.output == {"items": [1]}
    assert run is not None and run.input == {"items": [1]}


async def test_a_corrupt_step_raises_and_loses_nothing(
    store: WorkflowStore, backend: Backend
) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    await store.create_run(run_id="r2", workflow_id="wf", input=None)
    await store.append_step("r1", step_id="a", name="a", output=1)
    await store.append_step("r1", step_id="b", name="b", output=2)
    await store.append_step("r2", step_id="a", name="a", output=3)
    backend.corrupt_step(store, "r1", "b", "{not json")
    with pytest.raises(StoreCorruptError, match="'r1'/'b'"):
        await store.get_step("r1", "b")
    with pytest.raises(StoreCorruptError):
        await store.list_steps("r1")
    with pytest.raises(StoreCorruptError):
        await store.append_step("r1", step_id="b", name="b", output=99)
    # Everything else is intact and the journal still grows.
    a = await store.get_step("r1", "a")
    assert a is not None and a.output == 1
    assert [s.output for s in await store.list_steps("r2")] == [3]
    c = await store.append_step("r1", step_id="c", name="c", output=4)
    assert c.seq == 3
    # The damaged record is still there, unchanged, for someone to repair.
    backend.corrupt_step(store, "r1", "b", "2")
    b = await store.get_step("r1", "b")
    assert b is not None and b.output == 2 and b.seq == 2


@pytest.mark.parametrize(
    ("column", "text"),
    [("input", "{oops"), ("status", "exploded"), ("error", "[1, 2]"), ("output", "nan?")],
)
async def test_a_corrupt_run_raises(
    store: WorkflowStore, backend: Backend, column: str, text: str
) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input={"ok": True})
    await store.create_run(run_id="r2", workflow_id="wf", input={"ok": True})
    backend.corrupt_run(store, "r1", column, text)
    with pytest.raises(StoreCorruptError, match="'r1'"):
        await store.get_run("r1")
    with pytest.raises(StoreCorruptError):
        await store.list_runs()
    other = await store.get_run("r2")
    assert other is not None and other.input == {"ok": True}


async def test_many_appends_to_one_run_lose_nothing(store: WorkflowStore) -> None:
    import asyncio

    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    records = await asyncio.gather(
        *(store.append_step("r1", step_id=f"s{i}", name="s", output=i) for i in range(200))
    )
    assert sorted(r.seq for r in records) == list(range(1, 201))
    steps = await store.list_steps("r1")
    assert sorted(s.output for s in steps) == list(range(200))
    assert [s.seq for s in steps] == list(range(1, 201))


async def test_aclose_is_idempotent_and_refuses_use_after(store: WorkflowStore) -> None:
    await store.create_run(run_id="r1", workflow_id="wf", input=None)
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.get_run("r1")


def test_sqlite_store_on_a_caller_connection_leaves_it_open(tmp_path: Path) -> None:
    import asyncio

    conn = connect(tmp_path / "wf.db")
    store = SqliteWorkflowStore(conn)
    asyncio.run(store.aclose())
    assert conn.execute("SELECT COUNT(*) FROM tether_workflow_runs").fetchone() == (0,)
    conn.close()


# -- leases: who runs a run, and taking over one whose holder died -------------------------------


def _another(store: WorkflowStore, tmp_path: Path) -> WorkflowStore:
    """A second handle on the same storage, as another process would open it."""
    if isinstance(store, SqliteWorkflowStore):
        return SqliteWorkflowStore.open(tmp_path / "wf.db")
    if isinstance(store, PostgresWorkflowStore):
        assert store._conninfo is not None
        return PostgresWorkflowStore(store._conninfo)
    return store


A, B = RunLease("host-a:1:aaaa", 30.0), RunLease("host-b:2:bbbb", 30.0)


async def test_a_run_held_by_a_live_lease_is_not_taken_over(store: WorkflowStore) -> None:
    created = await store.create_run(run_id="r", workflow_id="wf", input=1, lease=A)
    assert created.lease_owner == A.owner and created.status == "running"
    assert created.lease_expires_at is not None
    assert 25 < created.lease_expires_at - time.time() <= 31
    with pytest.raises(WorkflowRunBusyError) as busy:
        await store.start_attempt("r", lease=B)
    assert busy.value.run_id == "r" and busy.value.holder == A.owner
    assert A.owner in str(busy.value) and "lease ends in" in str(busy.value)
    assert busy.value.expires_at == pytest.approx(created.lease_expires_at, abs=1)
    after = await store.get_run("r")
    assert after is not None and (after.attempts, after.lease_owner) == (1, A.owner)
    # The holder itself may start it again (a restart in the same execution).
    again = await store.start_attempt("r", lease=A)
    assert (again.attempts, again.lease_owner) == (2, A.owner)


async def test_an_ended_run_is_free_for_anyone(store: WorkflowStore) -> None:
    await store.create_run(run_id="r", workflow_id="wf", input=1, lease=A)
    failed = await store.finish_run("r", status="failed", error={"type": "E", "message": "x"})
    assert (failed.lease_owner, failed.lease_expires_at) == (None, None)
    taken = await store.start_attempt("r", lease=B)
    assert (taken.status, taken.attempts, taken.lease_owner) == ("running", 2, B.owner)


async def test_an_expired_lease_reads_interrupted_and_the_run_may_be_taken_over(
    store: WorkflowStore,
) -> None:
    short = RunLease(A.owner, 0.2)
    await store.create_run(run_id="root", workflow_id="wf", input=1, lease=short)
    await store.create_run(
        run_id="child",
        workflow_id="inner",
        input=2,
        parent_run_id="root",
        root_run_id="root",
        lease=short,
    )
    await store.create_run(run_id="done", workflow_id="wf", input=3, root_run_id="root")
    await store.finish_run("done", status="completed", output=3)
    await asyncio.sleep(0.3)
    root = await store.get_run("root")
    assert root is not None and root.status == "interrupted"
    assert {r.run_id: r.status for r in await store.list_runs()} == {
        "root": "interrupted",
        "child": "interrupted",
        "done": "completed",
    }
    taken = await store.start_attempt("root", lease=B)
    assert (taken.status, taken.lease_owner) == ("running", B.owner)
    # The runs nested in it that were still running pass to the new holder with it.
    child = await store.get_run("child")
    assert child is not None and (child.status, child.lease_owner) == ("running", B.owner)
    done = await store.get_run("done")
    assert done is not None and done.lease_owner is None
    # The old holder finds out: it may neither renew nor finish what is not its any more.
    assert await store.renew_lease("root", short) is False
    with pytest.raises(LeaseLostError, match=B.owner) as lost:
        await store.finish_run(
            "root", status="failed", error={"type": "E", "message": "x"}, lease=short
        )
    assert (lost.value.lease, lost.value.key, lost.value.holder) == (
        "workflow run",
        "root",
        B.owner,
    )
    assert (await store.get_run("root")).status == "running"  # type: ignore[union-attr]


async def test_a_taken_over_holder_journals_no_step_and_cannot_finish_the_run(
    store: WorkflowStore,
) -> None:
    short = RunLease(A.owner, 0.2)
    await store.create_run(run_id="r", workflow_id="wf", input=1, lease=short)
    await store.append_step("r", step_id="one", name="one", output="a's", lease=short)
    await asyncio.sleep(0.3)
    await store.start_attempt("r", lease=B)
    # Each write of the stalled holder carries its lease and is refused in that write.
    with pytest.raises(LeaseLostError, match=B.owner):
        await store.append_step("r", step_id="two", name="two", output="a's", lease=short)
    await store.append_step("r", step_id="two", name="two", output="b's", lease=B)
    await store.finish_run("r", status="completed", output="b's", lease=B)
    # Ended by its new holder: the old one may not finish it over the new one's outcome.
    with pytest.raises(LeaseLostError):
        await store.finish_run("r", status="completed", output="a's", lease=short)
    with pytest.raises(LeaseLostError):
        await store.append_step("r", step_id="three", name="three", output="a's", lease=short)
    record = await store.get_run("r")
    assert record is not None and (record.status, record.output) == ("completed", "b's")
    assert [(s.step_id, s.output) for s in await store.list_steps("r")] == [
        ("one", "a's"),
        ("two", "b's"),
    ]
    with pytest.raises(StoreError, match="no workflow run"):
        await store.append_step("nope", step_id="s", name="s", output=1, lease=B)


async def test_renewing_a_lease_extends_the_whole_tree_it_holds(store: WorkflowStore) -> None:
    short = RunLease(A.owner, 0.4)
    await store.create_run(run_id="root", workflow_id="wf", input=1, lease=short)
    await store.create_run(
        run_id="child",
        workflow_id="inner",
        input=2,
        parent_run_id="root",
        root_run_id="root",
        lease=short,
    )
    for _ in range(5):
        await asyncio.sleep(0.15)
        assert await store.renew_lease("root", short) is True
    assert {r.run_id: r.status for r in await store.list_runs()} == {
        "root": "running",
        "child": "running",
    }
    finished = await store.finish_run("root", status="completed", output=1, lease=short)
    assert finished.lease_owner is None
    assert await store.renew_lease("root", short) is False  # an ended run is not held


async def test_a_run_created_without_a_lease_never_reads_interrupted(store: WorkflowStore) -> None:
    await store.create_run(run_id="r", workflow_id="wf", input=1)
    await asyncio.sleep(0.05)
    run = await store.get_run("r")
    assert run is not None and (run.status, run.lease_owner) == ("running", None)
    assert (await store.start_attempt("r", lease=B)).lease_owner == B.owner


async def test_of_many_owners_taking_over_one_run_at_once_exactly_one_gets_it(
    store: WorkflowStore, tmp_path: Path
) -> None:
    await store.create_run(run_id="r", workflow_id="wf", input=1, lease=RunLease(A.owner, 0.1))
    await asyncio.sleep(0.2)
    handles = [_another(store, tmp_path) for _ in range(6)]
    owners = [RunLease(f"host:{n}:x", 30.0) for n in range(6)]

    async def take(handle: WorkflowStore, lease: RunLease) -> str | None:
        try:
            await handle.start_attempt("r", lease=lease)
        except WorkflowRunBusyError as exc:
            return exc.holder
        return None

    holders = await asyncio.gather(*(take(h, o) for h, o in zip(handles, owners, strict=True)))
    winners = [o.owner for o, h in zip(owners, holders, strict=True) if h is None]
    assert len(winners) == 1
    # Every loser was told who won.
    assert all(h == winners[0] for h in holders if h is not None)
    run = await store.get_run("r")
    assert run is not None and (run.lease_owner, run.attempts) == (winners[0], 2)
    for handle in handles:
        if handle is not store:
            await handle.aclose()
