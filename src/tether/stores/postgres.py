"""PostgreSQL storage: the three tether stores on a server that several processes or machines share.

Needs the `postgres` extra (psycopg 3): ``pip install 'tether[postgres]'``.

`PostgresMessageStore`, `PostgresRunStore` and `PostgresWorkflowStore` pass the same contract suites
as the in-memory and SQLite stores. Each one takes a URL (the store makes a connection pool of its
own, opens it on first use and closes it in `aclose()`), a `psycopg_pool.AsyncConnectionPool`
(`connection_pool(url)` makes one set up as the stores expect; with `owns=True` the last owning
store closes it), or a psycopg `AsyncConnection` of the caller's (it stays the caller's):

```python
messages = PostgresMessageStore("postgresql://tether@db.internal/tether?pool_max_size=20")
await messages.append("notes", [{"role": "user", "content": [...]}])
```

How it is built:

- **A connection pool.** Each operation takes a connection from the pool for as long as it runs,
  so concurrent requests of one process do not queue on one socket. `pool_min_size` (default 1)
  and `pool_max_size` (default 10) in the URL's query size it; libpq never sees them. A runtime
  gives its three stores one pool. After the server dropped the connections, the call that met a
  dead one fails and the next gets a live one. On a caller's single connection, the stores'
  operations take turns under one `asyncio.Lock` per connection, so their transactions never
  interleave.
- **Ordered named migrations.** `PostgresMigrations(store)` is an append-only list of async
  functions named `mNNN_what_changed`, recorded per store in `tether_migrations`. They run on
  first use in one transaction under a transaction-scoped advisory lock, so processes that start
  together apply each migration exactly once.
- **Message and event appends are one statement.** The scope (or run) row carries the length.
  An append bumps it with `INSERT … ON CONFLICT DO UPDATE … RETURNING` (or `UPDATE … RETURNING`),
  which row-locks it until commit, and inserts the new records numbered after it in the same
  statement. That costs the same at record 10 and record 10,000, and writers on other
  connections queue on the row lock instead of losing or duplicating records; `(scope, seq)` is
  the primary key as a backstop. The pool's connections run READ COMMITTED whatever the
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
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import tuple_row
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "tether's PostgreSQL stores need psycopg 3 and psycopg_pool: pip install 'tether[postgres]'"
    ) from exc

from ..errors import ConfigError, StoreError, WorkflowRunBusyError
from ._codecs import (
    LAST_INDEX,
    NOW_SQL,
    RUN_COLUMNS,
    RUN_INFO_COLUMNS,
    SCOPE_COLUMNS,
    STEP_COLUMNS,
    busy_error,
    check_finish,
    check_run_status,
    check_scope,
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
    run_info_select,
    run_page,
    run_select,
    run_tags,
    step_from_row,
    title_like,
    totals_from_row,
    totals_sql,
    where_equal,
)
from ._migrations import MigrationList
from .message_store import ScopeInfo, StoredRecord
from .run_store import (
    CANCEL_REQUESTED,
    NewRunEvent,
    RunEvent,
    RunInfo,
    RunPage,
    RunQuery,
    RunTotals,
)
from .workflow_store import RunLease, RunStatus, StepRecord, WorkflowRunRecord

__all__ = [
    "MIGRATIONS_TABLE",
    "POOL_MAX_SIZE",
    "POOL_MIN_SIZE",
    "Connection",
    "Pool",
    "PostgresBacked",
    "PostgresMessageStore",
    "PostgresMigrations",
    "PostgresRunStore",
    "PostgresWorkflowStore",
    "connection_async_lock",
    "connection_pool",
    "message_migrations",
    "pool_settings",
    "run_migrations",
    "workflow_migrations",
]

Connection: TypeAlias = "psycopg.AsyncConnection[Any]"
"""A psycopg 3 async connection (any row factory: the stores read tuples through their own
cursors)."""

Pool: TypeAlias = "AsyncConnectionPool[Any]"
"""A psycopg_pool async connection pool."""

Row: TypeAlias = tuple[Any, ...]

MIGRATIONS_TABLE: Final = "tether_migrations"
"""Where applied migrations are recorded, one row per (store, name)."""

PostgresMigration: TypeAlias = Callable[["psycopg.AsyncConnection[Any]"], Awaitable[None]]
"""One schema change: an async function named `mNNN_what_changed` that runs its statements on
`conn` inside the migration transaction (it must not commit)."""


_NOW: Final = NOW_SQL["postgres"]
"""The server's clock in Unix seconds: leases are set and judged by it, so the workers of one
database agree on when a lease ends whatever their own clocks say."""

_RUN_SELECT: Final = run_info_select("postgres")
_RUN_SELECT_R: Final = run_info_select("postgres", "r")


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


POOL_MIN_SIZE: Final = 1
"""Connections a store's pool keeps open by default (`pool_min_size` in the URL)."""
POOL_MAX_SIZE: Final = 10
"""Connections a store's pool opens at most by default (`pool_max_size` in the URL)."""


