"""Shared by the views: constants, the unreadable-part error and the guarded read."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from ...errors import StoreCorruptError, StoreError

T = TypeVar("T")

PAGE_SIZE = 50
"""Rows per page of the runs and conversations lists."""
BATCH = 200
"""Rows read from a store per query when a list is filtered after reading."""
TREE_DEPTH = 16
"""How deep a workflow tree is followed (a cycle in corrupt links stops here too)."""
TREE_NODES = 500
"""How many runs one tree shows at most."""
EVENTS_PER_POLL = 1000
"""How many events one `/api/events/{id}` answer carries at most."""


class Unreadable(Exception):
    """A part of a page could not be read; carries the store's message."""


async def guarded_read(read: Awaitable[T]) -> T:
    """Await a store read, turning a corrupt record or a failing store into `Unreadable`."""
    try:
        return await read
    except (StoreCorruptError, StoreError) as exc:
        raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
