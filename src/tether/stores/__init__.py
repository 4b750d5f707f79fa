"""Stores: where the lab keeps transcripts, workflow journals and run events.

Three contracts — `MessageStore` (`tether.stores.message_store`), `RunStore`
(`tether.stores.run_store`) and `WorkflowStore` (`tether.stores.workflow_store`) — and one module
or package per backend implementing all three: `tether.stores.memory`, `tether.stores.sqlite` and
`tether.stores.postgres` (a module per store in each package). The backends share their record
codecs (`tether.stores._codecs`), so every value is checked, stored and read back the same way
everywhere, and the two SQL backends use the same table names. All implementations of one
contract pass one shared contract suite.

The PostgreSQL stores need the `postgres` extra (psycopg 3): without it their names are left out
of `__all__`, and using one says what to install. SQLite's own plumbing (`connect`,
`transaction`, `SqliteMigrations`) is in `tether.stores.sqlite`.
"""

from __future__ import annotations

from .memory import InMemoryMessageStore, InMemoryRunStore, InMemoryWorkflowStore
from .message_store import MessageStore, ScopeInfo, ScopeLeases, StoredRecord, SystemRecord
from .run_store import (
    CANCEL_REQUESTED,
    CancelRequests,
    ManyAppends,
    NewRunEvent,
    RunEvent,
    RunInfo,
    RunPage,
    RunQuery,
    RunStore,
    RunTotals,
)
from .sqlite import SqliteMessageStore, SqliteRunStore, SqliteWorkflowStore
from .workflow_store import RunLease, RunStatus, StepRecord, WorkflowRunRecord, WorkflowStore

try:
    from .postgres import PostgresMessageStore, PostgresRunStore, PostgresWorkflowStore
except ImportError:  # no usable psycopg: the names are left out, and __getattr__ explains
    _HAVE_POSTGRES = False
else:
    _HAVE_POSTGRES = True

__all__ = [
    "CANCEL_REQUESTED",
    "CancelRequests",
    "InMemoryMessageStore",
    "InMemoryRunStore",
    "InMemoryWorkflowStore",
    "ManyAppends",
    "MessageStore",
    "NewRunEvent",
    "PostgresMessageStore",
    "PostgresRunStore",
    "PostgresWorkflowStore",
    "RunEvent",
    "RunInfo",
    "RunLease",
    "RunPage",
    "RunQuery",
    "RunStatus",
    "RunStore",
    "RunTotals",
    "ScopeInfo",
    "ScopeLeases",
    "SqliteMessageStore",
    "SqliteRunStore",
    "SqliteWorkflowStore",
    "StepRecord",
    "StoredRecord",
    "SystemRecord",
    "WorkflowRunRecord",
    "WorkflowStore",
]


_POSTGRES = ("PostgresMessageStore", "PostgresRunStore", "PostgresWorkflowStore")
if not _HAVE_POSTGRES:
    __all__ = [name for name in __all__ if name not in _POSTGRES]

    def __getattr__(name: str) -> object:
        if name in _POSTGRES:
            from . import postgres  # raises the ImportError that names the extra to install

            return getattr(postgres, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
