"""Stores: where the lab keeps transcripts, workflow journals and run events.

Three contracts — `MessageStore` (`tether.stores.message_store`), `RunStore`
(`tether.stores.run_store`) and `WorkflowStore` (`tether.stores.workflow_store`) — and one module
or package per backend implementing all three: `tether.stores.memory`, `tether.stores.sqlite` and
`tether.stores.postgres` (a module per store in each package). Media bytes over a threshold
are kept once per backend by sha256 (`BlobStore`, `tether.blobs`; the message and run stores'
`blobs`), and records and run events hold a reference. The backends share their record
codecs (`tether.stores._codecs`), so every value is checked, stored and read back the same way
everywhere. The two SQL backends share more: one schema (`tether.stores._ddl`, each migration's
statements in a dialect's words) and each write's checks and encodings (`_sql`, `_sql_runs`,
`_sql_workflows`), a backend giving only its statements. All implementations of one contract
pass one shared contract suite.

The PostgreSQL stores need the `postgres` extra (psycopg 3): without it their names are left out
of `__all__`, and using one says what to install. SQLite's own plumbing (`connect`,
`transaction`, `SqliteMigrations`) is in `tether.stores.sqlite`.
"""

from __future__ import annotations

import typing as _typing
from importlib import import_module as _import_module
from importlib.util import find_spec as _find_spec

from ..blobs import BlobInfo, BlobStore
from .message_store import (
    MessageStore,
    ScopeInfo,
    ScopeLeases,
    ScopeVersions,
    StoredRecord,
    SystemRecord,
)
from .run_store import (
    CANCEL_REQUESTED,
    CancelRequests,
    EventBatch,
    ManyAppends,
    NewRunEvent,
    RunEvent,
    RunInfo,
    RunPage,
    RunQuery,
    RunStore,
    RunTotals,
)
from .workflow_store import RunLease, RunStatus, StepRecord, WorkflowRunRecord, WorkflowStore

if _typing.TYPE_CHECKING:
    from .memory import (
        InMemoryBlobStore,
        InMemoryMessageStore,
        InMemoryRunStore,
        InMemoryWorkflowStore,
    )
    from .postgres import (
        PostgresBlobStore,
        PostgresMessageStore,
        PostgresRunStore,
        PostgresWorkflowStore,
    )
    from .sqlite import SqliteBlobStore, SqliteMessageStore, SqliteRunStore, SqliteWorkflowStore

# The backends are imported when one of their stores is first asked for, not with the package:
# psycopg costs ~0.2 s, which every command and every SQLite user would pay.
_HAVE_POSTGRES = _find_spec("psycopg") is not None

__all__ = [
    "CANCEL_REQUESTED",
    "BlobInfo",
    "BlobStore",
    "CancelRequests",
    "EventBatch",
    "InMemoryBlobStore",
    "InMemoryMessageStore",
    "InMemoryRunStore",
    "InMemoryWorkflowStore",
    "ManyAppends",
    "MessageStore",
    "NewRunEvent",
    "PostgresBlobStore",
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
    "ScopeVersions",
    "SqliteBlobStore",
    "SqliteMessageStore",
    "SqliteRunStore",
    "SqliteWorkflowStore",
    "StepRecord",
    "StoredRecord",
    "SystemRecord",
    "WorkflowRunRecord",
    "WorkflowStore",
]


_POSTGRES = (
    "PostgresBlobStore",
    "PostgresMessageStore",
    "PostgresRunStore",
    "PostgresWorkflowStore",
)
if not _HAVE_POSTGRES:  # the names are left out, and __getattr__ explains
    __all__ = [name for name in __all__ if name not in _POSTGRES]


_BACKENDS = {
    **dict.fromkeys(
        ("InMemoryBlobStore", "InMemoryMessageStore", "InMemoryRunStore", "InMemoryWorkflowStore"),
        "memory",
    ),
    **dict.fromkeys(
        ("SqliteBlobStore", "SqliteMessageStore", "SqliteRunStore", "SqliteWorkflowStore"),
        "sqlite",
    ),
    **dict.fromkeys(_POSTGRES, "postgres"),
}
"""The backends' store classes, imported on first use: a command that never opens a store (or
opens one backend) does not load the others."""


def __getattr__(name: str) -> object:
    backend = _BACKENDS.get(name)
    if backend is not None:
        # For postgres without psycopg: the ImportError that names the extra.
        value = getattr(_import_module(f"{__name__}.{backend}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
