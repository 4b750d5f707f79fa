"""Conversation titles: a title workflow names a scope after its first successful episode.

The workflow starts once per scope, after the first episode on it that succeeded (an earlier
failed episode, even one that stored a step, does not count), and is never retried: a title
that failed stays absent. It runs isolated and best effort; a failure is an `agent_warning`
on the episode's run, never an error of the episode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, TypedDict

from ..run_events import AGENT_WARNING
from ..session import Message
from ..stores.message_store import MessageStore
from ..stores.run_store import RunEvent, RunStore
from ..workflows import Workflow
from ._callers import detached
from ._host import AgentHost
from ._recorder import notify

__all__ = [
    "ConversationTitleInput",
    "ConversationTitleOutput",
    "first_success",
    "in_title_workflow",
    "start_title",
]

logger = logging.getLogger("tether.lab")

_TITLING: ContextVar[bool] = ContextVar("tether_lab_titling", default=False)
"""Set while a title workflow runs, so the episodes it starts never start another title."""

_PAGE = 50


class ConversationTitleInput(TypedDict):
    """What a title workflow receives: the scope and its transcript (pin excluded)."""

    memory_scope: str
    messages: list[Message]


class ConversationTitleOutput(TypedDict):
    """What a title workflow must return."""

    title: str


def in_title_workflow() -> bool:
    """True inside a title workflow (its episodes start no title of their own)."""
    return _TITLING.get()


async def first_success(store: RunStore, scope: str, run_id: str) -> bool:
    """True when no episode on `scope` but `run_id` has completed: `run_id` is its first
    success. Reads the scope's runs newest first, usually one page."""
    offset = 0
    while True:
        runs = await store.list_runs(memory_scope=scope, kind="agent", limit=_PAGE, offset=offset)
        if any(r.status == "completed" and r.run_id != run_id for r in runs):
            return False
        if len(runs) < _PAGE:
            return True
        offset += len(runs)


def start_title(
    host: AgentHost, workflow: Workflow[Any, Any], store: MessageStore, scope: str, run_id: str
) -> None:
    """Start the title workflow for `scope` in the background (the runtime waits for it)."""
    token = _TITLING.set(True)
    try:
        # Background work: not a run nested in the episode (or in one that called it).
        with detached():
            host.background.spawn(
                _title(host, workflow, store, scope, run_id), name=f"tether-lab:title:{scope}"
            )
    finally:
        _TITLING.reset(token)


async def _title(
    host: AgentHost, workflow: Workflow[Any, Any], store: MessageStore, scope: str, run_id: str
) -> None:
    """Best effort: any failure is a warning on the episode's run, never an error."""
    try:
        stored = await store.load(scope)
        messages: list[Message] = [r for r in stored if r["role"] != "system"]
        payload: ConversationTitleInput = {"memory_scope": scope, "messages": messages}
        output = await workflow.run(payload, isolated=True).result
        title = output.get("title") if isinstance(output, Mapping) else None
        if not isinstance(title, str) or not title.strip():
            raise ValueError(
                f"a title workflow must return {{'title': str}} with a non-empty title, "
                f"got {output!r:.120}"
            )
        await store.set_title(scope, title.strip())
    except Exception as exc:
        message = f"title workflow {workflow.id!r} failed for memory scope {scope!r}: {exc!r}"
        logger.warning(message)
        at = time.time()
        data = {"code": "title_failed", "message": message, "memory_scope": scope}
        try:
            seq = await host.run_store.append_events(
                run_id, [{"type": AGENT_WARNING, "at": at, "data": data}]
            )
        except Exception:
            logger.exception("could not record the title failure of run %s", run_id)
        else:
            event: RunEvent = {
                "run_id": run_id,
                "seq": seq,
                "type": AGENT_WARNING,
                "at": at,
                "data": data,
            }
            notify(host.listeners, event)
