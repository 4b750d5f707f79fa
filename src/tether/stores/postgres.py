"""PostgreSQL storage: the three tether stores on a server that several processes or machines share.

Needs the `postgres` extra (psycopg 3): ``pip install 'tether[postgres]'``.

`PostgresMessageStore`, `PostgresRunStore` and `PostgresWorkflowStore` pass the same contract suites
as the in-memory and SQLite stores. Each one takes a psycopg `AsyncConnection` from the caller (it
stays the caller's) or a URL (the store opens its own connection on first use, opens a new one
on the call after the server dropped it, and closes it in `aclose()`):

```python
messages = PostgresMessageStore("postgresql://tether@db.internal/tether")
await messages.append("notes", [{"role": "user", "content": [...]}])
```

How it is built:

- **One connection per store, one operation at a time.** psycopg_pool is not a dependency, so a
  store holds a single `AsyncConnection` and runs its operations one after another under an
  `asyncio.Lock` (stores given the same connection share one lock, so their transactions never
  interleave). A process that wants more parallelism opens more stores.
- **Ordered named migrations.** `PostgresMigrations(store)` is an append-only list of async
  functions named `mNNN_what_changed`, recorded per store in `tether_migrations`. They run on
  first use in one transaction under a transaction-scoped advisory lock, so processes that start
  together apply each migration exactly once.
- **Message and event appends are one statement.** The scope (or run) row carries the length.
  An append bumps it with `INSERT … ON CONFLICT DO UPDATE … RETURNING` (or `UPDATE … RETURNING`),
  which row-locks it until commit, and inserts the new records numbered after it in the same
  statement. That costs the same at record 10 and record 10,000, and writers on other
  connections queue on the row lock instead of losing or duplicating records; `(scope, seq)` is
  the primary key as a backstop. A store's own connection runs READ COMMITTED whatever the
  server's default, which that queue relies on; a caller's connection keeps the caller's
  settings. A workflow step append locks its run row the same way, then numbers the step
  through the `(run_id, seq)` index.
- **JSON is stored as text**, not `jsonb`: what is read back is exactly the text that was
  written (key order included), and a damaged value is reported as `StoreCorruptError` with the
  record left in place, as in SQLite.
- Tables are prefixed `tether_`. To keep them in a schema of their own, name it in the URL:
  ``postgresql://host/db?options=-csearch_path%3Dtether``.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, Literal, Self, TypeAlias

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import tuple_row
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "tether's PostgreSQL stores need psycopg 3: pip install 'tether[postgres]'"
    ) from exc

from ..errors import StoreError
from ._codecs import (
    LAST_INDEX,
    QUERY_COLUMNS,
    RUN_COLUMNS,
    RUN_INFO_COLUMNS,
    SCOPE_COLUMNS,
    STEP_COLUMNS,
    check_finish,
    check_run_status,
    check_title,
    decode_cursor,
    decode_event,
    decode_records,
    encode_events,
    encode_json,
    encode_records,
    encode_run_info,
    end_time,
    finish_sets,
    finish_values,
    query_where,
    run_from_row,
    run_info_from_row,
    run_page,
    run_tags,
    step_from_row,
    where_equal,
)
from ._migrations import MigrationList
from .message_store import ScopeInfo, StoredRecord
from .run_store import NewRunEvent, RunEvent, RunInfo, RunPage, RunQuery
from .workflow_store import RunStatus, StepRecord, WorkflowRunRecord

__all__ = [
    "MIGRATIONS_TABLE",
    "Connection",
    "PostgresBacked",
    "PostgresMessageStore",
    "PostgresMigrations",
    "PostgresRunStore",
    "PostgresWorkflowStore",
    "message_migrations",
    "run_migrations",
    "workflow_migrations",
]

Connection: TypeAlias = "psycopg.AsyncConnection[Any]"
"""A psycopg 3 async connection (any row factory: the stores read tuples through their own
cursors)."""

Row: TypeAlias = tuple[Any, ...]

MIGRATIONS_TABLE: Final = "tether_migrations"
"""Where applied migrations are recorded, one row per (store, name)."""

PostgresMigration: TypeAlias = Callable[["psycopg.AsyncConnection[Any]"], Awaitable[None]]
"""One schema change: an async function named `mNNN_what_changed` that runs its statements on
`conn` inside the migration transaction (it must not commit)."""


# pg_advisory_xact_lock key for migrations ("tetherMg"): one database-wide key, held only for
# the migration transaction, so two processes never create the same table at once.
_MIGRATION_LOCK: Final = 0x7465_7468_6572_4D67


Params: TypeAlias = Sequence[Any] | dict[str, Any]


async def _exec(conn: Connection, query: str, params: Params = ()) -> psycopg.AsyncCursor[Row]:
    """Run `query` on a tuple-row cursor of `conn` (whatever row factory the caller set)."""
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(query, params)
    return cur


async def _one(conn: Connection, query: str, params: Params = ()) -> Row | None:
    cur = await _exec(conn, query, params)
    return await cur.fetchone()


async def _all(conn: Connection, query: str, params: Params = ()) -> list[Row]:
    cur = await _exec(conn, query, params)
    return await cur.fetchall()


class PostgresMigrations(MigrationList[PostgresMigration]):
    """The ordered, append-only migrations of one PostgreSQL store.

    ```python
    my_migrations = PostgresMigrations("messages")

    @my_migrations
    async def m001_create_tables(conn: Connection) -> None:
        await conn.execute("CREATE TABLE ...")
    ```

    Names must match `mNNN_what_changed` and increase in declaration order; a name out of order
    is a programming error caught at import time. Never edit or reorder a migration that has
    shipped; append a new one.
    """

    async def applied(self, conn: Connection) -> list[str]:
        """The names already recorded for this store (in the schema `conn` sees), in order."""
        row = await _one(conn, "SELECT to_regclass(%s)::text", (MIGRATIONS_TABLE,))
        if row is None or row[0] is None:
            return []
        rows = await _all(
            conn,
            f"SELECT name FROM {MIGRATIONS_TABLE} WHERE store = %s ORDER BY id",
            (self.store,),
        )
        return [str(name) for (name,) in rows]

    async def apply(self, conn: Connection) -> list[str]:
        """Apply the migrations not yet recorded, in one transaction; return the names applied.

        Raises:
            StoreError: the database records a migration this code does not know (a newer tether
                wrote it), or a migration failed (nothing of this call is kept).
        """
        done: list[str] = []
        async with conn.transaction():
            await _exec(conn, "SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await _exec(
                conn,
                f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                " id BIGINT GENERATED ALWAYS AS IDENTITY,"
                " store TEXT NOT NULL,"
                " name TEXT NOT NULL,"
                " applied_at TIMESTAMPTZ NOT NULL,"
                " PRIMARY KEY (store, name))",
            )
            applied = await self.applied(conn)
            known = set(self.names)
            unknown = [name for name in applied if name not in known]
            if unknown:
                raise StoreError(
                    f"the {self.store!r} tables were migrated by a newer tether "
                    f"(unknown migrations {unknown}); upgrade tether to open this database"
                )
            for name, fn in self._items:
                if name in applied:
                    continue
                try:
                    await fn(conn)
                except psycopg.Error as exc:
                    raise StoreError(f"migration {self.store}.{name} failed: {exc}") from exc
                await _exec(
                    conn,
                    f"INSERT INTO {MIGRATIONS_TABLE} (store, name, applied_at) VALUES (%s, %s, %s)",
                    (self.store, name, datetime.now(UTC)),
                )
                done.append(name)
        return done


# -- the shared connection plumbing ----------------------------------------------------------

_LOCKS: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


def connection_async_lock(conn: Connection) -> asyncio.Lock:
    """The one asyncio lock every tether store takes around its use of the caller's `conn`.

    Two stores on one connection share its transaction state: without one lock, a statement of
    one store would run inside the other store's open transaction.
    """
    lock = _LOCKS.get(conn)
    if lock is None:
        lock = _LOCKS[conn] = asyncio.Lock()
    return lock


def _describe(conninfo: str) -> str:
    """`user@host:port/dbname` of a URL or conninfo string, without its password."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "an unparsable connection string"
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    user = f"{params['user']}@" if params.get("user") else ""
    port = params.get("port") or 5432
    return f"{user}{host}:{port}/{params.get('dbname') or ''}"


