"""The run-event vocabulary: every kind of event a run records, and what its `data` holds.

A lab run (an episode, a workflow run) is recorded as ordered events in the `RunStore`; the
CLI, the UI, the HTTP API, the OpenTelemetry sink and the experiments read them back. This
module is the one place their names and payloads are written down, as a `TypedDict` union with
a literal `type` (`RunEventBody`): producers emit one
(``recorder.emit({"type": AGENT_TOOL_CALL, "data": {...}})``, which mypy checks against
`AgentToolCallData`), readers compare with the same constants, and `typed(event)` gives a
stored event's body as the union, so ``if body["type"] == AGENT_TOOL_CALL:`` narrows its
`data`.

| kind                       | data                                                         |
|----------------------------|--------------------------------------------------------------|
| `agent_started`            | `AgentStartedData`: agent, scope, tags, workflow link, model |
| `agent_text_delta`         | `AgentTextDeltaData`: text                                   |
| `agent_tool_call`          | `AgentToolCallData`: id, name, input                         |
| `agent_tool_result`        | `AgentToolResultData`: id, name, output, is_error, started_at |
| `agent_messages_committed` | `AgentMessagesCommittedData`: start, count, messages         |
| `agent_summarized`         | `AgentSummarizedData`: covers, index, model, usage, cost     |
| `agent_warning`            | `AgentWarningData`: code, message, memory_scope, ...          |
| `agent_handoff`            | `AgentHandoffData`: from, to, reason, tool call, nested run   |
| `agent_finished`           | `AgentFinishedData`: text, output, turns, usage, cost        |
| `agent_failed`             | `AgentFailedData`: error, cancelled, text?                   |
| `agent_paused`             | `AgentPausedData`: pending, memory_scope, deadline           |
| `decision`                 | `DecisionData`: call_id, name, action, decided_by, at, ...   |
| `model_call_started`       | `ModelCallStartedData`: call, model, request?                |
| `model_call_finished`      | `ModelCallFinishedData`: call, model, timings, usage, cost   |
| `model_call_failed`        | `ModelCallFailedData`: call, model, timings, error           |
| `workflow_started` …       | the `tether.workflows` event without `type`, `at`, traceback |

Imports nothing of tether but `tether.events` (the token counts' `Usage`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, cast, get_args

from .events import Usage

__all__ = [
    "AGENT_FAILED",
    "AGENT_FINISHED",
    "AGENT_HANDOFF",
    "AGENT_MESSAGES_COMMITTED",
    "AGENT_PAUSED",
    "AGENT_STARTED",
    "AGENT_SUMMARIZED",
    "AGENT_TEXT_DELTA",
    "AGENT_TOOL_CALL",
    "AGENT_TOOL_RESULT",
    "AGENT_WARNING",
    "DECISION",
    "MODEL_CALL_FAILED",
    "MODEL_CALL_FINISHED",
    "MODEL_CALL_STARTED",
    "RUN_EVENT_KINDS",
    "WORKFLOW_FAILED",
    "WORKFLOW_FINISHED",
    "WORKFLOW_RUN_ENDS",
    "WORKFLOW_STARTED",
    "WORKFLOW_STEP_FAILED",
    "WORKFLOW_STEP_FINISHED",
    "WORKFLOW_STEP_STARTED",
    "WORKFLOW_WAITING",
    "AgentFailed",
    "AgentFailedData",
    "AgentFinished",
    "AgentFinishedData",
    "AgentHandoff",
    "AgentHandoffData",
    "AgentMessagesCommitted",
    "AgentMessagesCommittedData",
    "AgentPaused",
    "AgentPausedData",
    "AgentStarted",
    "AgentStartedData",
    "AgentSummarized",
    "AgentSummarizedData",
    "AgentTextDelta",
    "AgentTextDeltaData",
    "AgentToolCall",
    "AgentToolCallData",
    "AgentToolResult",
    "AgentToolResultData",
    "AgentWarning",
    "AgentWarningData",
    "Decision",
    "DecisionData",
    "ErrorData",
    "ModelCallFailed",
    "ModelCallFailedData",
    "ModelCallFinished",
    "ModelCallFinishedData",
    "ModelCallStarted",
    "ModelCallStartedData",
    "RunEventBody",
    "RunEventKind",
    "WorkflowEventBody",
    "WorkflowEventData",
    "WorkflowEventKind",
    "typed",
]

AGENT_STARTED: Final = "agent_started"
AGENT_TEXT_DELTA: Final = "agent_text_delta"
AGENT_TOOL_CALL: Final = "agent_tool_call"
AGENT_TOOL_RESULT: Final = "agent_tool_result"
AGENT_MESSAGES_COMMITTED: Final = "agent_messages_committed"
AGENT_SUMMARIZED: Final = "agent_summarized"
AGENT_WARNING: Final = "agent_warning"
AGENT_HANDOFF: Final = "agent_handoff"
AGENT_FINISHED: Final = "agent_finished"
AGENT_FAILED: Final = "agent_failed"
AGENT_PAUSED: Final = "agent_paused"
DECISION: Final = "decision"
MODEL_CALL_STARTED: Final = "model_call_started"
MODEL_CALL_FINISHED: Final = "model_call_finished"
MODEL_CALL_FAILED: Final = "model_call_failed"
WORKFLOW_STARTED: Final = "workflow_started"
WORKFLOW_STEP_STARTED: Final = "workflow_step_started"
WORKFLOW_STEP_FINISHED: Final = "workflow_step_finished"
WORKFLOW_STEP_FAILED: Final = "workflow_step_failed"
WORKFLOW_FINISHED: Final = "workflow_finished"
WORKFLOW_FAILED: Final = "workflow_failed"
WORKFLOW_WAITING: Final = "workflow_waiting"

WORKFLOW_RUN_ENDS: Final = (WORKFLOW_FINISHED, WORKFLOW_FAILED)
"""The kinds that end a workflow run."""


class ErrorData(TypedDict):
    """An error as a run records it."""

    type: str
    message: str


class AgentStartedData(TypedDict):
    agent_id: str
    memory_scope: str
    memory_scope_generated: bool
    tags: list[str]
    workflow_run_id: str | None
    step_id: str | None
    model: str


class AgentTextDeltaData(TypedDict):
    text: str


class AgentToolCallData(TypedDict):
    id: str
    name: str
    input: Any


class AgentToolResultData(TypedDict):
    id: str
    name: str
    output: Any
    is_error: bool
    started_at: float | None
    """When the call started (Unix time), None when the loop did not say."""


class AgentMessagesCommittedData(TypedDict):
    start: int
    """The index of the first committed record in the scope's transcript."""
    count: int
    messages: list[Any]


