"""Drive a turn in a test: run it, fold every event, keep the events."""

from __future__ import annotations

from typing import Any

from ..agent import Agent
from ..session import Session, reduce

__all__ = ["collect"]


async def collect(agent: Agent, session: Session, text: str | None, **kwargs: Any) -> list[Any]:
    """Run one turn with `agent.send(session, text, **kwargs)`, fold each event into `session`
    with `reduce`, and return the events in order."""
    events: list[Any] = []
    async for event in agent.send(session, text, **kwargs):
        reduce(session, event)
        events.append(event)
    return events