def pool_settings(url: str) -> tuple[str, int, int]:
    """The URL without tether's own query parameters, and the pool's minimum and maximum size.

    ``postgresql://host/db?pool_max_size=20&pool_min_size=2`` sizes the pool; libpq never sees
    those two parameters. A keyword/value conninfo string is passed on as it is.

    Raises:
        ConfigError: a size that is not a positive integer, or a minimum above the maximum.
    """
    if not url.startswith(("postgresql://", "postgres://")):
        return url, POOL_MIN_SIZE, POOL_MAX_SIZE
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    sizes = {"pool_min_size": POOL_MIN_SIZE, "pool_max_size": POOL_MAX_SIZE}
    kept = []
    for key, value in query:
        if key not in sizes:
            kept.append((key, value))
            continue
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(
                f"store URL {_describe(url)}: {key} must be a positive integer, got {value!r}"
            )
        sizes[key] = int(value)
    low, high = sizes["pool_min_size"], sizes["pool_max_size"]
    if "pool_max_size" not in dict(query):
        high = max(high, low)
    if low > high:
        raise ConfigError(
            f"store URL {_describe(url)}: pool_min_size={low} is above pool_max_size={high}"
        )
    return urlunsplit(parts._replace(query=urlencode(kept, quote_via=quote))), low, high


