"""`SqliteMessageStore`: transcripts, one row per record, numbered per scope."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from os import PathLike
from typing import Any

from ...blobs import DEFAULT_BLOB_THRESHOLD
from .._blobs import check_threshold, externalize_records
from .._codecs import (
    LAST_INDEX,
    SCOPE_COLUMNS,
    check_title,
    decode_records,
    encode_records,
    title_like,
)
from ..message_store import ScopeInfo, StoredRecord
from ._blobs import SqliteBlobStore, insert_blobs
from ._connection import connect, transaction
from ._leases import SqliteScopeLeases, fence_scope
from ._schema import schema

__all__ = ["SqliteMessageStore"]


class SqliteMessageStore(SqliteScopeLeases):
    """A MessageStore in SQLite. Takes its connection from the caller and migrates on
    construction; `SqliteMessageStore.open(path)` opens (and later closes) its own.

    The scope row carries the length, so an append reads one row and inserts its records: the
    same cost at any transcript length. The whole append is one `BEGIN IMMEDIATE` transaction,
    so writers in other threads or processes queue up instead of losing records.

    Media data over `blob_threshold` bytes is kept once in the file's blobs table, in the same
    transaction, and the record holds a reference (`tether.blobs`); `blobs` reads them.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        owns: bool = False,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        super().__init__(conn, owns=owns)
        self._sync(schema.apply)
        self.blob_threshold = check_threshold(blob_threshold)
        """Inline media over this many bytes is stored as a blob."""
        self.blobs = SqliteBlobStore(conn)
        """The blobs this store's records refer to (the same file's table)."""

    @classmethod
    def open(cls, path: str | PathLike[str]) -> SqliteMessageStore:
        """Open (creating if needed) the database at `path` with a connection of its own."""
        return cls(connect(path), owns=True)

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None, after: int | None = None
    ) -> list[StoredRecord]:
        if after is not None:
            start = max(start, after + 1)

        def op(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            return conn.execute(
                "SELECT seq, record FROM tether_messages WHERE scope = ? AND seq >= ? AND seq < ?"
                " ORDER BY seq",
                (scope, max(start, 0), LAST_INDEX if end is None else end),
            ).fetchall()

        rows = await self._run(op)
        return decode_records(scope, rows[0][0] if rows else 0, [raw for _, raw in rows])

    async def tail(self, scope: str, n: int) -> tuple[int, list[StoredRecord]]:
        def op(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            return conn.execute(
                "SELECT seq, record FROM tether_messages WHERE scope = ? ORDER BY seq DESC LIMIT ?",
                (scope, max(n, 0)),
            ).fetchall()

        rows = await self._run(op)
        rows.reverse()
        start = rows[0][0] if rows else 0
        return start, decode_records(scope, start, [raw for _, raw in rows])

    async def append(
        self, scope: str, records: Sequence[StoredRecord], *, lease: str | None = None
    ) -> int:
        records, blobs = externalize_records(records, self.blob_threshold)
        encoded = encode_records(scope, records)
        now = time.time()

        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                if lease is not None:
                    fence_scope(conn, scope, lease)
                insert_blobs(conn, blobs)
                # One upsert creates the scope row or bumps its length (as on PostgreSQL); the
                # records go after the old length.
                (total,) = conn.execute(
                    "INSERT INTO tether_message_scopes AS s (scope, length, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE"
                    " SET length = s.length + excluded.length, updated_at = excluded.updated_at"
                    " RETURNING length",
                    (scope, len(encoded), now, now),
                ).fetchone()
                base = total - len(encoded)
                conn.executemany(
                    "INSERT INTO tether_messages (scope, seq, record) VALUES (?, ?, ?)",
                    [(scope, base + i, raw) for i, raw in enumerate(encoded)],
                )
                return int(total)

        return await self._run(op)

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        records, blobs = externalize_records(records, self.blob_threshold)
        encoded = encode_records(scope, records)
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                insert_blobs(conn, blobs)
                _ensure_scope(conn, scope, now)
                conn.execute("DELETE FROM tether_messages WHERE scope = ?", (scope,))
                conn.executemany(
                    "INSERT INTO tether_messages (scope, seq, record) VALUES (?, ?, ?)",
                    [(scope, i, raw) for i, raw in enumerate(encoded)],
                )
                conn.execute(
                    "UPDATE tether_message_scopes SET length = ?, updated_at = ? WHERE scope = ?",
                    (len(encoded), now, scope),
                )

        await self._run(op)

    async def length(self, scope: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT length FROM tether_message_scopes WHERE scope = ?", (scope,)
            ).fetchone()
            return int(row[0]) if row else 0

        return await self._run(op)

    async def set_title(self, scope: str, title: str) -> None:
        check_title(scope, title)
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                _ensure_scope(conn, scope, now)
                conn.execute(
                    "UPDATE tether_message_scopes SET title = ? WHERE scope = ?", (title, scope)
                )

        await self._run(op)

    async def get_title(self, scope: str) -> str | None:
        info = await self.info(scope)
        return info.title if info is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        def op(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes WHERE scope = ?", (scope,)
            ).fetchone()
            return row

        row = await self._run(op)
        return ScopeInfo(*row) if row is not None else None

    async def scopes(
        self, *, limit: int = 100, offset: int = 0, title: str | None = None
    ) -> list[ScopeInfo]:
        where, args = ("", []) if title is None else title_like(title, "?")

        def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes{where}"
                " ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()

        return [ScopeInfo(*row) for row in await self._run(op)]

    async def delete(self, scope: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute("DELETE FROM tether_messages WHERE scope = ?", (scope,))
                conn.execute("DELETE FROM tether_message_scopes WHERE scope = ?", (scope,))

        await self._run(op)


def _ensure_scope(conn: sqlite3.Connection, scope: str, now: float) -> int:
    """Create the scope row if needed (inside the caller's transaction); return its length."""
    conn.execute(
        "INSERT INTO tether_message_scopes (scope, length, created_at, updated_at)"
        " VALUES (?, 0, ?, ?) ON CONFLICT(scope) DO NOTHING",
        (scope, now, now),
    )
    row = conn.execute(
        "SELECT length FROM tether_message_scopes WHERE scope = ?", (scope,)
    ).fetchone()
    return int(row[0])


# -- RunStore --------------------------------------------------------------------------------
