"""Scope leases in PostgreSQL (`ScopeLeases`): which episode may write a memory scope now."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager

from .._codecs import check_scope
from ._blobs import BlobWriting
from ._connection import NOW, execute, fetch_one
from ._notices import SCOPES, notify_sql

__all__ = ["PostgresScopeLeases"]

# Taking a scope lease is one statement: the upsert updates only a lease that is this owner's or
# expired; a concurrent taker waits on the row lock and then finds it taken.
_ACQUIRE_SCOPE = f"""
INSERT INTO tether_scope_leases AS l (scope, owner, expires_at)
VALUES (%(scope)s, %(owner)s, {NOW} + %(ttl)s::float8)
ON CONFLICT (scope) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE l.owner = EXCLUDED.owner OR l.owner = %(replace)s::text OR l.expires_at < {NOW}
RETURNING owner
"""


class PostgresScopeLeases(BlobWriting):
    """The `ScopeLeases` half of `PostgresMessageStore`: one row per held scope, judged by the
    server's clock."""

    async def acquire_scope(
        self, scope: str, owner: str, *, ttl: float, replace: str | None = None
    ) -> str | None:
        check_scope(scope)
        params = {"scope": scope, "owner": owner, "ttl": ttl, "replace": replace}
        async with self._session() as conn:
            taken = await fetch_one(conn, _ACQUIRE_SCOPE, params)
            if taken is not None:
                return None
            row = await fetch_one(
                conn, "SELECT owner FROM tether_scope_leases WHERE scope = %s", (scope,)
            )
        # Released between the two statements: nobody holds it, so try again soon.
        return str(row[0]) if row is not None else "an episode that just finished"

    async def renew_scope(self, scope: str, owner: str, *, ttl: float) -> bool:
        async with self._session() as conn:
            row = await fetch_one(
                conn,
                f"UPDATE tether_scope_leases SET expires_at = {NOW} + %s"
                " WHERE scope = %s AND owner = %s RETURNING 1",
                (ttl, scope, owner),
            )
        return row is not None

    async def release_scope(self, scope: str, owner: str) -> None:
        async with self._session() as conn:
            # The episodes of other processes waiting for the scope hear of it at commit.
            await execute(
                conn,
                "WITH gone AS (DELETE FROM tether_scope_leases WHERE scope = %s AND owner = %s"
                f" RETURNING scope) SELECT 1 FROM gone, {notify_sql(SCOPES, 'gone.scope')}",
                (scope, owner),
            )

    def watch_scope(self, scope: str) -> AbstractAsyncContextManager[asyncio.Event | None]:
        """While entered, an event set by each `NOTIFY` of the scope's lease being released
        (see `WatchesScopes`)."""
        return self._watch(SCOPES, scope)