class PostgresBacked:
    """Shared plumbing of the PostgreSQL stores: the connection (the caller's, or one opened
    lazily from a URL), its lock, migrating on first use, and mapping psycopg errors."""

    _migrations: ClassVar[PostgresMigrations]
    _kind: ClassVar[str] = "store"

    def __init__(self, conn: Connection | str) -> None:
        """Args:
        conn: A psycopg `AsyncConnection` of the caller's (never closed by the store), or a
            PostgreSQL URL / conninfo string: the store connects on first use (autocommit)
            and closes that connection in `aclose()`.
        """
        self._conninfo: str | None
        self._conn: Connection | None
        if isinstance(conn, str):
            self._conninfo, self._conn, self._lock = conn, None, asyncio.Lock()
        elif isinstance(conn, psycopg.AsyncConnection):
            self._conninfo, self._conn, self._lock = None, conn, connection_async_lock(conn)
        else:
            raise StoreError(
                f"{type(self).__name__} takes a PostgreSQL URL or a psycopg AsyncConnection, "
                f"got {type(conn).__name__}"
            )
        self._migrated = False
        self._closed = False

    @classmethod
    def open(cls, url: str) -> Self:
        """A store that opens (on first use) and later closes its own connection to `url`."""
        return cls(url)

    def __repr__(self) -> str:
        where = _describe(self._conninfo) if self._conninfo is not None else "caller's connection"
        return f"{type(self).__name__}({where})"

    async def _connect(self) -> Connection:
        if self._closed:
            raise StoreError(f"the {self._kind} is closed")
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._conninfo is None:
            raise StoreError(f"the caller's PostgreSQL connection of the {self._kind} is closed")
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {_describe(self._conninfo)}: {exc}; "
                "check the store URL and that the server is running"
            ) from exc
        try:
            # The row-lock scheme relies on READ COMMITTED (a waiting writer re-reads the row
            # it waited for); a server or URL defaulting to a stricter level would turn
            # contention into serialization failures instead.
            await _exec(
                conn, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"
            )
        except psycopg.Error as exc:
            await conn.close()
            raise StoreError(f"cannot set up the PostgreSQL session: {exc}") from exc
        self._conn = conn
        return conn

    async def _connection(self) -> Connection:
        conn = await self._connect()
        if not self._migrated:
            await self._migrations.apply(conn)
            self._migrated = True
        return conn

    async def migrate(self) -> list[str]:
        """Connect and apply the migrations not yet recorded now rather than on first use;
        return the names this call applied.

        Raises:
            StoreError: the server cannot be reached, or the schema was written by a newer
                tether, or a migration failed.
        """
        async with self._lock:
            try:
                conn = await self._connect()
                if self._migrated:
                    return []
                names = await self._migrations.apply(conn)
            except psycopg.Error as exc:
                raise await self._failure(exc) from exc
            self._migrated = True
            return names

    @asynccontextmanager
    async def _session(self, *, atomic: bool = False) -> AsyncIterator[Connection]:
        """The connection, for one operation. `atomic` wraps it in a transaction; so does a
        caller's connection outside autocommit (so a read never leaves it idle in a transaction).
        """
        async with self._lock:
            try:
                conn = await self._connection()
                if atomic or not conn.autocommit:
                    async with conn.transaction():
                        yield conn
                else:
                    yield conn
            except psycopg.Error as exc:
                raise await self._failure(exc) from exc
            except UnicodeEncodeError as exc:
                raise StoreError(
                    f"text that is not valid UTF-8 cannot be stored in PostgreSQL: {exc}"
                ) from exc

    async def _failure(self, exc: psycopg.Error) -> StoreError:
        conn = self._conn
        if conn is not None and conn.closed:
            if self._conninfo is None:
                return StoreError(
                    f"the {self._kind} lost the caller's PostgreSQL connection: {exc}"
                )
            self._conn = None
            await conn.close()
            return StoreError(
                f"the {self._kind} lost its PostgreSQL connection ({exc}); the next call reconnects"
            )
        return StoreError(f"PostgreSQL {type(exc).__name__}: {exc}")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection if the store opened it; idempotent. Later use is a StoreError."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._conninfo is not None:
                await conn.close()


