"""`PostgresMessageStore`: transcripts, one row per record, numbered per scope."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ...errors import LeaseLostError
from .._codecs import (
    check_title,
    encode_new_records,
)
from .._sql import SqlMessageReads
from ..message_store import StoredRecord
from ._blobs import insert_blobs
from ._connection import execute, fetch_one
from ._leases import PostgresScopeLeases

__all__ = ["PostgresMessageStore"]


_NEW_VERSION = "floor(random() * 2305843009213693952)::bigint"
"""The version a new scope row starts at (`ScopeVersions`): a random number well inside the
64-bit range, so that adding one per write never overflows."""

# One statement: bump the scope's length (creating the row, or row-locking it until commit) and
# insert the records numbered after the old length. Under a lease, only while its owner holds
# the scope: the lease row is share-locked until commit, so a takeover waits for this append to
# commit (and then sees it) instead of slipping in between the check and the write.
_APPEND = f"""
WITH fence AS (
    SELECT owner FROM tether_scope_leases
    WHERE scope = %(scope)s AND owner = %(lease)s::text
    FOR SHARE
), bumped AS (
    INSERT INTO tether_message_scopes AS s (scope, length, created_at, updated_at, version)
    SELECT %(scope)s, %(n)s, %(now)s, %(now)s, {_NEW_VERSION}
    WHERE %(lease)s::text IS NULL OR EXISTS (SELECT 1 FROM fence)
    ON CONFLICT (scope) DO UPDATE
        SET length = s.length + EXCLUDED.length, updated_at = EXCLUDED.updated_at,
            version = s.version + 1
    RETURNING s.length
), inserted AS (
    INSERT INTO tether_messages (scope, seq, record)
    SELECT %(scope)s, bumped.length - %(n)s + r.i - 1, r.record
    FROM bumped, unnest(%(records)s::text[]) WITH ORDINALITY AS r (record, i)
)
SELECT length FROM bumped
"""


class PostgresMessageStore(SqlMessageReads, PostgresScopeLeases):
    """A MessageStore in PostgreSQL (see the module docstring for how appends stay atomic and
    O(1) with many writers)."""

    _kind = "message store"

    async def append(
        self, scope: str, records: Sequence[StoredRecord], *, lease: str | None = None
    ) -> int:
        encoded, blobs = encode_new_records(scope, records, self.blob_threshold)
        params = {
            "scope": scope,
            "n": len(encoded),
            "now": time.time(),
            "records": encoded,
            "lease": lease,
        }
        # With media to keep: the blobs and the records in one transaction.
        async with self._session(atomic=bool(blobs)) as conn:
            await insert_blobs(conn, blobs)
            row = await fetch_one(conn, _APPEND, params)
            if row is None:  # only a fenced append writes nothing
                held = await fetch_one(
                    conn, "SELECT owner FROM tether_scope_leases WHERE scope = %s", (scope,)
                )
                raise LeaseLostError("memory scope", scope, None if held is None else held[0])
        return int(row[0])

    async def replace(self, scope: str, records: Sequence[StoredRecord]) -> None:
        encoded, blobs = encode_new_records(scope, records, self.blob_threshold)
        now = time.time()
        async with self._session(atomic=True) as conn:
            await insert_blobs(conn, blobs)
            await execute(
                conn,
                "INSERT INTO tether_message_scopes AS s"
                " (scope, length, created_at, updated_at, version)"
                f" VALUES (%s, %s, %s, %s, {_NEW_VERSION}) ON CONFLICT (scope) DO UPDATE"
                " SET length = EXCLUDED.length, updated_at = EXCLUDED.updated_at,"
                " version = s.version + 1",
                (scope, len(encoded), now, now),
            )
            await execute(conn, "DELETE FROM tether_messages WHERE scope = %s", (scope,))
            await execute(
                conn,
                "INSERT INTO tether_messages (scope, seq, record)"
                " SELECT %s, r.i - 1, r.record"
                " FROM unnest(%s::text[]) WITH ORDINALITY AS r (record, i)",
                (scope, encoded),
            )

    async def set_title(self, scope: str, title: str) -> None:
        check_title(scope, title)
        now = time.time()
        async with self._session() as conn:
            await execute(
                conn,
                "INSERT INTO tether_message_scopes"
                " (scope, length, title, created_at, updated_at, version)"
                f" VALUES (%s, 0, %s, %s, %s, {_NEW_VERSION})"
                " ON CONFLICT (scope) DO UPDATE SET title = EXCLUDED.title",
                (scope, title, now, now),
            )

    async def delete(self, scope: str) -> None:
        async with self._session() as conn:
            # The records go with the scope row (ON DELETE CASCADE), in the same statement.
            await execute(conn, "DELETE FROM tether_message_scopes WHERE scope = %s", (scope,))