async def _configure(conn: Connection) -> None:
    # The row-lock scheme relies on READ COMMITTED (a waiting writer re-reads the row it waited
    # for); a server or URL defaulting to a stricter level would turn contention into
    # serialization failures instead.
    await _exec(conn, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")


def connection_pool(url: str, *, min_size: int | None = None, max_size: int | None = None) -> Pool:
    """A connection pool for `url` set up the way the stores expect (autocommit, READ
    COMMITTED), not open yet: the first store to use it opens it.

    Its size comes from `pool_min_size` / `pool_max_size` in the URL's query, then from the
    arguments here, then from POOL_MIN_SIZE / POOL_MAX_SIZE. Give one pool to the three stores
    of one database (`owns=True` on each closes it with the last of them) so they share it.
    """
    conninfo, low, high = pool_settings(url)
    low = min_size if min_size is not None else low
    high = max_size if max_size is not None else max(high, low)
    return AsyncConnectionPool(
        conninfo,
        min_size=low,
        max_size=high,
        kwargs={"autocommit": True},
        configure=_configure,
        open=False,
        name=f"tether {_describe(conninfo)}",
    )


class _PoolState:
    """How many stores own a pool, and whether it has been opened (by whom, under `lock`)."""

    __slots__ = ("lock", "opened", "owners")

    def __init__(self) -> None:
        self.owners = 0
        self.opened = False
        self.lock = asyncio.Lock()


_POOLS: weakref.WeakKeyDictionary[Any, _PoolState] = weakref.WeakKeyDictionary()


class PostgresBacked:
    """Shared plumbing of the PostgreSQL stores: a connection pool (or the caller's single
    connection and its lock), migrating on first use, and mapping psycopg errors."""

    _migrations: ClassVar[PostgresMigrations]
    _kind: ClassVar[str] = "store"

    def __init__(self, conn: Connection | Pool | str, *, owns: bool | None = None) -> None:
        """Args:
        conn: A PostgreSQL URL (the store makes its own pool, sized by `pool_min_size` /
            `pool_max_size` in the URL, opens it on first use and closes it in `aclose()`),
            a `psycopg_pool.AsyncConnectionPool` (see `connection_pool()`), or a psycopg
            `AsyncConnection` of the caller's (never closed by the store; its operations take
            turns on it).
        owns: For a pool: whether this store shares its ownership (the last owning store to
            close closes it). A URL's pool is always the store's own.
        """
        self._conninfo: str | None = None
        self._conn: Connection | None = None
        self._pool: Pool | None = None
        self._lock: asyncio.Lock | None = None
        if isinstance(conn, str):
            self._pool = connection_pool(conn)
            self._conninfo = self._pool.conninfo if isinstance(self._pool.conninfo, str) else conn
            owns = True
        elif isinstance(conn, AsyncConnectionPool):
            self._pool = conn
            self._conninfo = conn.conninfo if isinstance(conn.conninfo, str) else None
        elif isinstance(conn, psycopg.AsyncConnection):
            self._conn, self._lock = conn, connection_async_lock(conn)
        else:
            raise StoreError(
                f"{type(self).__name__} takes a PostgreSQL URL, a psycopg_pool "
                f"AsyncConnectionPool or a psycopg AsyncConnection, got {type(conn).__name__}"
            )
        self._owns = bool(owns) and self._pool is not None
        if self._pool is not None:
            state = _POOLS.setdefault(self._pool, _PoolState())
            if self._owns:
                state.owners += 1
        self._migrated = False
        self._migrating = asyncio.Lock()
        self._closed = False

    @classmethod
    def open(cls, url: str) -> Self:
        """A store with a connection pool of its own to `url`, opened on first use."""
        return cls(url)

    def __repr__(self) -> str:
        where = _describe(self._conninfo) if self._conninfo is not None else "caller's connection"
        return f"{type(self).__name__}({where})"

    def _where(self) -> str:
        return _describe(self._conninfo) if self._conninfo is not None else "the server"

    async def _open_pool(self, pool: Pool) -> None:
        state = _POOLS.setdefault(pool, _PoolState())
        if state.opened:
            return
        async with state.lock:
            if state.opened:
                return
            # One plain connection first: an unreachable server or a bad URL fails here at
            # once, with libpq's reason, instead of as a pool timeout half a minute later.
            try:
                probe = await psycopg.AsyncConnection.connect(self._conninfo or "", autocommit=True)
            except psycopg.Error as exc:
                raise StoreError(
                    f"cannot connect to PostgreSQL at {self._where()}: {exc}; "
                    "check the store URL and that the server is running"
                ) from exc
            await probe.close()
            await pool.open()
            state.opened = True

    @asynccontextmanager
    async def _checkout(self, *, migrate: bool = True) -> AsyncIterator[Connection]:
        """A connection for one operation, migrated: from the pool, or the caller's (taking
        turns with the other stores on it)."""
        if self._closed:
            raise StoreError(f"the {self._kind} is closed")
        pool = self._pool
        if pool is None:
            conn = self._conn
            assert conn is not None and self._lock is not None
            async with self._lock:
                if conn.closed:
                    raise StoreError(
                        f"the caller's PostgreSQL connection of the {self._kind} is closed"
                    )
                if migrate:
                    await self._migrate(conn)
                yield conn
            return
        await self._open_pool(pool)
        try:
            async with pool.connection() as conn:
                if migrate:
                    await self._migrate(conn)
                yield conn
        except PoolTimeout as exc:
            raise StoreError(
                f"no PostgreSQL connection to {self._where()} within {pool.timeout:g} s: the "
                f"server is unreachable, or all {pool.max_size} connections of the pool are "
                "busy (raise pool_max_size in the store URL)"
            ) from exc

    async def _migrate(self, conn: Connection) -> list[str]:
        if self._migrated:
            return []
        async with self._migrating:
            if self._migrated:
                return []
            names = await self._migrations.apply(conn)
            self._migrated = True
            return names

    async def migrate(self) -> list[str]:
        """Connect and apply the migrations not yet recorded now rather than on first use;
        return the names this call applied.

        Raises:
            StoreError: the server cannot be reached, or the schema was written by a newer
                tether, or a migration failed.
        """
        if self._migrated:
            return []
        try:
            async with self._checkout(migrate=False) as conn:
                return await self._migrate(conn)
        except psycopg.Error as exc:
            raise await self._failure(exc, None) from exc

    @asynccontextmanager
    async def _session(self, *, atomic: bool = False) -> AsyncIterator[Connection]:
        """A connection for one operation. `atomic` wraps it in a transaction; so does a
        caller's connection outside autocommit (so a read never leaves it idle in a transaction).
        """
        conn: Connection | None = None
        try:
            async with self._checkout() as conn:
                if atomic or not conn.autocommit:
                    async with conn.transaction():
                        yield conn
                else:
                    yield conn
        except psycopg.Error as exc:
            raise await self._failure(exc, conn) from exc
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"text that is not valid UTF-8 cannot be stored in PostgreSQL: {exc}"
            ) from exc

    async def _failure(self, exc: psycopg.Error, conn: Connection | None) -> StoreError:
        if conn is not None and conn.closed:
            if self._pool is None:
                return StoreError(
                    f"the {self._kind} lost the caller's PostgreSQL connection: {exc}"
                )
            # The pool drops the broken connection; check the idle ones too (a server restart
            # breaks them all), so the next call gets a live one.
            await self._pool.check()
            return StoreError(
                f"the {self._kind} lost its PostgreSQL connection ({exc}); the next call reconnects"
            )
        return StoreError(f"PostgreSQL {type(exc).__name__}: {exc}")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool once every store that owns it is closed (a URL's pool is the store's
        own); idempotent. Later use is a StoreError. A caller's connection stays open."""
        if self._closed:
            return
        self._closed = True
        pool = self._pool
        if pool is None or not self._owns:
            return
        state = _POOLS.setdefault(pool, _PoolState())
        state.owners -= 1
        if state.owners <= 0 and state.opened:
            await pool.close()


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


