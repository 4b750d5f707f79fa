"""The lab: reusable agent definitions whose conversations persist by memory scope.

A lab agent is a harness agent plus persistence. `Runtime.create_agent(...)` declares one; each
`agent.run(...)` / `agent.stream(...)` is an episode: load the scope's transcript, append this
turn, drive the harness loop (`Agent.send`) and store each completed step.

```python
from tether.lab import Runtime

lab = Runtime(defaults={"model": "openai:gpt-4o"}, store="sqlite:///.tether/tether.db")
researcher = lab.create_agent(id="researcher", system_prompt="You are a research assistant.")
result = await researcher.run(memory_scope="notes", user="First turn").result
```
"""

from ._agent import DEFAULT_STOP_WHEN, IntegrationInspection, LabAgent
from ._definition import (
    AgentDefaults,
    Definition,
    ModelSpec,
    SystemPrompt,
    SystemPromptSpec,
    model_label,
)
from ._episode import SystemPromptConflict, WorkflowLink
from ._handles import AgentRunHandle, AgentRunResult, AgentStreamHandle, StartGate
from ._handoffs import LabHandoff
from ._host import AgentHost, ClientPool, TaskSet
from ._output import JSON_REQUEST
from ._recorder import RunListener
from ._registry import Registry, find_config, load_registry
from ._runtime import Runtime, ToolCallInfo
from ._stores import DEFAULT_STORE, redact_url, sqlite_path
from ._tags import run_tags
from ._template import PromptInspection, Template, create_template
from ._titles import ConversationTitleInput, ConversationTitleOutput
from ._tools import ToolProvider, ToolSet, ToolsSpec, tool_provider

__all__ = [
    "DEFAULT_STOP_WHEN",
    "DEFAULT_STORE",
    "JSON_REQUEST",
    "AgentDefaults",
    "AgentHost",
    "AgentRunHandle",
    "AgentRunResult",
    "AgentStreamHandle",
    "ClientPool",
    "ConversationTitleInput",
    "ConversationTitleOutput",
    "Definition",
    "IntegrationInspection",
    "LabAgent",
    "LabHandoff",
    "ModelSpec",
    "PromptInspection",
    "Registry",
    "RunListener",
    "Runtime",
    "StartGate",
    "SystemPrompt",
    "SystemPromptConflict",
    "SystemPromptSpec",
    "TaskSet",
    "Template",
    "ToolCallInfo",
    "ToolProvider",
    "ToolSet",
    "ToolsSpec",
    "WorkflowLink",
    "create_template",
    "find_config",
    "load_registry",
    "model_label",
    "redact_url",
    "run_tags",
    "sqlite_path",
    "tool_provider",
]
