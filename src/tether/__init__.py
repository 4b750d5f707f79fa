"""tether: build LLM agents from declared parts.

```python
from tether import create_agent, prompt_layer, define_tool, reduce
```

Importing the package loads next to nothing: each public name is imported from its module the
first time it is used, so `tether --version`, `tether --help` and a program that needs one part
do not pay for every other.
"""

import importlib as _importlib
import typing as _typing

from ._version import __version__ as __version__

if _typing.TYPE_CHECKING:
    from .agent import Agent, TurnResult, create_agent
    from .client_messages import ClientMessage, frame_client_message, should_run_turn
    from .context import RunContext
    from .errors import (
        AbortedError,
        AgentRunError,
        AuthenticationError,
        ClientMessageError,
        ConfigError,
        ConfigNotFoundError,
        ConnectDeadlineError,
        ContextLengthError,
        DataError,
        DatasetError,
        DeadlineError,
        ExperimentMismatchError,
        LeaseLostError,
        LLMConnectionError,
        LLMError,
        LLMHTTPError,
        LLMStreamError,
        McpAuthError,
        McpCallError,
        McpConnectionError,
        McpError,
        MissingCredentialsError,
        MissingKeyError,
        ModelSettingError,
        NoObjectGeneratedError,
        NotJSONSafeError,
        RateLimitError,
        RegistryError,
        ScopeBusyError,
        SessionFormatError,
        StepOutputError,
        StoreCorruptError,
        StoreError,
        TemplateError,
        TetherError,
        ToolDefinitionError,
        ToolError,
        UnknownProviderError,
        WorkflowError,
        WorkflowInputError,
        WorkflowRunBusyError,
    )
    from .events import (
        PROGRESS_STAGES,
        TRACE_PHASES,
        AgentEvent,
        FinishReason,
        TraceRecord,
        is_progress_stage,
        is_trace_phase,
    )
    from .guardrails import Guardrail, GuardrailDecision, ToolCallSubject, define_guardrail
    from .llm import ChatRequest, LLMClient
    from .llm.base import ModelSettings
    from .mcp import mcp_server, mcp_stdio
    from .prompt import PromptLayer, prompt_layer
    from .resources import Resource, define_resource
    from .session import Message, Session, reduce, remember
    from .signals import AbortController, AbortSignal
    from .stop import RoundResult, StopCondition, has_tool_call, step_count_is
    from .tools import Tool, ToolResult, define_tool, tool
    from .tracing import TraceSink
    from .turn import ModelSpec, SystemPromptSpec, TurnOptions, TurnPlan
    from .workflows import LadderOutcome, create_workflow, define_workflow