@message_migrations
async def m002_scope_leases(conn: Connection) -> None:
    # Which episode may write a scope now (`ScopeLeases`).
    await _exec(
        conn,
        "CREATE TABLE tether_scope_leases ("
        " scope TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " expires_at DOUBLE PRECISION NOT NULL)",
    )


# Taking a scope lease is one statement: the upsert updates only a lease that is this owner's or
# expired; a concurrent taker waits on the row lock and then finds it taken.
_ACQUIRE_SCOPE = f"""
INSERT INTO tether_scope_leases AS l (scope, owner, expires_at)
VALUES (%(scope)s, %(owner)s, {_NOW} + %(ttl)s::float8)
ON CONFLICT (scope) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE l.owner = EXCLUDED.owner OR l.expires_at < {_NOW}
RETURNING owner
"""


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

    async def scopes(
        self, *, limit: int = 100, offset: int = 0, title: str | None = None
    ) -> list[ScopeInfo]:
        where, args = ("", []) if title is None else title_like(title, "%s")
        async with self._session() as conn:
            rows = await _all(
                conn,
                f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes{where}"
                " ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s",
                (*args, limit, offset),
            )
        return [ScopeInfo(*row) for row in rows]

    async def delete(self, scope: str) -> None:
        async with self._session() as conn:
            # The records go with the scope row (ON DELETE CASCADE), in the same statement.
            await _exec(conn, "DELETE FROM tether_message_scopes WHERE scope = %s", (scope,))

    async def acquire_scope(self, scope: str, owner: str, *, ttl: float) -> str | None:
        check_scope(scope)
        async with self._session() as conn:
            taken = await _one(conn, _ACQUIRE_SCOPE, {"scope": scope, "owner": owner, "ttl": ttl})
            if taken is not None:
                return None
            row = await _one(
                conn, "SELECT owner FROM tether_scope_leases WHERE scope = %s", (scope,)
            )
        # Released between the two statements: nobody holds it, so try again soon.
        return str(row[0]) if row is not None else "an episode that just finished"

    async def renew_scope(self, scope: str, owner: str, *, ttl: float) -> bool:
        async with self._session() as conn:
            row = await _one(
                conn,
                f"UPDATE tether_scope_leases SET expires_at = {_NOW} + %s"
                " WHERE scope = %s AND owner = %s RETURNING 1",
                (ttl, scope, owner),
            )
        return row is not None

    async def release_scope(self, scope: str, owner: str) -> None:
        async with self._session() as conn:
            await _exec(
                conn,
                "DELETE FROM tether_scope_leases WHERE scope = %s AND owner = %s",
                (scope, owner),
            )


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