# -- MessageStore ----------------------------------------------------------------------------

message_migrations = PostgresMigrations("messages")
"""Schema of `PostgresMessageStore`. Append only."""


@message_migrations
async def m001_create_message_tables(conn: Connection) -> None:
    await _exec(
        conn,
        "CREATE TABLE tether_message_scopes ("
        " id BIGINT GENERATED ALWAYS AS IDENTITY,"
        " scope TEXT PRIMARY KEY,"
        " length BIGINT NOT NULL DEFAULT 0,"
        " title TEXT,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL)",
    )
    await _exec(
        conn,
        "CREATE TABLE tether_messages ("
        " scope TEXT NOT NULL REFERENCES tether_message_scopes (scope) ON DELETE CASCADE,"
        " seq BIGINT NOT NULL,"
        " record TEXT NOT NULL,"
        " PRIMARY KEY (scope, seq))",
    )
    await _exec(
        conn,
        "CREATE INDEX tether_message_scopes_updated ON tether_message_scopes (updated_at, id)",
    )


# One statement: bump the scope's length (creating the row, or row-locking it until commit) and
# insert the records numbered after the old length.
_APPEND = """
WITH bumped AS (
    INSERT INTO tether_message_scopes AS s (scope, length, created_at, updated_at)
    VALUES (%(scope)s, %(n)s, %(now)s, %(now)s)
    ON CONFLICT (scope) DO UPDATE
        SET length = s.length + EXCLUDED.length, updated_at = EXCLUDED.updated_at
    RETURNING s.length
), inserted AS (
    INSERT INTO tether_messages (scope, seq, record)
    SELECT %(scope)s, bumped.length - %(n)s + r.i - 1, r.record
    FROM bumped, unnest(%(records)s::text[]) WITH ORDINALITY AS r (record, i)
)
SELECT length FROM bumped
"""