class AgentSummarizedData(TypedDict):
    """A summary stored in the scope (a ``summary`` record) and what making it cost."""

    memory_scope: str
    index: int
    """Where the summary record is stored in the scope."""
    covers: list[int]
    """The first and last index of the records it stands for (inclusive)."""
    model: str
    usage: Usage
    cost_usd: float | None


class AgentWarningData(TypedDict):
    code: str
    """``template_unrendered``, ``system_prompt_conflict`` or ``title_failed``."""
    message: str
    memory_scope: str
    agent_id: NotRequired[str]
    template: NotRequired[str | None]
    variable: NotRequired[str | None]
    pinned_agent_id: NotRequired[Any]


class AgentHandoffData(TypedDict):
    """The turn goes on with another agent (`tether.handoffs`): a nested run on the same scope,
    under the transfer call."""

    from_agent: str
    to_agent: str
    reason: str | None
    """Why, as the model said in the transfer call."""
    tool_call_id: str
    run_id: str
    """The target's run (nested under the transfer call)."""
    memory_scope: str


class AgentFinishedData(TypedDict):
    text: str
    output: Any
    turns: int
    usage: Usage
    stop_reason: str | None
    memory_scope: str
    cost_usd: float | None


class AgentFailedData(TypedDict):
    error: ErrorData
    cancelled: bool
    text: NotRequired[str]
    """What the model answered, when no structured output could be made of it."""


class AgentPausedData(TypedDict):
    """The turn stopped on calls that wait for a decision; the run is "paused"."""

    pending: list[Any]
    """The calls (`tether.events.PendingCall`: id, name, input, kind, reason?)."""
    memory_scope: str
    deadline: float | None
    """When an undecided call is denied as "expired" (Unix time); None: never."""


class DecisionData(TypedDict):
    """One decision on a paused run's call, written with the resume that applied it."""

    call_id: str
    name: str
    action: str
    """``approve``, ``deny`` or ``result``."""
    decided_by: str | None
    at: float
    """When it was decided (Unix time)."""
    reason: NotRequired[str]
    input: NotRequired[Any]
    output: NotRequired[str]
    is_error: NotRequired[bool]