@run_migrations
async def m004_run_leases(conn: Connection) -> None:
    # A running run's heartbeat lease: past it, the run reads as interrupted.
    await _exec(conn, "ALTER TABLE tether_runs ADD COLUMN lease_expires_at DOUBLE PRECISION")


@run_migrations
async def m005_runs_started_by_tool_calls(conn: Connection) -> None:
    # The episode (and its tool call) that started a run: an agent or workflow used as a tool.
    # Its runs are read by parent, in time order, for its timeline.
    await _exec(
        conn,
        "ALTER TABLE tether_runs ADD COLUMN parent_run_id TEXT,"
        " ADD COLUMN parent_tool_call_id TEXT",
    )
    await _exec(
        conn,
        "CREATE INDEX tether_runs_parent_started ON tether_runs (parent_run_id, started_at, id)",
    )


@run_migrations
async def m006_run_tracebacks(conn: Connection) -> None:
    # Where a failed run failed: its traceback, beside the error.
    await _exec(conn, "ALTER TABLE tether_runs ADD COLUMN traceback TEXT")


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


def _append_params(run_id: str, encoded: Sequence[tuple[str, float, str]]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "n": len(encoded),
        "types": [kind for kind, _, _ in encoded],
        "ats": [at for _, at, _ in encoded],
        "datas": [raw for _, _, raw in encoded],
    }