class PostgresMessageStore(PostgresBacked):
    """A MessageStore in PostgreSQL (see the module docstring for how appends stay atomic and
    O(1) with many writers)."""

    _migrations = message_migrations
    _kind = "message store"

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None
    ) -> list[StoredRecord]:
        async with self._session() as conn:
            rows = await _all(
                conn,
                "SELECT seq, record FROM tether_messages WHERE scope = %s AND seq >= %s"
                " AND seq < %s ORDER BY seq",
                (scope, max(start, 0), LAST_INDEX if end is None else end),
            )
        return decode_records(scope, rows[0][0] if rows else 0, [raw for _, raw in rows])

    async def append(self, scope: str, records: Sequence[StoredRecord]) -> int:
        encoded = encode_records(scope, records)
        params = {"scope": scope, "n": len(encoded), "now": time.time(), "records": encoded}
        async with self._session() as conn:
            row = await _one(conn, _APPEND, params)
        assert row is not None  # the upsert always returns the scope row
        return int(row[0])

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        encoded = encode_records(scope, records)
        now = time.time()
        async with self._session(atomic=True) as conn:
            await _exec(
                conn,
                "INSERT INTO tether_message_scopes AS s (scope, length, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (scope) DO UPDATE"
                " SET length = EXCLUDED.length, updated_at = EXCLUDED.updated_at",
                (scope, len(encoded), now, now),
            )
            await _exec(conn, "DELETE FROM tether_messages WHERE scope = %s", (scope,))
            await _exec(
                conn,
                "INSERT INTO tether_messages (scope, seq, record)"
                " SELECT %s, r.i - 1, r.record"
                " FROM unnest(%s::text[]) WITH ORDINALITY AS r (record, i)",
                (scope, encoded),
            )

    async def length(self, scope: str) -> int:
        async with self._session() as conn:
            row = await _one(
                conn, "SELECT length FROM tether_message_scopes WHERE scope = %s", (scope,)
            )
        return int(row[0]) if row is not None else 0

    async def set_title(self, scope: str, title: str) -> None:
        check_title(scope, title)
        now = time.time()
        async with self._session() as conn:
            await _exec(
                conn,
                "INSERT INTO tether_message_scopes (scope, length, title, created_at, updated_at)"
                " VALUES (%s, 0, %s, %s, %s)"
                " ON CONFLICT (scope) DO UPDATE SET title = EXCLUDED.title",
                (scope, title, now, now),
            )

    async def get_title(self, scope: str) -> str | None:
        info = await self.info(scope)
        return info.title if info is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        async with self._session() as conn:
            row = await _one(
                conn,
                f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes WHERE scope = %s",
                (scope,),
            )
        return ScopeInfo(*row) if row is not None else None

    async def scopes(self, *, limit: int = 100, offset: int = 0) -> list[ScopeInfo]:
        async with self._session() as conn:
            rows = await _all(
                conn,
                f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes"
                " ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s",
                (limit, offset),
            )
        return [ScopeInfo(*row) for row in rows]

    async def delete(self, scope: str) -> None:
        async with self._session() as conn:
            # The records go with the scope row (ON DELETE CASCADE), in the same statement.
            await _exec(conn, "DELETE FROM tether_message_scopes WHERE scope = %s", (scope,))


