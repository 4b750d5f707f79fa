"""`PostgresBacked`: what every PostgreSQL store shares — a pool (or the caller's connection
and its lock), migrating on first use, and mapping psycopg errors to `StoreError`."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Self

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...errors import StoreError
from .._sql import POSTGRES, Row, SqlBacked
from ._connection import (
    Connection,
    Pool,
    connection_async_lock,
    connection_pool,
    describe,
    fetch_all,
    fetch_one,
)
from ._migrations import PostgresMigrations
from ._notices import Listener
from ._schema import schema

__all__ = ["PostgresBacked"]


class _PoolState:
    """How many stores own a pool, and whether it has been opened (by whom, under `lock`)."""

    __slots__ = ("listener", "lock", "opened", "owners")

    def __init__(self) -> None:
        self.owners = 0
        self.opened = False
        self.lock = asyncio.Lock()
        self.listener: Listener | None = None
        """The pool's LISTEN connection for waiters, made on the first watch."""


_POOLS: weakref.WeakKeyDictionary[Any, _PoolState] = weakref.WeakKeyDictionary()


class PostgresBacked(SqlBacked):
    """Shared plumbing of the PostgreSQL stores: a connection pool (or the caller's single
    connection and its lock), migrating on first use, and mapping psycopg errors."""

    _migrations: ClassVar[PostgresMigrations] = schema
    _kind: ClassVar[str] = "store"
    _sql = POSTGRES

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
        where = describe(self._conninfo) if self._conninfo is not None else "caller's connection"
        return f"{type(self).__name__}({where})"

    def _where(self) -> str:
        return describe(self._conninfo) if self._conninfo is not None else "the server"

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

    @asynccontextmanager
    async def _watch(self, channel: str, key: str) -> AsyncIterator[asyncio.Event | None]:
        """An event set each time a notice of `key` comes on `channel` while the block runs
        (see `_notices`); None for a store on the caller's connection (it cannot listen on a
        connection it shares), or when no listening connection could be opened."""
        pool = self._pool
        if pool is None or not isinstance(pool.conninfo, str):
            yield None
            return
        state = _POOLS.setdefault(pool, _PoolState())
        if state.listener is None:
            # A pool's kwargs given as a function (a rotating password) are not called here:
            # without them a listener that cannot connect leaves its waiters polling.
            kwargs = pool.kwargs if isinstance(pool.kwargs, dict) else {}
            state.listener = Listener(pool.conninfo, kwargs)
        async with state.listener.watch(channel, key) as event:
            yield event

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

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        async with self._session() as conn:
            return await fetch_one(conn, sql, args)

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        async with self._session() as conn:
            return await fetch_all(conn, sql, args)

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
            if state.listener is not None:
                await state.listener.aclose()
            await pool.close()
