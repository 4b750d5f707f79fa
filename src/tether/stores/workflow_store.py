"""The WorkflowStore contract.

It lives with the workflow engine (`tether.workflows._store`), which the harness layer owns;
this module is where the storage layer and its users import it from. The in-memory
implementation is in `tether.stores.memory`, the others in `tether.stores.sqlite` and
`tether.stores.postgres`.
"""

from ..workflows._store import (
    FINISHED_STATUSES,
    READ_STATUSES,
    RUN_STATUSES,
    NewWorkflowRun,
    RunLease,
    RunStatus,
    SignalDelivery,
    StepRecord,
    StepWrite,
    WaitRecord,
    WatchesRuns,
    WorkflowEnd,
    WorkflowListing,
    WorkflowRunRecord,
    WorkflowStore,
    parse_run_error,
)

__all__ = [
    "FINISHED_STATUSES",
    "READ_STATUSES",
    "RUN_STATUSES",
    "NewWorkflowRun",
    "RunLease",
    "RunStatus",
    "SignalDelivery",
    "StepRecord",
    "StepWrite",
    "WaitRecord",
    "WatchesRuns",
    "WorkflowEnd",
    "WorkflowListing",
    "WorkflowRunRecord",
    "WorkflowStore",
    "parse_run_error",
]