# -- RunStore --------------------------------------------------------------------------------

run_migrations = PostgresMigrations("runs")
"""Schema of `PostgresRunStore`. Append only."""


@run_migrations
async def m001_create_run_tables(conn: Connection) -> None:
    await _exec(
        conn,
        "CREATE TABLE tether_runs ("
        " id BIGINT GENERATED ALWAYS AS IDENTITY,"
        " run_id TEXT PRIMARY KEY,"
        " kind TEXT NOT NULL,"
        " name TEXT NOT NULL,"
        " status TEXT NOT NULL,"
        " started_at DOUBLE PRECISION NOT NULL,"
        " ended_at DOUBLE PRECISION,"
        " tags TEXT NOT NULL,"
        " memory_scope TEXT,"
        " workflow_run_id TEXT,"
        " step_id TEXT,"
        " error TEXT,"
        " meta TEXT NOT NULL,"
        " event_count BIGINT NOT NULL DEFAULT 0)",
    )
    await _exec(
        conn,
        "CREATE TABLE tether_run_events ("
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " seq BIGINT NOT NULL,"
        " type TEXT NOT NULL,"
        " at DOUBLE PRECISION NOT NULL,"
        " data TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq))",
    )
    await _exec(conn, "CREATE INDEX tether_runs_started ON tether_runs (started_at, id)")
    await _exec(conn, "CREATE INDEX tether_runs_workflow ON tether_runs (workflow_run_id)")
    await _exec(conn, "CREATE INDEX tether_runs_scope ON tether_runs (memory_scope)")


@run_migrations
async def m002_run_cost_text_and_filters(conn: Connection) -> None:
    # Cost and usage per run; input and output text for listing and search (a generated
    # tsvector with a GIN index); a tag table and indexes so that a filtered page of a large
    # store is an index range, not a scan.
    await _exec(
        conn,
        "ALTER TABLE tether_runs"
        " ADD COLUMN usage TEXT NOT NULL DEFAULT '{}',"
        " ADD COLUMN cost_usd DOUBLE PRECISION,"
        " ADD COLUMN input_text TEXT NOT NULL DEFAULT '',"
        " ADD COLUMN output_text TEXT NOT NULL DEFAULT '',"
        " ADD COLUMN search tsvector GENERATED ALWAYS AS"
        " (to_tsvector('simple', input_text || ' ' || output_text)) STORED",
    )
    await _exec(
        conn,
        "CREATE TABLE tether_run_tags ("
        " tag TEXT NOT NULL,"
        " run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE,"
        " PRIMARY KEY (tag, run_id))",
    )
    await _exec(
        conn,
        "INSERT INTO tether_run_tags (tag, run_id)"
        " SELECT DISTINCT t.tag, r.run_id FROM tether_runs r,"
        " LATERAL jsonb_array_elements_text(r.tags::jsonb) AS t (tag)"
        " WHERE jsonb_typeof(r.tags::jsonb) = 'array'"
        " ON CONFLICT DO NOTHING",
    )
    await _exec(conn, "CREATE INDEX tether_runs_search ON tether_runs USING GIN (search)")
    await _exec(
        conn, "CREATE INDEX tether_runs_status_started ON tether_runs (status, started_at, id)"
    )
    await _exec(conn, "CREATE INDEX tether_runs_name_started ON tether_runs (name, started_at, id)")


