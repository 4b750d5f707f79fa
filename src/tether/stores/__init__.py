"""Stores: where the lab keeps transcripts, workflow journals and run events.

Each store is a protocol with an in-memory, a SQLite and a PostgreSQL implementation, and all
implementations of one protocol pass one shared contract test suite. The SQLite implementations
share `tether.stores.sqlite` (connection helper, ordered named migrations, transactions); the
PostgreSQL ones share `tether.stores.postgres`, which needs the `postgres` extra (psycopg 3):
without it their names are left out of `__all__`, and using one says what to install.
"""

from __future__ import annotations

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

try:
    from .postgres import PostgresMessageStore, PostgresRunStore, PostgresWorkflowStore
except ImportError:  # no usable psycopg: the names are left out, and __getattr__ explains
    _HAVE_POSTGRES = False
else:
    _HAVE_POSTGRES = True

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


_POSTGRES = ("PostgresMessageStore", "PostgresRunStore", "PostgresWorkflowStore")
if not _HAVE_POSTGRES:
    __all__ = [name for name in __all__ if name not in _POSTGRES]

    def __getattr__(name: str) -> object:
        if name in _POSTGRES:
            from . import postgres  # raises the ImportError that names the extra to install

            return getattr(postgres, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
