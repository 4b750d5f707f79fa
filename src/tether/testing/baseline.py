"""The byte-identity baseline: the exact request a minimal agent produces.

Every axis of `create_agent` is optional, and leaving one out must produce the same request
byte for byte as before the axis existed. `tests/baseline/prompt-equivalence.baseline.json`
pins it; regenerate deliberately with ``python scripts/regen_baseline.py`` and review the diff.
"""

from __future__ import annotations

import asyncio
import json

from ..agent import create_agent
from ..prompt import prompt_layer
from ..session import Session
from .script_client import script_client
from .turns import collect

__all__ = ["OPTIONAL_KEYS", "derive_baseline"]

#: Keys a request may carry only when their axis is configured; never present empty.
OPTIONAL_KEYS = ("tools", "response_format", "settings", "signal")


def derive_baseline() -> str:
    """The request of a minimal config (one static prompt layer, nothing else), as pinned text."""
    client = script_client([{"text": "ok"}])
    agent = create_agent(
        llm=client, prompt=[prompt_layer("identity", "You are the tether copilot.")]
    )
    asyncio.run(collect(agent, Session(id="baseline"), "hello"))
    return json.dumps(client.calls[0], indent=2, sort_keys=True, ensure_ascii=False) + "\n"