@run_migrations
async def m003_runs_by_parent_and_time(conn: Connection) -> None:
    # Root runs (no parent) newest first, as the run list shows them, from one index range.
    await _exec(conn, "DROP INDEX tether_runs_workflow")
    await _exec(
        conn,
        "CREATE INDEX tether_runs_workflow_started"
        " ON tether_runs (workflow_run_id, started_at, id)",
    )


# One statement, like a message append: the run row's count is bumped (and row-locked) and the
# events are numbered after the old count. No row means the run was never started.
_APPEND_EVENTS = """
WITH bumped AS (
    UPDATE tether_runs SET event_count = event_count + %(n)s
    WHERE run_id = %(run_id)s
    RETURNING event_count
), inserted AS (
    INSERT INTO tether_run_events (run_id, seq, type, at, data)
    SELECT %(run_id)s, bumped.event_count - %(n)s + e.i, e.type, e.at, e.data
    FROM bumped,
        unnest(%(types)s::text[], %(ats)s::float8[], %(datas)s::text[])
        WITH ORDINALITY AS e (type, at, data, i)
)
SELECT event_count FROM bumped
"""


_START_RUN = f"""
WITH created AS (
    INSERT INTO tether_runs ({RUN_INFO_COLUMNS})
    VALUES ({", ".join(f"%(v{i})s" for i in range(16))})
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id
), tagged AS (
    INSERT INTO tether_run_tags (tag, run_id)
    SELECT t.tag, created.run_id FROM created, unnest(%(tags)s::text[]) AS t (tag)
)
SELECT 1 FROM created
"""


class PostgresRunStore(PostgresBacked):
    """A RunStore in PostgreSQL: one row per run, one row per event, numbered per run."""

    _migrations = run_migrations
    _kind = "run store"

    async def start_run(self, info: RunInfo) -> None:
        values = encode_run_info(info)
        async with self._session() as conn:
            row = await _one(
                conn,
                _START_RUN,
                {**{f"v{i}": value for i, value in enumerate(values)}, "tags": run_tags(info)},
            )
        if row is None:
            raise StoreError(f"run {info.run_id!r} already exists")

    async def append_events(self, run_id: str, events: Sequence[NewRunEvent]) -> int:
        encoded = encode_events(run_id, events)
        params = {
            "run_id": run_id,
            "n": len(encoded),
            "types": [kind for kind, _, _ in encoded],
            "ats": [at for _, at, _ in encoded],
            "datas": [raw for _, _, raw in encoded],
        }
        async with self._session() as conn:
            row = await _one(conn, _APPEND_EVENTS, params)
        if row is None:
            raise StoreError(f"run {run_id!r} was never started")
        return int(row[0])

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        ended_at: float | None = None,
        error: str | None = None,
        output_text: str | None = None,
        usage: dict[str, int] | None = None,
        cost_usd: float | None = None,
    ) -> None:
        check_run_status(status)
        end = end_time(status, ended_at)
        extra = finish_values(output_text, usage, cost_usd)
        async with self._session() as conn:
            row = await _one(
                conn,
                f"UPDATE tether_runs SET status = %s, ended_at = %s, error = %s"
                f"{finish_sets('%s', extra)} WHERE run_id = %s RETURNING 1",
                (status, end, error, *extra.values(), run_id),
            )
        if row is None:
            raise StoreError(f"run {run_id!r} was never started")

    async def query_runs(
        self, query: RunQuery, *, limit: int = 50, cursor: str | None = None
    ) -> RunPage:
        conds, args = query_where(query, "%s", "postgres")
        if cursor is not None:
            started, seq = decode_cursor(cursor)
            conds.append("(r.started_at, r.id) < (%s, %s)")
            args.extend((started, seq))
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        async with self._session() as conn:
            rows = await _all(
                conn,
                f"SELECT {QUERY_COLUMNS}, r.id FROM tether_runs r{where}"
                " ORDER BY r.started_at DESC, r.id DESC LIMIT %s",
                (*args, limit + 1),
            )
        return run_page(rows, limit)

    async def get_run(self, run_id: str) -> RunInfo | None:
        async with self._session() as conn:
            row = await _one(
                conn, f"SELECT {RUN_INFO_COLUMNS} FROM tether_runs WHERE run_id = %s", (run_id,)
            )
        return run_info_from_row(row) if row is not None else None

    async def list_runs(
        self,
        *,
        kind: str | None = None,
        workflow_run_id: str | None = None,
        memory_scope: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunInfo]:
        clause, args = where_equal(
            "%s", kind=kind, workflow_run_id=workflow_run_id, memory_scope=memory_scope
        )
        async with self._session() as conn:
            rows = await _all(
                conn,
                f"SELECT {RUN_INFO_COLUMNS} FROM tether_runs{clause}"
                " ORDER BY started_at DESC, id DESC LIMIT %s OFFSET %s",
                (*args, limit, offset),
            )
        return [run_info_from_row(row) for row in rows]

    async def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        async with self._session() as conn:
            rows = await _all(
                conn,
                "SELECT seq, type, at, data FROM tether_run_events"
                " WHERE run_id = %s AND seq > %s ORDER BY seq",
                (run_id, after),
            )
        return [decode_event(run_id, seq, kind, at, raw) for seq, kind, at, raw in rows]