class ModelCallStartedData(TypedDict):
    call: int
    model: str
    request: NotRequired[dict[str, Any]]
    """The request by the recording level (absent with ``recording="off"``)."""


class ModelCallFinishedData(TypedDict):
    call: int
    model: str
    first_token_s: float | None
    duration_s: float
    usage: dict[str, int]
    stop_reason: str | None
    finish_reason: str | None
    tool_calls: int
    cost_usd: float | None
    unpriced: NotRequired[str]
    """Why there is no price, when there is none (`tether.pricing`)."""


class ModelCallFailedData(TypedDict):
    call: int
    model: str
    first_token_s: float | None
    duration_s: float
    error: ErrorData


WorkflowEventData: TypeAlias = dict[str, Any]
"""A workflow event (`tether.workflows.WorkflowEvent`) without `type`, `at` and `traceback`."""


class AgentStarted(TypedDict):
    type: Literal["agent_started"]
    data: AgentStartedData


class AgentTextDelta(TypedDict):
    type: Literal["agent_text_delta"]
    data: AgentTextDeltaData


class AgentToolCall(TypedDict):
    type: Literal["agent_tool_call"]
    data: AgentToolCallData


class AgentToolResult(TypedDict):
    type: Literal["agent_tool_result"]
    data: AgentToolResultData


class AgentMessagesCommitted(TypedDict):
    type: Literal["agent_messages_committed"]
    data: AgentMessagesCommittedData


class AgentSummarized(TypedDict):
    type: Literal["agent_summarized"]
    data: AgentSummarizedData


class AgentWarning(TypedDict):
    type: Literal["agent_warning"]
    data: AgentWarningData


class AgentHandoff(TypedDict):
    type: Literal["agent_handoff"]
    data: AgentHandoffData


class AgentFinished(TypedDict):
    type: Literal["agent_finished"]
    data: AgentFinishedData


class AgentFailed(TypedDict):
    type: Literal["agent_failed"]
    data: AgentFailedData


class AgentPaused(TypedDict):
    type: Literal["agent_paused"]
    data: AgentPausedData


class Decision(TypedDict):
    type: Literal["decision"]
    data: DecisionData


class ModelCallStarted(TypedDict):
    type: Literal["model_call_started"]
    data: ModelCallStartedData


class ModelCallFinished(TypedDict):
    type: Literal["model_call_finished"]
    data: ModelCallFinishedData


class ModelCallFailed(TypedDict):
    type: Literal["model_call_failed"]
    data: ModelCallFailedData


WorkflowEventKind: TypeAlias = Literal[
    "workflow_started",
    "workflow_step_started",
    "workflow_step_finished",
    "workflow_step_failed",
    "workflow_finished",
    "workflow_failed",
    "workflow_waiting",
]
"""The kinds the workflow engine records (`tether.workflows.WorkflowEvent`)."""


class WorkflowEventBody(TypedDict):
    type: WorkflowEventKind
    data: WorkflowEventData


RunEventBody: TypeAlias = (
    AgentStarted
    | AgentTextDelta
    | AgentToolCall
    | AgentToolResult
    | AgentMessagesCommitted
    | AgentSummarized
    | AgentWarning
    | AgentHandoff
    | AgentFinished
    | AgentFailed
    | AgentPaused
    | Decision
    | ModelCallStarted
    | ModelCallFinished
    | ModelCallFailed
    | WorkflowEventBody
)
"""What an event says (its `type` and `data`), one member per kind: narrow on `type`."""

RunEventKind: TypeAlias = Literal[
    "agent_started",
    "agent_text_delta",
    "agent_tool_call",
    "agent_tool_result",
    "agent_messages_committed",
    "agent_summarized",
    "agent_warning",
    "agent_handoff",
    "agent_finished",
    "agent_failed",
    "agent_paused",
    "decision",
    "model_call_started",
    "model_call_finished",
    "model_call_failed",
    WorkflowEventKind,
]

RUN_EVENT_KINDS: Final[tuple[RunEventKind, ...]] = get_args(RunEventKind)
"""Every kind, in the order of the table above."""


def typed(event: Mapping[str, Any]) -> RunEventBody:
    """A stored event (`RunEvent`) as the union, to narrow its `data` on its `type`. Nothing
    is checked: the store holds what the producers wrote, and they wrote the union."""
    return cast(RunEventBody, event)
