"""Scope leases in SQLite (`ScopeLeases`): which episode may write a memory scope now."""

from __future__ import annotations

import sqlite3

from ...errors import LeaseLostError
from .._codecs import check_scope
from ._blobs import BlobWriting
from ._connection import NOW

__all__ = ["SqliteScopeLeases", "lease_lost", "release_lease"]


def lease_lost(conn: sqlite3.Connection, scope: str) -> LeaseLostError:
    """Why a write fenced by a lease on `scope` matched nothing: who holds the scope now
    (read inside the write's own transaction, so no takeover came between)."""
    row = conn.execute("SELECT owner FROM tether_scope_leases WHERE scope = ?", (scope,)).fetchone()
    return LeaseLostError("memory scope", scope, None if row is None else str(row[0]))


def release_lease(conn: sqlite3.Connection, scope: str, owner: str) -> None:
    """Give `owner`'s lease on `scope` up, if it still holds it."""
    conn.execute("DELETE FROM tether_scope_leases WHERE scope = ? AND owner = ?", (scope, owner))


class SqliteScopeLeases(BlobWriting):
    """The `ScopeLeases` half of `SqliteMessageStore`: one row per held scope, judged by the
    machine's clock."""

    async def acquire_scope(
        self, scope: str, owner: str, *, ttl: float, replace: str | None = None
    ) -> str | None:
        check_scope(scope)

        def op(conn: sqlite3.Connection) -> str | None:
            while True:
                # One statement, a transaction of its own (read to its end, which commits
                # it): the lease is taken or it is not.
                taken = conn.execute(
                    "INSERT INTO tether_scope_leases (scope, owner, expires_at)"
                    f" VALUES (?, ?, {NOW} + ?) ON CONFLICT (scope) DO UPDATE"
                    " SET owner = excluded.owner, expires_at = excluded.expires_at"
                    " WHERE tether_scope_leases.owner IN (excluded.owner, ?)"
                    f" OR tether_scope_leases.expires_at < {NOW}"
                    " RETURNING owner",
                    (scope, owner, ttl, replace),
                ).fetchall()
                if taken:
                    return None
                row = conn.execute(
                    "SELECT owner FROM tether_scope_leases WHERE scope = ?", (scope,)
                ).fetchone()
                if row is not None:
                    return str(row[0])
                # Released between the two statements: try to take it again.

        return await self._run(op)

    async def renew_scope(self, scope: str, owner: str, *, ttl: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                f"UPDATE tether_scope_leases SET expires_at = {NOW} + ?"
                " WHERE scope = ? AND owner = ?",
                (ttl, scope, owner),
            )
            return cur.rowcount > 0

        return await self._run(op)

    async def release_scope(self, scope: str, owner: str) -> None:
        await self._run(lambda conn: release_lease(conn, scope, owner))
