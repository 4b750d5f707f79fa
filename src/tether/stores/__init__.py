"""Stores: where the lab keeps transcripts, workflow journals and run events.

Each store is a protocol with an in-memory and a SQLite implementation (PostgreSQL later), and all
implementations of one protocol pass one shared contract test suite. The SQLite implementations
share `tether.stores.sqlite` (connection helper, ordered named migrations, transactions).
"""

from __future__ import annotations

from .sqlite import Migrations, SqliteWorkflowStore, connect, transaction
from .workflow_store import (
    InMemoryWorkflowStore,
    RunStatus,
    StepRecord,
    WorkflowRunRecord,
    WorkflowStore,
)

__all__ = [
    "InMemoryWorkflowStore",
    "Migrations",
    "RunStatus",
    "SqliteWorkflowStore",
    "StepRecord",
    "WorkflowRunRecord",
    "WorkflowStore",
    "connect",
    "transaction",
]
