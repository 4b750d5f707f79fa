"""Stores: where the lab keeps transcripts, workflow journals and run events.

Each store is a protocol with an in-memory and a SQLite implementation (PostgreSQL later), and all
implementations of one protocol pass one shared contract test suite. The SQLite implementations
share `tether.stores.sqlite` (connection helper, ordered named migrations, transactions).
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

__all__ = [
    "InMemoryMessageStore",
    "InMemoryRunStore",
    "InMemoryWorkflowStore",
    "MessageStore",
    "Migrations",
    "NewRunEvent",
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