# -- WorkflowStore ---------------------------------------------------------------------------

workflow_migrations = PostgresMigrations("workflow")
"""Schema of `PostgresWorkflowStore`. Append only."""


@workflow_migrations
async def m001_create_workflow_tables(conn: Connection) -> None:
    await _exec(
        conn,
        "CREATE TABLE tether_workflow_runs ("
        " id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,"
        " run_id TEXT PRIMARY KEY,"
        " workflow_id TEXT NOT NULL,"
        " status TEXT NOT NULL,"
        " input TEXT NOT NULL,"
        " output TEXT,"
        " error TEXT,"
        " parent_run_id TEXT,"
        " root_run_id TEXT NOT NULL,"
        " parent_step_id TEXT,"
        " attempts INTEGER NOT NULL DEFAULT 1,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL)",
    )
    await _exec(
        conn, "CREATE INDEX tether_workflow_runs_by_workflow ON tether_workflow_runs (workflow_id)"
    )
    await _exec(
        conn, "CREATE INDEX tether_workflow_runs_by_root ON tether_workflow_runs (root_run_id)"
    )
    await _exec(
        conn,
        "CREATE TABLE tether_workflow_steps ("
        " run_id TEXT NOT NULL REFERENCES tether_workflow_runs (run_id),"
        " step_id TEXT NOT NULL,"
        " seq INTEGER NOT NULL,"
        " name TEXT NOT NULL,"
        " output TEXT NOT NULL,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " PRIMARY KEY (run_id, step_id),"
        " UNIQUE (run_id, seq))",
    )