_LAZY: dict[str, str] = {
    "AbortController": ".signals",
    "AbortSignal": ".signals",
    "AbortedError": ".errors",
    "Agent": ".agent",
    "AgentEvent": ".events",
    "AgentRunError": ".errors",
    "AuthenticationError": ".errors",
    "ChatRequest": ".llm",
    "ClientMessage": ".client_messages",
    "ClientMessageError": ".errors",
    "ConfigError": ".errors",
    "ConfigNotFoundError": ".errors",
    "ConnectDeadlineError": ".errors",
    "ContextLengthError": ".errors",
    "DataError": ".errors",
    "DatasetError": ".errors",
    "DeadlineError": ".errors",
    "ExperimentMismatchError": ".errors",
    "FinishReason": ".events",
    "Guardrail": ".guardrails",
    "GuardrailDecision": ".guardrails",
    "LLMClient": ".llm",
    "LLMConnectionError": ".errors",
    "LLMError": ".errors",
    "LLMHTTPError": ".errors",
    "LLMStreamError": ".errors",
    "LadderOutcome": ".workflows",
    "LeaseLostError": ".errors",
    "McpAuthError": ".errors",
    "McpCallError": ".errors",
    "McpConnectionError": ".errors",
    "McpError": ".errors",
    "Message": ".session",
    "MissingCredentialsError": ".errors",
    "MissingKeyError": ".errors",
    "ModelSettingError": ".errors",
    "ModelSettings": ".llm.base",
    "ModelSpec": ".turn",
    "NoObjectGeneratedError": ".errors",
    "NotJSONSafeError": ".errors",
    "PROGRESS_STAGES": ".events",
    "PromptLayer": ".prompt",
    "RateLimitError": ".errors",
    "RegistryError": ".errors",
    "Resource": ".resources",
    "RoundResult": ".stop",
    "RunContext": ".context",
    "ScopeBusyError": ".errors",
    "Session": ".session",
    "SessionFormatError": ".errors",
    "StepOutputError": ".errors",
    "StopCondition": ".stop",
    "StoreCorruptError": ".errors",
    "StoreError": ".errors",
    "SystemPromptSpec": ".turn",
    "TRACE_PHASES": ".events",
    "TemplateError": ".errors",
    "TetherError": ".errors",
    "Tool": ".tools",
    "ToolCallSubject": ".guardrails",
    "ToolDefinitionError": ".errors",
    "ToolError": ".errors",
    "ToolResult": ".tools",
    "TraceRecord": ".events",
    "TraceSink": ".tracing",
    "TurnOptions": ".turn",
    "TurnPlan": ".turn",
    "TurnResult": ".agent",
    "UnknownProviderError": ".errors",
    "WorkflowError": ".errors",
    "WorkflowInputError": ".errors",
    "WorkflowRunBusyError": ".errors",
    "create_agent": ".agent",
    "create_workflow": ".workflows",
    "define_guardrail": ".guardrails",
    "define_resource": ".resources",
    "define_tool": ".tools",
    "define_workflow": ".workflows",
    "frame_client_message": ".client_messages",
    "has_tool_call": ".stop",
    "is_progress_stage": ".events",
    "is_trace_phase": ".events",
    "mcp_server": ".mcp",
    "mcp_stdio": ".mcp",
    "prompt_layer": ".prompt",
    "reduce": ".session",
    "remember": ".session",
    "should_run_turn": ".client_messages",
    "step_count_is": ".stop",
    "tool": ".tools",
}
"""Each public name and the module it lives in, imported on first use."""


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "PROGRESS_STAGES",
    "TRACE_PHASES",
    "AbortController",
    "AbortSignal",
    "AbortedError",
    "Agent",
    "AgentEvent",
    "AgentRunError",
    "AuthenticationError",
    "ChatRequest",
    "ClientMessage",
    "ClientMessageError",
    "ConfigError",
    "ConfigNotFoundError",
    "ConnectDeadlineError",
    "ContextLengthError",
    "DataError",
    "DatasetError",
    "DeadlineError",
    "ExperimentMismatchError",
    "FinishReason",
    "Guardrail",
    "GuardrailDecision",
    "LLMClient",
    "LLMConnectionError",
    "LLMError",
    "LLMHTTPError",
    "LLMStreamError",
    "LadderOutcome",
    "LeaseLostError",
    "McpAuthError",
    "McpCallError",
    "McpConnectionError",
    "McpError",
    "Message",
    "MissingCredentialsError",
    "MissingKeyError",
    "ModelSettingError",
    "ModelSettings",
    "ModelSpec",
    "NoObjectGeneratedError",
    "NotJSONSafeError",
    "PromptLayer",
    "RateLimitError",
    "RegistryError",
    "Resource",
    "RoundResult",
    "RunContext",
    "ScopeBusyError",
    "Session",
    "SessionFormatError",
    "StepOutputError",
    "StopCondition",
    "StoreCorruptError",
    "StoreError",
    "SystemPromptSpec",
    "TemplateError",
    "TetherError",
    "Tool",
    "ToolCallSubject",
    "ToolDefinitionError",
    "ToolError",
    "ToolResult",
    "TraceRecord",
    "TraceSink",
    "TurnOptions",
    "TurnPlan",
    "TurnResult",
    "UnknownProviderError",
    "WorkflowError",
    "WorkflowInputError",
    "WorkflowRunBusyError",
    "create_agent",
    "create_workflow",
    "define_guardrail",
    "define_resource",
    "define_tool",
    "define_workflow",
    "frame_client_message",
    "has_tool_call",
    "is_progress_stage",
    "is_trace_phase",
    "mcp_server",
    "mcp_stdio",
    "prompt_layer",
    "reduce",
    "remember",
    "should_run_turn",
    "step_count_is",
    "tool",
]