_START_RUN = f"""
WITH created AS (
    INSERT INTO tether_runs ({RUN_INFO_COLUMNS}, lease_expires_at)
    VALUES ({", ".join(f"%(v{i})s" for i in range(len(RUN_INFO_COLUMNS.split(","))))},
        {_NOW} + %(ttl)s::float8)
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

    async def start_run(self, info: RunInfo, *, lease_ttl: float | None = None) -> None:
        values = encode_run_info(info)
        params = {f"v{i}": value for i, value in enumerate(values)}
        async with self._session() as conn:
            row = await _one(conn, _START_RUN, {**params, "tags": run_tags(info), "ttl": lease_ttl})
        if row is None:
            raise StoreError(f"run {info.run_id!r} already exists")

    async def append_events(self, run_id: str, events: Sequence[NewRunEvent]) -> int:
        encoded = encode_events(run_id, events)
        async with self._session() as conn:
            row = await _one(conn, _APPEND_EVENTS, _append_params(run_id, encoded))
        if row is None:
            raise StoreError(f"run {run_id!r} was never started")
        return int(row[0])

    async def append_events_many(
        self, batches: Sequence[tuple[str, Sequence[NewRunEvent]]]
    ) -> list[int]:
        params = [
            _append_params(run_id, encode_events(run_id, events)) for run_id, events in batches
        ]
        lasts: list[int] = []
        # One connection, one transaction, the statements pipelined: one commit for them all.
        async with self._session(atomic=True) as conn:
            async with conn.pipeline():
                cursors = [await _exec(conn, _APPEND_EVENTS, p) for p in params]
            for cur, p in zip(cursors, params, strict=True):
                row = await cur.fetchone()
                if row is None:
                    raise StoreError(f"run {p['run_id']!r} was never started")
                lasts.append(int(row[0]))
        return lasts

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
        lease_ttl: float | None = None,
        traceback: str | None = None,
    ) -> None:
        check_run_status(status)
        end = end_time(status, ended_at)
        extra = finish_values(output_text, usage, cost_usd, traceback)
        ttl = lease_ttl if status == "running" else None
        async with self._session() as conn:
            row = await _one(
                conn,
                f"UPDATE tether_runs SET status = %s, ended_at = %s, error = %s"
                f"{finish_sets('%s', extra)}, lease_expires_at = {_NOW} + %s::float8"
                " WHERE run_id = %s RETURNING 1",
                (status, end, error, *extra.values(), ttl, run_id),
            )
        if row is None:
            raise StoreError(f"run {run_id!r} was never started")

    async def run_totals(self, query: RunQuery) -> RunTotals:
        conds, args = query_where(query, "%s", "postgres")
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        async with self._session() as conn:
            row = await _one(
                conn, f"SELECT {totals_sql('postgres')} FROM tether_runs r{where}", args
            )
        assert row is not None
        return totals_from_row(row)

    async def renew_leases(self, run_ids: Sequence[str], *, lease_ttl: float) -> None:
        if not run_ids:
            return
        async with self._session() as conn:
            await _exec(
                conn,
                f"UPDATE tether_runs SET lease_expires_at = {_NOW} + %s"
                " WHERE status = 'running' AND run_id = ANY(%s::text[])",
                (lease_ttl, list(run_ids)),
            )

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
                f"SELECT {_RUN_SELECT_R}, r.id FROM tether_runs r{where}"
                " ORDER BY r.started_at DESC, r.id DESC LIMIT %s",
                (*args, limit + 1),
            )
        return run_page(rows, limit)

    async def get_run(self, run_id: str) -> RunInfo | None:
        async with self._session() as conn:
            row = await _one(
                conn, f"SELECT {_RUN_SELECT} FROM tether_runs WHERE run_id = %s", (run_id,)
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
                f"SELECT {_RUN_SELECT} FROM tether_runs{clause}"
                " ORDER BY started_at DESC, id DESC LIMIT %s OFFSET %s",
                (*args, limit, offset),
            )
        return [run_info_from_row(row) for row in rows]

    async def request_cancel(self, run_id: str) -> bool:
        async with self._session() as conn:
            row = await _one(
                conn,
                "UPDATE tether_runs SET meta ="
                " (meta::jsonb || jsonb_build_object(%s::text, %s::float8))::text"
                " WHERE run_id = %s AND status = 'running' RETURNING 1",
                (CANCEL_REQUESTED, time.time(), run_id),
            )
        return row is not None

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        async with self._session() as conn:
            rows = await _all(
                conn,
                "SELECT run_id FROM tether_runs WHERE run_id = ANY(%s) AND meta::jsonb ? %s",
                (list(run_ids), CANCEL_REQUESTED),
            )
        return [str(r[0]) for r in rows]

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


@workflow_migrations
async def m002_workflow_run_leases(conn: Connection) -> None:
    # Who holds a running run, and until when: past it, the run reads as interrupted and may
    # be taken over.
    await _exec(
        conn,
        "ALTER TABLE tether_workflow_runs ADD COLUMN lease_owner TEXT,"
        " ADD COLUMN lease_expires_at DOUBLE PRECISION",
    )


_WORKFLOW_RUN_SELECT: Final = run_select(_NOW)

# The takeover is one conditional update: it matches only a run that is free (not running,
# held by nobody, held by this owner already, or held past its lease), and a concurrent
# takeover waits on the row lock, then finds the run taken. The runs nested in it that are still
# marked running pass to the same owner in the same statement.
_TAKE_OVER = f"""
WITH taken AS (
    UPDATE tether_workflow_runs SET status = 'running', attempts = attempts + 1,
        updated_at = %(now)s, lease_owner = %(owner)s,
        lease_expires_at = {_NOW} + %(ttl)s::float8
    WHERE run_id = %(run_id)s AND (%(owner)s::text IS NULL OR status <> 'running'
        OR lease_owner IS NULL OR lease_owner = %(owner)s OR lease_expires_at < {_NOW})
    RETURNING {_WORKFLOW_RUN_SELECT}
), tree AS (
    UPDATE tether_workflow_runs AS c SET lease_owner = %(owner)s,
        lease_expires_at = {_NOW} + %(ttl)s::float8
    FROM taken
    WHERE %(owner)s::text IS NOT NULL AND c.root_run_id = taken.root_run_id
        AND c.status = 'running' AND c.run_id <> %(run_id)s
)
SELECT * FROM taken
"""


class PostgresWorkflowStore(PostgresBacked):
    """A WorkflowStore in PostgreSQL: one row per run, one row per completed step.

    `append_step` row-locks the run (`FOR NO KEY UPDATE`) before it looks for the step and
    numbers it after the run's last one (read through the `(run_id, seq)` index): writers on
    other connections queue, the first output of a step wins, and the cost does not grow with
    the journal. Leases are set and judged by the server's clock.
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
        lease: RunLease | None = None,
    ) -> WorkflowRunRecord:
        encoded = encode_json(input, "input")
        now = time.time()
        async with self._session() as conn:
            row = await _one(
                conn,
                f"INSERT INTO tether_workflow_runs ({RUN_COLUMNS})"
                " VALUES (%s, %s, 'running', %s, NULL, NULL, %s, %s, %s, 1, %s, %s, %s,"
                f" {_NOW} + %s::float8)"
                f" ON CONFLICT (run_id) DO NOTHING RETURNING {_WORKFLOW_RUN_SELECT}",
                (
                    run_id,
                    workflow_id,
                    encoded,
                    parent_run_id,
                    root_run_id or run_id,
                    parent_step_id,
                    now,
                    now,
                    None if lease is None else lease.owner,
                    None if lease is None else lease.ttl,
                ),
            )
        if row is None:
            raise StoreError(f"workflow run {run_id!r} already exists")
        return run_from_row(row)

    async def get_run(self, run_id: str) -> WorkflowRunRecord | None:
        async with self._session() as conn:
            row = await _one(
                conn,
                f"SELECT {_WORKFLOW_RUN_SELECT} FROM tether_workflow_runs WHERE run_id = %s",
                (run_id,),
            )
        return None if row is None else run_from_row(row)

    async def _holder(self, conn: Connection, run_id: str) -> WorkflowRunBusyError:
        held = await _one(
            conn,
            "SELECT lease_owner, lease_expires_at FROM tether_workflow_runs WHERE run_id = %s",
            (run_id,),
        )
        if held is None:
            raise StoreError(f"no workflow run {run_id!r}")
        return busy_error(run_id, held[0], held[1])

    async def start_attempt(
        self, run_id: str, *, lease: RunLease | None = None
    ) -> WorkflowRunRecord:
        params = {
            "run_id": run_id,
            "now": time.time(),
            "owner": None if lease is None else lease.owner,
            "ttl": None if lease is None else lease.ttl,
        }
        async with self._session() as conn:
            row = await _one(conn, _TAKE_OVER, params)
            if row is None:
                raise await self._holder(conn, run_id)
        return run_from_row(row)

    async def renew_lease(self, run_id: str, lease: RunLease) -> bool:
        async with self._session() as conn:
            row = await _one(
                conn,
                f"""
                WITH held AS (
                    SELECT root_run_id FROM tether_workflow_runs
                    WHERE run_id = %(run_id)s AND status = 'running' AND lease_owner = %(owner)s
                ), renewed AS (
                    UPDATE tether_workflow_runs AS t
                    SET lease_expires_at = {_NOW} + %(ttl)s::float8
                    FROM held
                    WHERE t.root_run_id = held.root_run_id AND t.lease_owner = %(owner)s
                        AND t.status = 'running'
                )
                SELECT count(*) FROM held
                """,
                {"run_id": run_id, "owner": lease.owner, "ttl": lease.ttl},
            )
        return row is not None and int(row[0]) > 0

    async def finish_run(
        self,
        run_id: str,
        *,
        status: Literal["completed", "failed", "cancelled"],
        output: Any = None,
        error: dict[str, Any] | None = None,
        lease: RunLease | None = None,
    ) -> WorkflowRunRecord:
        out, err = check_finish(status, error, output)
        owner = None if lease is None else lease.owner
        async with self._session() as conn:
            row = await _one(
                conn,
                "UPDATE tether_workflow_runs SET status = %s, output = %s, error = %s,"
                " updated_at = %s, lease_owner = NULL, lease_expires_at = NULL"
                " WHERE run_id = %s"
                " AND (%s::text IS NULL OR lease_owner IS NULL OR lease_owner = %s)"
                f" RETURNING {_WORKFLOW_RUN_SELECT}",
                (status, out, err, time.time(), run_id, owner, owner),
            )
            if row is None:
                raise await self._holder(conn, run_id)
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
                f"SELECT {_WORKFLOW_RUN_SELECT} FROM tether_workflow_runs{clause}"
                " ORDER BY id DESC LIMIT %s",
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
