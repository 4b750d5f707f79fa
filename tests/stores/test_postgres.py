"""What only the PostgreSQL stores have to show, on a real server: writers on several connections
and processes, O(1) appends measured in rows touched, corruption, migrations, connection
ownership, cancellation and reconnection. The shared behaviour is in the contract suites."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest
from psycopg import pq
from tests.helpers import assistant, text_of, user
from tests.postgres_server import postgres_url

from tether.errors import NotJSONSafeError, StoreCorruptError, StoreError
from tether.stores import NewRunEvent, RunInfo
from tether.stores.postgres import (
    MIGRATIONS_TABLE,
    Connection,
    PostgresMessageStore,
    PostgresMigrations,
    PostgresRunStore,
    PostgresWorkflowStore,
    schema,
)


@pytest.fixture
def url() -> str:
    return postgres_url()


@pytest.fixture
async def admin(url: str) -> AsyncIterator[Connection]:
    """A connection of the test's own to the same schema, for inspecting and damaging tables."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        yield conn


async def rows(conn: Connection, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


async def until(query: Callable[[], Awaitable[object]], expected: object) -> None:
    """Poll the server until `query()` returns `expected` (pytest's timeout bounds the wait)."""
    # The server's state has no event to await, so this polls (ASYNC110).
    while await query() != expected:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


# -- several writers ---------------------------------------------------------------------------


async def test_writers_on_separate_connections_to_one_scope_lose_nothing(url: str) -> None:
    stores = [PostgresMessageStore(url) for _ in range(6)]
    await stores[0].migrate()

    async def writer(w: int) -> None:
        for i in range(25):
            await stores[w].append("shared", [user(f"{w}:{i}"), assistant(f"{w}:{i}")])

    await asyncio.gather(*(writer(w) for w in range(6)))
    records = await stores[0].load("shared")
    assert len(records) == 6 * 25 * 2 == await stores[5].length("shared")
    # Each append is atomic: its two records are adjacent, and each writer's order holds.
    pairs = [(records[i], records[i + 1]) for i in range(0, len(records), 2)]
    assert all(text_of(u) == text_of(a) for u, a in pairs)
    for w in range(6):
        assert [text_of(u) for u, _ in pairs if text_of(u).startswith(f"{w}:")] == [
            f"{w}:{i}" for i in range(25)
        ]
    for s in stores:
        await s.aclose()


async def test_writers_lose_nothing_on_a_server_that_defaults_to_serializable(url: str) -> None:
    """The stores set READ COMMITTED on their own connections: the row-lock queue must not turn
    into serialization failures because the server (here: the URL) defaults to SERIALIZABLE."""
    strict = url.replace("options=", "options=-cdefault_transaction_isolation%3Dserializable%20")
    stores = [PostgresMessageStore(strict) for _ in range(4)]
    await stores[0].migrate()

    async def writer(w: int) -> None:
        for i in range(15):
            await stores[w].append("shared", [user(f"{w}:{i}")])

    await asyncio.gather(*(writer(w) for w in range(4)))
    assert await stores[0].length("shared") == 60
    for s in stores:
        await s.aclose()


async def test_run_events_from_several_connections_are_numbered_without_gaps(url: str) -> None:
    stores = [PostgresRunStore(url) for _ in range(5)]
    await stores[0].start_run(RunInfo(run_id="r", kind="agent", name="a"))

    async def writer(w: int) -> None:
        for i in range(20):
            await stores[w].append_events(
                "r", [{"type": "tick", "at": 1.0, "data": {"w": w, "i": i}}]
            )

    await asyncio.gather(*(writer(w) for w in range(5)))
    events = await stores[1].events("r")
    assert [e["seq"] for e in events] == list(range(1, 101))
    for w in range(5):
        assert [e["data"]["i"] for e in events if e["data"]["w"] == w] == list(range(20))
    for s in stores:
        await s.aclose()


async def test_workflow_steps_from_several_connections_agree_on_every_step(url: str) -> None:
    stores = [PostgresWorkflowStore(url) for _ in range(4)]
    await stores[0].create_run(run_id="r1", workflow_id="wf", input=None)

    async def writer(n: int) -> None:
        for i in range(15):
            await stores[n].append_step("r1", step_id=f"w{n}-{i}", name="s", output=[n, i])
            # Every writer races for one shared step id: the first output wins for everyone.
            await stores[n].append_step("r1", step_id="shared", name="s", output=n)

    await asyncio.gather(*(writer(n) for n in range(4)))
    steps = await stores[3].list_steps("r1")
    assert [s.seq for s in steps] == list(range(1, 4 * 15 + 2))
    shared = [s for s in steps if s.step_id == "shared"]
    assert len(shared) == 1
    for s in stores:
        got = await s.get_step("r1", "shared")
        assert got is not None and got.output == shared[0].output
        await s.aclose()


WRITER_PROCESS = textwrap.dedent(
    """
    import asyncio, sys
    from tether.stores import RunInfo
    from tether.stores.postgres import PostgresMessageStore, PostgresRunStore, PostgresWorkflowStore

    async def main(url: str, w: int) -> None:
        async with PostgresMessageStore(url) as messages, PostgresRunStore(url) as runs, \\
                PostgresWorkflowStore(url) as workflows:
            for i in range(20):
                text = f"{w}:{i}"
                await messages.append("shared", [{"role": "user", "content": [{"type": "text", "text": text}]}])
                await runs.append_events("r", [{"type": "tick", "at": 1.0, "data": {"w": w, "i": i}}])
                await workflows.append_step("wf", step_id=text, name="s", output=i)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


async def test_writer_processes_lose_nothing(url: str) -> None:
    """Three processes start on a fresh schema at once: they race to migrate it, then append to
    one scope, one run and one workflow journal."""
    runs, workflows = PostgresRunStore(url), PostgresWorkflowStore(url)
    await runs.start_run(RunInfo(run_id="r", kind="agent", name="a"))
    await workflows.create_run(run_id="wf", workflow_id="wf", input=None)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WRITER_PROCESS,
            url,
            str(w),
            stderr=asyncio.subprocess.PIPE,
        )
        for w in range(3)
    ]
    for p in procs:
        _, err = await p.communicate()
        assert p.returncode == 0, err.decode()
    async with PostgresMessageStore(url) as messages:
        texts = [text_of(r) for r in await messages.load("shared")]
    assert len(texts) == 60
    for w in range(3):
        assert [t for t in texts if t.startswith(f"{w}:")] == [f"{w}:{i}" for i in range(20)]
    assert [e["seq"] for e in await runs.events("r")] == list(range(1, 61))
    assert [s.seq for s in await workflows.list_steps("wf")] == list(range(1, 61))
    await runs.aclose()
    await workflows.aclose()


# -- O(1) appends ------------------------------------------------------------------------------


async def _rows_touched(conn: Connection, tables: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """This transaction's table counters so far: scans, tuples read, inserted, updated."""
    found = await rows(
        conn,
        "SELECT relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0),"
        " n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables"
        " WHERE schemaname = current_schema() AND relname = ANY(%s)",
        list(tables),
    )
    return {name: tuple(counts) for name, *counts in found}


async def _cost(conn: Connection, tables: tuple[str, ...], op: Any) -> dict[str, tuple[int, ...]]:
    """Counters of one operation run on `conn` inside a transaction that is then rolled back."""
    async with conn.transaction(force_rollback=True):
        before = await _rows_touched(conn, tables)
        await op()
        after = await _rows_touched(conn, tables)
    zero = (0,) * 6
    return {
        t: tuple(a - b for a, b in zip(after[t], before.get(t, zero), strict=True)) for t in after
    }


async def test_an_append_touches_the_same_rows_at_record_10_and_record_10000(url: str) -> None:
    """O(1) appends, measured in PostgreSQL's own per-transaction table counters (deterministic,
    unlike time): one message at 10 and at 10,000 records costs exactly the same scans and rows,
    and never a sequential scan."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        store = PostgresMessageStore(conn)
        await store.append("small", [user(str(i)) for i in range(10)])
        await store.append("big", [user(str(i)) for i in range(10_000)])
        await conn.execute("ANALYZE")
        # The scope row is found through its primary key whatever the transcript length; the
        # records table, the one that grows, is not even read.
        tables = ("tether_messages",)
        small = await _cost(conn, tables, lambda: store.append("small", [user("one more")]))
        big = await _cost(conn, tables, lambda: store.append("big", [user("one more")]))
        assert small == big == {"tether_messages": (0, 0, 0, 0, 1, 0)}, (small, big)
        assert await store.length("big") == 10_000  # the measured appends were rolled back
        await store.aclose()


async def test_run_events_and_workflow_steps_cost_the_same_at_10_and_10000(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        runs, workflows = PostgresRunStore(conn), PostgresWorkflowStore(conn)
        for run_id, n in (("small", 10), ("big", 10_000)):
            await runs.start_run(RunInfo(run_id=run_id, kind="agent", name="a"))
            await runs.append_events(run_id, [{"type": "t", "at": 1.0, "data": {}}] * n)
            await workflows.create_run(run_id=run_id, workflow_id="wf", input=None)
            await conn.execute(
                "INSERT INTO tether_workflow_steps (run_id, step_id, seq, name, output, created_at)"
                " SELECT %s, 's' || i, i, 's', '1', 0 FROM generate_series(1, %s) AS i",
                (run_id, n),
            )
        await conn.execute("ANALYZE")

        def event(run_id: str) -> Any:
            return lambda: runs.append_events(run_id, [{"type": "t", "at": 1.0, "data": {}}])

        def step(run_id: str) -> Any:
            return lambda: workflows.append_step(run_id, step_id="new", name="s", output=1)

        tables = ("tether_run_events",)
        small, big = (
            await _cost(conn, tables, event("small")),
            await _cost(conn, tables, event("big")),
        )
        assert small == big == {"tether_run_events": (0, 0, 0, 0, 1, 0)}, (small, big)
        # A step is looked up and numbered through the (run_id, …) indexes: two index probes.
        tables = ("tether_workflow_steps",)
        small, big = (
            await _cost(conn, tables, step("small")),
            await _cost(conn, tables, step("big")),
        )
        assert small == big, (small, big)
        assert small["tether_workflow_steps"][:2] == (0, 0), small  # no sequential scan
        assert (await workflows.list_steps("big"))[-1].seq == 10_000


# -- what is stored --------------------------------------------------------------------------


async def test_records_come_back_exactly_as_written(url: str) -> None:
    """Stored as JSON text, not jsonb: key order and non-ASCII text survive byte for byte."""
    record: Any = {
        "role": "user",
        "z": 1,
        "content": [{"type": "text", "text": "ça « va » 🙂"}],
        "a": None,
    }
    async with PostgresMessageStore(url) as store:
        await store.append("s", [record])
        (loaded,) = await store.load("s")
    assert list(loaded) == ["role", "z", "content", "a"] and loaded == record


async def test_text_postgres_cannot_hold_is_a_store_error_and_writes_nothing(url: str) -> None:
    async with PostgresMessageStore(url) as store:
        await store.append("s", [user("kept")])
        with pytest.raises(NotJSONSafeError, match="lone surrogate"):
            await store.append("s", [user("kept"), user("lone \ud800 surrogate")])
        with pytest.raises(StoreError, match="NUL"):
            await store.append("nul\x00scope", [user("x")])
        assert await store.load("s") == [user("kept")]
        assert await store.append("s", [user("still fine")]) == 2


async def test_a_corrupt_record_is_reported_and_nothing_is_lost(
    url: str, admin: Connection
) -> None:
    async with PostgresMessageStore(url) as store:
        await store.append("s", [user("ok"), user("to be broken")])
        await store.append("other", [user("untouched")])
        await admin.execute(
            "UPDATE tether_messages SET record = '{not json' WHERE scope = 's' AND seq = 1"
        )
        with pytest.raises(StoreCorruptError, match=r"'s', record 1"):
            await store.load("s")
        assert await store.load("s", start=2) == []
        assert await store.load("other") == [user("untouched")]
        assert await store.append("s", [user("after")]) == 3
        assert await rows(
            admin, "SELECT record FROM tether_messages WHERE scope = 's' AND seq = 1"
        ) == [("{not json",)]


async def test_corrupt_run_events_and_summaries_are_reported(url: str, admin: Connection) -> None:
    async with PostgresRunStore(url) as store:
        await store.start_run(RunInfo(run_id="r", kind="agent", name="a", tags=["t"]))
        await store.append_events("r", [{"type": "x", "at": 1.0, "data": {"k": 1}}])
        await admin.execute("UPDATE tether_run_events SET data = 'nope' WHERE run_id = 'r'")
        with pytest.raises(StoreCorruptError, match="'r', event 1"):
            await store.events("r")
        await admin.execute("UPDATE tether_runs SET tags = '[oops' WHERE run_id = 'r'")
        with pytest.raises(StoreCorruptError, match="'r'"):
            await store.get_run("r")
        assert await store.append_events("r", [{"type": "y", "at": 2.0, "data": {}}]) == 2


async def test_runs_messages_and_journals_survive_new_store_instances(url: str) -> None:
    async with (
        PostgresMessageStore(url) as m,
        PostgresRunStore(url) as r,
        PostgresWorkflowStore(url) as w,
    ):
        await m.append("s", [user("persisted")])
        await m.set_title("s", "kept")
        await r.start_run(RunInfo(run_id="r", kind="agent", name="a", memory_scope="s"))
        await w.create_run(run_id="wf", workflow_id="wf", input={"q": 1})
        await w.append_step("wf", step_id="s", name="s", output=[1])
    async with (
        PostgresMessageStore(url) as m,
        PostgresRunStore(url) as r,
        PostgresWorkflowStore(url) as w,
    ):
        assert await m.load("s") == [user("persisted")] and await m.get_title("s") == "kept"
        assert [x.run_id for x in await r.list_runs(memory_scope="s")] == ["r"]
        assert [s.output for s in await w.list_steps("wf")] == [[1]]


# -- migrations --------------------------------------------------------------------------------


async def test_the_stores_record_their_one_schema_as_named_migrations(
    url: str, admin: Connection
) -> None:
    stores = [PostgresMessageStore(url), PostgresRunStore(url), PostgresWorkflowStore(url)]
    # The first store to migrate applies the schema every store shares; the others find it.
    assert [await s.migrate() for s in stores] == [schema.names, [], []]
    assert schema.names[0] == "m001_initial_schema"
    assert [await s.migrate() for s in stores] == [[], [], []]
    assert await rows(admin, f"SELECT store, name FROM {MIGRATIONS_TABLE} ORDER BY id") == [
        ("tether", name) for name in schema.names
    ]
    assert await schema.applied(admin) == schema.names
    again = PostgresMessageStore(url)
    assert await again.migrate() == []
    for s in [*stores, again]:
        await s.aclose()


async def test_connections_racing_to_migrate_a_fresh_schema_apply_each_migration_once(
    url: str, admin: Connection
) -> None:
    stores = [PostgresWorkflowStore(url) for _ in range(6)]
    applied = await asyncio.gather(*(s.migrate() for s in stores))
    assert sorted(applied) == [[]] * 5 + [schema.names]
    names = len(schema.names)
    assert await rows(admin, f"SELECT count(*) FROM {MIGRATIONS_TABLE}") == [(names,)]
    for s in stores:
        await s.aclose()


async def test_a_schema_written_by_a_newer_tether_is_refused(url: str, admin: Connection) -> None:
    async with PostgresMessageStore(url) as store:
        await store.append("s", [user("kept")])
    await admin.execute(
        f"INSERT INTO {MIGRATIONS_TABLE} (store, name, applied_at) VALUES ('tether', 'm999_future', now())"
    )
    async with PostgresMessageStore(url) as newer:
        with pytest.raises(StoreError, match=r"newer tether.*m999_future.*upgrade tether"):
            await newer.load("s")
    async with PostgresRunStore(url) as runs:  # every store of the database refuses it
        with pytest.raises(StoreError, match=r"newer tether"):
            await runs.list_runs()
    kept = '{"role":"user","content":[{"type":"text","text":"kept"}]}'
    assert await rows(admin, "SELECT record FROM tether_messages") == [(kept,)]


async def test_a_failing_migration_leaves_nothing_behind(admin: Connection) -> None:
    migrations = PostgresMigrations("demo")

    @migrations
    async def m001_create_table(conn: Connection) -> None:
        await conn.execute("CREATE TABLE demo_one (x INT)")

    @migrations
    async def m002_broken(conn: Connection) -> None:
        await conn.execute("CREATE TABLE demo_two (x NO_SUCH_TYPE)")

    with pytest.raises(StoreError, match=r"migration demo\.m002_broken failed"):
        await migrations.apply(admin)
    assert await migrations.applied(admin) == []
    assert await rows(admin, "SELECT to_regclass('demo_one')") == [(None,)]


def test_migration_names_are_checked_and_append_only() -> None:
    migrations = PostgresMigrations("demo")

    async def m002_second(conn: Connection) -> None:
        return None

    async def m001_first(conn: Connection) -> None:
        return None

    async def create_things(conn: Connection) -> None:
        return None

    migrations(m002_second)
    with pytest.raises(ValueError, match="append-only"):
        migrations(m001_first)
    with pytest.raises(ValueError, match="m001_what_changed"):
        migrations(create_things)
    assert migrations.names == ["m002_second"]


# -- connections ---------------------------------------------------------------------------------


async def test_a_store_on_a_callers_connection_leaves_it_open_and_idle(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url) as conn:  # not autocommit
        store = PostgresMessageStore(conn)
        await store.append("s", [user("hi")])
        assert await store.load("s") == [user("hi")]
        # Reads and writes each ran in a transaction of their own: nothing is left open.
        assert conn.info.transaction_status == pq.TransactionStatus.IDLE
        await store.aclose()
        await store.aclose()
        assert not conn.closed
        assert await rows(conn, "SELECT count(*) FROM tether_messages") == [(1,)]
        with pytest.raises(StoreError, match="closed"):
            await store.load("s")
    other = PostgresMessageStore(conn)
    with pytest.raises(StoreError, match="caller's PostgreSQL connection"):
        await other.load("s")


async def test_stores_sharing_a_callers_connection_take_turns(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        messages, runs = PostgresMessageStore(conn), PostgresRunStore(conn)
        workflows = PostgresWorkflowStore(conn)
        await workflows.create_run(run_id="wf", workflow_id="wf", input=None)

        async def write_messages() -> None:
            for i in range(20):
                await messages.replace("s", [user(str(i))])
                await messages.append("s", [assistant(str(i))])

        async def write_runs() -> None:
            await runs.start_run(RunInfo(run_id="r", kind="agent", name="a"))
            for i in range(20):
                await runs.append_events("r", [{"type": "tick", "at": 1.0, "data": {"i": i}}])

        async def write_steps() -> None:
            for i in range(20):
                await workflows.append_step("wf", step_id=str(i), name="s", output=i)

        await asyncio.gather(write_messages(), write_runs(), write_steps())
        assert await messages.load("s") == [user("19"), assistant("19")]
        assert len(await runs.events("r")) == 20
        assert len(await workflows.list_steps("wf")) == 20


async def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    url = "postgresql://tether:s3cret@127.0.0.1:1/tether"
    store = PostgresMessageStore(url)
    assert "s3cret" not in repr(store) and "127.0.0.1:1/tether" in repr(store)
    with pytest.raises(
        StoreError, match=r"cannot connect to PostgreSQL at tether@127\.0\.0\.1:1/tether"
    ) as info:
        await store.load("s")
    assert "s3cret" not in str(info.value)
    assert "check the store URL" in str(info.value)
    await store.aclose()


def test_a_store_needs_a_url_a_pool_or_an_async_connection() -> None:
    with pytest.raises(StoreError, match="URL, a psycopg_pool AsyncConnectionPool or a psycopg"):
        PostgresRunStore(42)  # type: ignore[arg-type]


async def test_a_dropped_connection_fails_one_call_and_the_next_reconnects(
    url: str, admin: Connection
) -> None:
    tagged = f"{url}&application_name=dropped&pool_min_size=2"
    async with PostgresMessageStore(tagged) as store:
        await store.append("s", [user("before")])
        mine = "SELECT pid FROM pg_stat_activity WHERE application_name = 'dropped'"
        count = f"SELECT count(*) >= 2 FROM ({mine}) p"
        await until(lambda: rows(admin, count), [(True,)])  # the pool keeps two open
        # The server drops every connection of the store's pool (as a restart would).
        await admin.execute(f"SELECT pg_terminate_backend(pid) FROM ({mine}) p")
        await until(lambda: rows(admin, mine), [])
        with pytest.raises(StoreError, match=r"lost its PostgreSQL connection.*reconnects"):
            await store.load("s")
        assert await store.append("s", [user("after")]) == 2
        assert await store.load("s") == [user("before"), user("after")]


async def test_an_append_cancelled_while_it_waits_for_the_scope_writes_nothing(
    url: str, admin: Connection
) -> None:
    async with PostgresMessageStore(f"{url}&application_name=cancelled") as store:
        await store.append("s", [user("first")])
        async with admin.transaction():
            # Another writer holds the scope row: the store's append has to wait for it.
            await admin.execute("SELECT 1 FROM tether_message_scopes WHERE scope = 's' FOR UPDATE")
            task = asyncio.create_task(store.append("s", [user("cancelled")]))
            waiting = (
                "SELECT 1 FROM pg_stat_activity"
                " WHERE application_name = 'cancelled' AND wait_event_type = 'Lock'"
            )
            await until(lambda: rows(admin, waiting), [(1,)])
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert await store.load("s") == [user("first")]
        assert await store.append("s", [user("second")]) == 2


# -- the optional extra --------------------------------------------------------------------------


def test_without_psycopg_only_the_postgres_names_fail_and_they_say_what_to_install() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["psycopg"] = None  # as if the postgres extra were not installed
        import tether.stores
        from tether.stores import SqliteMessageStore
        from tether.errors import ConfigError
        from tether.lab._stores import open_stores
        print("listed:", "PostgresMessageStore" in tether.stores.__all__)
        try:
            tether.stores.PostgresMessageStore
        except ImportError as exc:
            print("import:", exc)
        try:
            open_stores("postgresql://u:pw@db/x", None)
        except ConfigError as exc:
            print("url:", exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "listed: False" in done.stdout
    assert (
        "import: tether's PostgreSQL stores need psycopg 3 and psycopg_pool: "
        "pip install 'tether[postgres]'" in done.stdout
    )
    assert (
        "url: store URL postgresql://…: PostgreSQL stores need psycopg 3 and psycopg_pool"
        in done.stdout
    )
    assert "pw" not in done.stdout


# -- the connection pool -------------------------------------------------------------------------


async def test_one_store_runs_operations_on_several_connections_at_once(
    url: str, admin: Connection
) -> None:
    async with PostgresMessageStore(url) as store:
        await store.append("a", [user("a0")])
        await store.append("b", [user("b0")])
        async with admin.transaction():
            await admin.execute("SELECT 1 FROM tether_message_scopes WHERE scope = 'a' FOR UPDATE")
            blocked = asyncio.create_task(store.append("a", [user("a1")]))
            await asyncio.sleep(0.1)
            assert not blocked.done()
            # The waiting append holds one connection of the pool; the store goes on with others.
            assert await asyncio.wait_for(store.append("b", [user("b1")]), 5) == 2
            assert await asyncio.wait_for(store.load("b"), 5) == [user("b0"), user("b1")]
        assert await blocked == 2


async def test_the_pool_is_sized_in_the_store_url(url: str, admin: Connection) -> None:
    async with PostgresMessageStore(f"{url}&application_name=sized&pool_max_size=2") as store:
        scopes = [f"s{i}" for i in range(5)]
        for scope in scopes:
            await store.append(scope, [user("0")])
        mine = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sized'"
        waiting = f"{mine} AND wait_event_type = 'Lock'"
        async with admin.transaction():
            await admin.execute("SELECT 1 FROM tether_message_scopes FOR UPDATE")
            tasks = [asyncio.create_task(store.append(s, [user("1")])) for s in scopes]
            await until(lambda: rows(admin, waiting), [(2,)])
            await asyncio.sleep(0.2)
            # Two connections wait on the row locks; the other appends wait for a connection.
            assert await rows(admin, mine) == [(2,)]
            assert not any(t.done() for t in tasks)
        assert await asyncio.gather(*tasks) == [2] * 5


def test_pool_sizes_are_read_from_the_url_and_kept_from_libpq() -> None:
    from tether.errors import ConfigError
    from tether.stores.postgres import POOL_MAX_SIZE, POOL_MIN_SIZE, pool_settings

    assert pool_settings("postgresql://u@h/db") == ("postgresql://u@h/db", 1, 10)
    assert (POOL_MIN_SIZE, POOL_MAX_SIZE) == (1, 10)
    url, low, high = pool_settings(
        "postgresql://u@h/db?pool_min_size=2&options=-csearch_path%3Dx&pool_max_size=20"
    )
    assert (url, low, high) == ("postgresql://u@h/db?options=-csearch_path%3Dx", 2, 20)
    assert pool_settings("postgresql://u@h/db?pool_min_size=12")[1:] == (12, 12)
    assert pool_settings("host=h dbname=db") == ("host=h dbname=db", 1, 10)
    for bad, why in (
        ("pool_max_size=0", "positive integer"),
        ("pool_max_size=many", "positive integer"),
        ("pool_min_size=5&pool_max_size=2", "above pool_max_size"),
    ):
        with pytest.raises(ConfigError, match=why):
            pool_settings(f"postgresql://u:secret@h/db?{bad}")
        with pytest.raises(ConfigError) as info:
            pool_settings(f"postgresql://u:secret@h/db?{bad}")
        assert "secret" not in str(info.value)


async def test_a_runtime_s_three_stores_share_one_pool_and_close_it(url: str) -> None:
    from tether.lab import Runtime
    from tether.stores.postgres import PostgresBacked

    lab = Runtime(store=url, version=False)
    stores = (lab.message_store, lab.run_store, lab.workflow_store)
    assert all(isinstance(s, PostgresBacked) for s in stores)
    pools = {id(s._pool) for s in stores}  # type: ignore[union-attr]
    assert len(pools) == 1
    await lab.message_store.append("s", [user("x")])
    assert await lab.run_store.get_run("nope") is None
    pool = lab.message_store._pool  # type: ignore[attr-defined]
    await lab.aclose()
    assert pool.closed


async def test_lease_renewal_and_batched_event_writes_never_deadlock(url: str) -> None:
    """Both lock the run rows they touch in one order (by run id): a renewal of many runs and a
    batch of many runs' events, in opposite orders and at the same moments, never wait for each
    other in a circle (PostgreSQL would fail one of them with a deadlock)."""
    writer, renewer = PostgresRunStore(url), PostgresRunStore(url)
    ids = [f"run-{n:02d}" for n in range(12)]
    for run_id in ids:
        await writer.start_run(RunInfo(run_id=run_id, kind="agent", name="a"), lease_ttl=30)
    event: NewRunEvent = {"type": "tick", "at": 1.0, "data": {}}

    async def write() -> None:
        for _ in range(40):
            # Newest first: the order a batcher may gather them in.
            await writer.append_events_many([(r, [event], None) for r in reversed(ids)])

    async def renew() -> None:
        for _ in range(40):
            await renewer.renew_leases(ids, lease_ttl=30)

    await asyncio.gather(write(), renew(), write(), renew())
    assert [len(await writer.events(r)) for r in ids] == [80] * len(ids)
    await writer.aclose()
    await renewer.aclose()