class PostgresWorkflowStore(PostgresBacked):
    """A WorkflowStore in PostgreSQL: one row per run, one row per completed step.

    `append_step` row-locks the run (`FOR NO KEY UPDATE`) before it looks for the step and
    numbers it after the run's last one (read through the `(run_id, seq)` index): writers on
    other connections queue, the first output of a step wins, and the cost does not grow with
    the journal.
    """

    _migrations = workflow_migrations
    _kind = "workflow store"

    async def create_run(
        self,
        *,
        run_id: str,
        workflow_id: str,
        input: Any,
        parent_run_id: str | None = None,
        root_run_id: str | None = None,
        parent_step_id: str | None = None,
    ) -> WorkflowRunRecord:
        encoded = encode_json(input, "input")
        now = time.time()
        async with self._session() as conn:
            row = await _one(
                conn,
                f"INSERT INTO tether_workflow_runs ({RUN_COLUMNS})"
                " VALUES (%s, %s, 'running', %s, NULL, NULL, %s, %s, %s, 1, %s, %s)"
                f" ON CONFLICT (run_id) DO NOTHING RETURNING {RUN_COLUMNS}",
                (
                    run_id,
                    workflow_id,
                    encoded,
                    parent_run_id,
                    root_run_id or run_id,
                    parent_step_id,
                    now,
                    now,
                ),
            )
        if row is None:
            raise StoreError(f"workflow run {run_id!r} already exists")
        return run_from_row(row)

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        async with self._session() as conn:
            row = await _one(
                conn,
                f"SELECT {RUN_COLUMNS} FROM tether_workflow_runs WHERE run_id = %s",
                (run_id,),
            )
        return None if row is None else run_from_row(row)

    async def start_attempt(self, run_id: str) -> WorkflowRunRecord:
        async with self._session() as conn:
            row = await _one(
                conn,
                "UPDATE tether_workflow_runs SET status = 'running', attempts = attempts + 1,"
                f" updated_at = %s WHERE run_id = %s RETURNING {RUN_COLUMNS}",
                (time.time(), run_id),
            )
        if row is None:
            raise StoreError(f"no workflow run {run_id!r}")
        return run_from_row(row)

    async def finish_run(
        self,
        run_id: str,
        *,
        status: Literal["completed", "failed", "cancelled"],
        output: Any = None,
        error: dict[str, Any] | None = None,
    ) -> WorkflowRunRecord:
        out, err = check_finish(status, error, output)
        async with self._session() as conn:
            row = await _one(
                conn,
                "UPDATE tether_workflow_runs SET status = %s, output = %s, error = %s,"
                f" updated_at = %s WHERE run_id = %s RETURNING {RUN_COLUMNS}",
                (status, out, err, time.time(), run_id),
            )
        if row is None:
            raise StoreError(f"no workflow run {run_id!r}")
        return run_from_row(row)

    async def list_runs(
        self,
        *,
        workflow_id: str | None = None,
        root_run_id: str | None = None,
        limit: int | None = None,
    ) -> list[WorkflowRunRecord]:
        clause, params = where_equal("%s", workflow_id=workflow_id, root_run_id=root_run_id)
        async with self._session() as conn:
            # LIMIT NULL is no limit.
            rows = await _all(
                conn,
                f"SELECT {RUN_COLUMNS} FROM tether_workflow_runs{clause} ORDER BY id DESC LIMIT %s",
                (*params, limit),
            )
        return [run_from_row(row) for row in rows]

    async def append_step(self, run_id: str, *, step_id: str, name: str, output: Any) -> StepRecord:
        encoded = encode_json(output, "output")
        async with self._session(atomic=True) as conn:
            locked = await _one(
                conn,
                "SELECT 1 FROM tether_workflow_runs WHERE run_id = %s FOR NO KEY UPDATE",
                (run_id,),
            )
            if locked is None:
                raise StoreError(f"no workflow run {run_id!r}")
            row = await _one(
                conn,
                f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps"
                " WHERE run_id = %s AND step_id = %s",
                (run_id, step_id),
            )
            if row is None:
                row = await _one(
                    conn,
                    f"INSERT INTO tether_workflow_steps ({STEP_COLUMNS})"
                    " SELECT %s, %s, %s, COALESCE(MAX(seq), 0) + 1, %s, %s"
                    " FROM tether_workflow_steps WHERE run_id = %s"
                    f" RETURNING {STEP_COLUMNS}",
                    (run_id, step_id, name, encoded, time.time(), run_id),
                )
        assert row is not None  # INSERT … SELECT of an aggregate inserts exactly one row
        return step_from_row(row)

    async def get_step(self, run_id: str, step_id: str) -> StepRecord | None:
        async with self._session() as conn:
            row = await _one(
                conn,
                f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps"
                " WHERE run_id = %s AND step_id = %s",
                (run_id, step_id),
            )
        return None if row is None else step_from_row(row)

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        async with self._session() as conn:
            rows = await _all(
                conn,
                f"SELECT {STEP_COLUMNS} FROM tether_workflow_steps WHERE run_id = %s ORDER BY seq",
                (run_id,),
            )
        return [step_from_row(row) for row in rows]
