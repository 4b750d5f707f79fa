"""`SqliteMessageStore`: transcripts, one row per record, numbered per scope."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from .._blobs import NewBlobs
from .._codecs import (
    check_title,
    encode_new_records,
)
from .._sql import SqlMessageReads
from ..message_store import StoredRecord
from ._blobs import insert_blobs
from ._connection import transaction
from ._leases import SqliteScopeLeases, lease_lost

__all__ = ["SqliteMessageStore", "append_rows"]

_NEW_VERSION = "(random() >> 2)"
"""The version a new scope row starts at (`ScopeVersions`): a random number well inside the
64-bit range, so that adding one per write never overflows."""


def append_rows(
    conn: sqlite3.Connection,
    scope: str,
    encoded: Sequence[str],
    blobs: NewBlobs,
    lease: str | None,
    now: float,
) -> int:
    """Append encoded records (`encode_new_records`) inside the caller's transaction, fenced by
    `lease` when given (`LeaseLostError` once another holder has the scope); the scope's new
    length."""
    # One upsert creates the scope row or bumps its length (as on PostgreSQL), and under a
    # lease only while `lease` holds the scope (the fence is a condition of the write, not a
    # read before it); the records go after the old length.
    # The scope's version goes one up (a new scope's starts at random: `ScopeVersions`).
    row = conn.execute(
        "INSERT INTO tether_message_scopes AS s (scope, length, created_at, updated_at, version)"
        f" SELECT ?, ?, ?, ?, {_NEW_VERSION} WHERE ? IS NULL OR EXISTS (SELECT 1"
        " FROM tether_scope_leases WHERE scope = ? AND owner = ?) ON CONFLICT (scope) DO UPDATE"
        " SET length = s.length + excluded.length, updated_at = excluded.updated_at,"
        " version = s.version + 1 RETURNING length",
        (scope, len(encoded), now, now, lease, scope, lease),
    ).fetchone()
    if row is None:  # only a fenced append writes nothing
        raise lease_lost(conn, scope)
    insert_blobs(conn, blobs)
    total = row[0]
    base = total - len(encoded)
    conn.executemany(
        "INSERT INTO tether_messages (scope, seq, record) VALUES (?, ?, ?)",
        [(scope, base + i, raw) for i, raw in enumerate(encoded)],
    )
    return int(total)


class SqliteMessageStore(SqlMessageReads, SqliteScopeLeases):
    """A MessageStore in SQLite. Takes its connection from the caller and migrates on
    construction; `SqliteMessageStore.open(path)` opens (and later closes) its own.

    The scope row carries the length, so an append reads one row and inserts its records: the
    same cost at any transcript length. The whole append is one `BEGIN IMMEDIATE` transaction,
    so writers in other threads or processes queue up instead of losing records.

    Media data over `blob_threshold` bytes is kept once in the file's blobs table, in the same
    transaction, and the record holds a reference (`tether.blobs`); `blobs` reads them.
    """

    async def append(
        self, scope: str, records: Sequence[StoredRecord], *, lease: str | None = None
    ) -> int:
        encoded, blobs = encode_new_records(scope, records, self.blob_threshold)
        now = time.time()

        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                return append_rows(conn, scope, encoded, blobs, lease, now)

        return await self._run(op)

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        encoded, blobs = encode_new_records(scope, records, self.blob_threshold)
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
                    "UPDATE tether_message_scopes SET length = ?, updated_at = ?,"
                    " version = version + 1 WHERE scope = ?",
                    (len(encoded), now, scope),
                )

        await self._run(op)

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

    async def delete(self, scope: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute("DELETE FROM tether_messages WHERE scope = ?", (scope,))
                conn.execute("DELETE FROM tether_message_scopes WHERE scope = ?", (scope,))

        await self._run(op)


def _ensure_scope(conn: sqlite3.Connection, scope: str, now: float) -> int:
    """Create the scope row if needed (inside the caller's transaction); return its length."""
    conn.execute(
        "INSERT INTO tether_message_scopes (scope, length, created_at, updated_at, version)"
        f" VALUES (?, 0, ?, ?, {_NEW_VERSION}) ON CONFLICT(scope) DO NOTHING",
        (scope, now, now),
    )
    row = conn.execute(
        "SELECT length FROM tether_message_scopes WHERE scope = ?", (scope,)
    ).fetchone()
    return int(row[0])
