"""Stores: where the lab keeps transcripts, workflow journals and run events.

Each store is a protocol with an in-memory, a SQLite and a PostgreSQL implementation, and all
implementations of one protocol pass one shared contract test suite. The SQLite implementations
share `tether.stores.sqlite` (connection helper, ordered named migrations, transactions); the
PostgreSQL ones share `tether.stores.postgres`, which needs the `postgres` extra (psycopg 3) and
is imported only when one of its names is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .message_store import (
    InMemoryMessageStore,
    MessageStore,
    ScopeInfo,
    SqliteMessageStore,
    StoredRecord,
    SystemRecord,
)
from .run_store import InMemoryRunStore, NewRunEvent, RunEvent, RunInfo, RunStore, SqliteRunStore
from .sqlite import Migrations, SqliteWorkflowStore, connect, transaction
from .workflow_store import (
    InMemoryWorkflowStore,
    RunStatus,
    StepRecord,
    WorkflowRunRecord,
    WorkflowStore,
)

if TYPE_CHECKING:
    from .postgres import PostgresMessageStore, PostgresRunStore, PostgresWorkflowStore

_POSTGRES = frozenset({"PostgresMessageStore", "PostgresRunStore", "PostgresWorkflowStore"})

__all__ = [
    "InMemoryMessageStore",
    "InMemoryRunStore",
    "InMemoryWorkflowStore",
    "MessageStore",
    "Migrations",
    "NewRunEvent",
    "PostgresMessageStore",
    "PostgresRunStore",
    "PostgresWorkflowStore",
    "RunEvent",
    "RunInfo",
    "RunStatus",
    "RunStore",
    "ScopeInfo",
    "SqliteMessageStore",
    "SqliteRunStore",
    "SqliteWorkflowStore",
    "StepRecord",
    "StoredRecord",
    "SystemRecord",
    "WorkflowRunRecord",
    "WorkflowStore",
    "connect",
    "transaction",
]


def __getattr__(name: str) -> Any:
    # The PostgreSQL stores import psycopg, an optional extra: load them on first use only.
    if name in _POSTGRES:
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
