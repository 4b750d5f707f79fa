"""tether: build LLM agents from declared parts.

```python
from tether import create_agent, prompt_layer, define_tool, reduce
```
"""

from .agent import Agent, TurnResult, create_agent
from .client_messages import ClientMessage, frame_client_message, should_run_turn
from .context import RunContext
from .errors import (
    AbortedError,
    ConfigError,
    DatasetError,
    DeadlineError,
    ExperimentMismatchError,
    LLMError,
    McpAuthError,
    McpCallError,
    McpConnectionError,
    ModelSettingError,
    NotJSONSafeError,
    SessionFormatError,
    TetherError,
    ToolDefinitionError,
    WorkflowInputError,
)
from .events import (
    PROGRESS_STAGES,
    TRACE_PHASES,
    AgentEvent,
    TraceRecord,
    is_progress_stage,
    is_trace_phase,
)
from .guardrails import Guardrail, GuardrailDecision, ToolCallSubject, define_guardrail
from .llm import ChatRequest, LLMClient
from .mcp import mcp_server, mcp_stdio
from .prompt import PromptLayer, prompt_layer
from .resources import Resource, define_resource
from .session import Message, Session, reduce, remember
from .signals import AbortController, AbortSignal
from .stop import RoundResult, StepResult, has_tool_call, step_count_is
from .tools import Tool, ToolError, ToolResult, define_tool, tool
from .tracing import TraceSink
from .workflows import LadderOutcome, create_workflow, define_workflow

__all__ = [
    "PROGRESS_STAGES",
    "TRACE_PHASES",
    "AbortController",
    "AbortSignal",
    "AbortedError",
    "Agent",
    "AgentEvent",
    "ChatRequest",
    "ClientMessage",
    "ConfigError",
    "DatasetError",
    "DeadlineError",
    "ExperimentMismatchError",
    "Guardrail",
    "GuardrailDecision",
    "LLMClient",
    "LLMError",
    "LadderOutcome",
    "McpAuthError",
    "McpCallError",
    "McpConnectionError",
    "Message",
    "ModelSettingError",
    "NotJSONSafeError",
    "PromptLayer",
    "Resource",
    "RoundResult",
    "RunContext",
    "Session",
    "SessionFormatError",
    "StepResult",
    "TetherError",
    "Tool",
    "ToolCallSubject",
    "ToolDefinitionError",
    "ToolError",
    "ToolResult",
    "TraceRecord",
    "TraceSink",
    "TurnResult",
    "WorkflowInputError",
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
