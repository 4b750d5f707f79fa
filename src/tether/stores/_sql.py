"""What the SQLite and PostgreSQL stores share above their connections, written once: here
the plumbing and the message reads, and one module per store beside it (`_sql_runs`,
`_sql_workflows`).

A backend gives two hooks, `SqlBacked._one` and `SqlBacked._all` (run one statement, return
its first row or all of them), and a `Dialect` (the placeholder, the column that orders rows
inserted at the same time, the database's clock): the reads whose SQL is the same in both
dialects need nothing more. The writes, with their upserts, `RETURNING` and fencing, are each
backend's statements; their checks, encodings and decodings are shared, the backend giving one
hook per write (as `SqlWorkflowStore._let_go`, `SqlRunStore._resume`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from ._codecs import (
    LAST_INDEX,
    NOW_SQL,
    SCOPE_COLUMNS,
    decode_records,
    run_info_select,
    run_select,
    title_like,
)
from .message_store import ScopeInfo, StoredRecord

__all__ = [
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Row",
    "SqlBacked",
    "SqlMessageReads",
]

Row: TypeAlias = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Dialect:
    """The few words of SQL the two backends spell differently."""

    name: Literal["sqlite", "postgres"]
    mark: str
    """The parameter placeholder."""
    rowid: str
    """The column that orders a table's rows by insertion (ties of equal times)."""
    all_rows: int | None
    """The LIMIT that means no limit."""
    now: str = field(init=False)
    """The database's clock in Unix seconds (`NOW_SQL`)."""
    run_select: str = field(init=False)
    """`run_info_select` of `tether_runs`, and of it aliased `r`."""
    run_select_r: str = field(init=False)
    workflow_select: str = field(init=False)
    """`run_select` of `tether_workflow_runs` (`RUN_COLUMNS`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "now", NOW_SQL[self.name])
        object.__setattr__(self, "run_select", run_info_select(self.name))
        object.__setattr__(self, "run_select_r", run_info_select(self.name, "r"))
        object.__setattr__(self, "workflow_select", run_select(NOW_SQL[self.name]))


SQLITE = Dialect("sqlite", "?", "rowid", -1)
POSTGRES = Dialect("postgres", "%s", "id", None)


class SqlBacked:
    """The two hooks a SQL backend gives the shared reads."""

    _sql: ClassVar[Dialect]

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        """The first row of one statement, or None."""
        raise NotImplementedError

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """Every row of one statement."""
        raise NotImplementedError


class SqlMessageReads(SqlBacked):
    """The reads of a SQL `MessageStore`."""

    async def load(
        self, scope: str, *, start: int = 0, end: int | None = None, after: int | None = None
    ) -> list[StoredRecord]:
        if after is not None:
            start = max(start, after + 1)
        m = self._sql.mark
        rows = await self._all(
            f"SELECT seq, record FROM tether_messages WHERE scope = {m} AND seq >= {m}"
            f" AND seq < {m} ORDER BY seq",
            (scope, max(start, 0), LAST_INDEX if end is None else end),
        )
        return decode_records(scope, int(rows[0][0]) if rows else 0, [raw for _, raw in rows])

    async def tail(self, scope: str, n: int) -> tuple[int, list[StoredRecord]]:
        m = self._sql.mark
        rows = await self._all(
            f"SELECT seq, record FROM tether_messages WHERE scope = {m} ORDER BY seq DESC"
            f" LIMIT {m}",
            (scope, max(n, 0)),
        )
        rows.reverse()
        start = int(rows[0][0]) if rows else 0
        return start, decode_records(scope, start, [raw for _, raw in rows])

    async def version(self, scope: str) -> int:
        row = await self._one(
            f"SELECT version FROM tether_message_scopes WHERE scope = {self._sql.mark}", (scope,)
        )
        return int(row[0]) if row is not None else 0

    async def load_versioned(self, scope: str) -> tuple[int, list[StoredRecord]]:
        # One statement, so one snapshot: the scope row's version beside each record (a scope
        # row with no records joins one row without a record).
        rows = await self._all(
            "SELECT s.version, m.record FROM tether_message_scopes s"
            " LEFT JOIN tether_messages m ON m.scope = s.scope"
            f" WHERE s.scope = {self._sql.mark} ORDER BY m.seq",
            (scope,),
        )
        if not rows:
            return 0, []
        raws = [raw for _, raw in rows if raw is not None]
        return int(rows[0][0]), decode_records(scope, 0, raws)

    async def length(self, scope: str) -> int:
        row = await self._one(
            f"SELECT length FROM tether_message_scopes WHERE scope = {self._sql.mark}", (scope,)
        )
        return int(row[0]) if row is not None else 0

    async def get_title(self, scope: str) -> str | None:
        info = await self.info(scope)
        return info.title if info is not None else None

    async def info(self, scope: str) -> ScopeInfo | None:
        row = await self._one(
            f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes WHERE scope = {self._sql.mark}",
            (scope,),
        )
        return ScopeInfo(*row) if row is not None else None

    async def scopes(
        self, *, limit: int = 100, offset: int = 0, title: str | None = None
    ) -> list[ScopeInfo]:
        m = self._sql.mark
        where, args = ("", []) if title is None else title_like(title, m)
        rows = await self._all(
            f"SELECT {SCOPE_COLUMNS} FROM tether_message_scopes{where}"
            f" ORDER BY updated_at DESC, {self._sql.rowid} DESC LIMIT {m} OFFSET {m}",
            (*args, limit, offset),
        )
        return [ScopeInfo(*row) for row in rows]
