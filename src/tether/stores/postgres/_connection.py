"""How the PostgreSQL stores reach their server: pools, a caller's connection, statements."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import Any, Final, TypeAlias
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from ...errors import ConfigError
from .._codecs import NOW_SQL

__all__ = [
    "NOW",
    "POOL_MAX_SIZE",
    "POOL_MIN_SIZE",
    "Connection",
    "Params",
    "Pool",
    "Row",
    "connection_async_lock",
    "connection_pool",
    "describe",
    "execute",
    "fetch_all",
    "fetch_one",
    "pool_settings",
]

Connection: TypeAlias = "psycopg.AsyncConnection[Any]"
"""A psycopg 3 async connection (any row factory: the stores read tuples through their own
cursors)."""

Pool: TypeAlias = "AsyncConnectionPool[Any]"
"""A psycopg_pool async connection pool."""

Row: TypeAlias = tuple[Any, ...]

NOW: Final = NOW_SQL["postgres"]
"""The server's clock in Unix seconds: leases are set and judged by it, so the workers of one
database agree on when a lease ends whatever their own clocks say."""

Params: TypeAlias = Sequence[Any] | dict[str, Any]


async def execute(conn: Connection, query: str, params: Params = ()) -> psycopg.AsyncCursor[Row]:
    """Run `query` on a tuple-row cursor of `conn` (whatever row factory the caller set)."""
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(query, params)
    return cur


async def fetch_one(conn: Connection, query: str, params: Params = ()) -> Row | None:
    cur = await execute(conn, query, params)
    return await cur.fetchone()


async def fetch_all(conn: Connection, query: str, params: Params = ()) -> list[Row]:
    cur = await execute(conn, query, params)
    return await cur.fetchall()


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


def describe(conninfo: str) -> str:
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
                f"store URL {describe(url)}: {key} must be a positive integer, got {value!r}"
            )
        sizes[key] = int(value)
    low, high = sizes["pool_min_size"], sizes["pool_max_size"]
    if "pool_max_size" not in dict(query):
        high = max(high, low)
    if low > high:
        raise ConfigError(
            f"store URL {describe(url)}: pool_min_size={low} is above pool_max_size={high}"
        )
    return urlunsplit(parts._replace(query=urlencode(kept, quote_via=quote))), low, high


async def _configure(conn: Connection) -> None:
    # The row-lock scheme relies on READ COMMITTED (a waiting writer re-reads the row it waited
    # for); a server or URL defaulting to a stricter level would turn contention into
    # serialization failures instead.
    await execute(conn, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")


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
        name=f"tether {describe(conninfo)}",
    )
