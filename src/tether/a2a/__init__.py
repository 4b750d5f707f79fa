"""The Agent2Agent protocol (A2A 1.0, JSON-RPC binding), both ways.

- **Served**: `tether serve` serves every registry agent as an A2A agent at
  ``/a2a/{agent_id}`` (its card at ``/a2a/{agent_id}/.well-known/agent-card.json``);
  `declare_skills(agent, [...])` says what its card lists.
- **Called**: `a2a_agent(url)` is a ToolProvider (an `ask_<name>` tool, or one per skill);
  `Runtime.remote_agent(url)` a lab agent whose turns go to the remote agent; `A2AClient` the
  client both use.

```python
from tether.a2a import a2a_agent

helper = lab.create_agent(id="helper", tools=a2a_agent("http://127.0.0.1:8700/a2a/chat"))
```

Nothing here imports the `a2a-sdk` package: the wire is httpx (the tests check it against the
official SDK, both ways).
"""

from ._client import A2AClient, Delta, Reply
from ._model import A2AModel
from ._skills import declare_skills
from ._tools import A2AAgent, a2a_agent, context_id_for
from ._wire import CARD_PATH, PROTOCOL_VERSION

__all__ = [
    "CARD_PATH",
    "PROTOCOL_VERSION",
    "A2AAgent",
    "A2AClient",
    "A2AModel",
    "Delta",
    "Reply",
    "a2a_agent",
    "context_id_for",
    "declare_skills",
]
