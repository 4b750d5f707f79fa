"""Wakeups: in-process events that a store sets when something a waiter waits for changed.

A waiter watches a key (a workflow run's id, a memory scope) for as long as it waits, and looks
at the store again each time its event is set. A store that can hear changes — PostgreSQL's
`LISTEN/NOTIFY`, or the in-memory store's own writes — calls `wake(key)`; a waiter whose event
nobody sets falls back to polling. An event being set means "look again", never "it is free":
the store's answer decides.

Imports nothing of tether.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

__all__ = ["Wakeups"]


class Wakeups:
    """The events of the waiters of each key (see the module docstring)."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Event]] = {}

    def __bool__(self) -> bool:
        return bool(self._waiters)

    @contextmanager
    def watch(self, key: Hashable) -> Iterator[asyncio.Event]:
        """An event set by every `wake(key)` (and `wake_all()`) while the block runs."""
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]

    def wake(self, key: Hashable) -> None:
        """Set the event of every waiter of `key` (none: nothing to do)."""
        for event in self._waiters.get(key, ()):
            event.set()

    def wake_all(self) -> None:
        """Set every waiter's event (what changed is not known: all of them look again)."""
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()
