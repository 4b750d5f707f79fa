"""The WorkflowStore contract and its in-memory implementation.

They live with the workflow engine (`tether.workflows._store`), which the harness layer owns;
this module is where the storage layer and its users import them from.
"""

from ..workflows._store import (
    FINISHED_STATUSES,
    RUN_STATUSES,
    InMemoryWorkflowStore,
    RunStatus,
    StepRecord,
    WorkflowRunRecord,
    WorkflowStore,
    parse_run_error,
)

__all__ = [
    "FINISHED_STATUSES",
    "RUN_STATUSES",
    "InMemoryWorkflowStore",
    "RunStatus",
    "StepRecord",
    "WorkflowRunRecord",
    "WorkflowStore",
    "parse_run_error",
]
