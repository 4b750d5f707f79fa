"""The ordered, append-only list of one store's schema migrations, whatever the database.

A migration is a function named ``mNNN_what_changed``. Names must increase in declaration
order, so a name out of order is a programming error caught at import time. Never edit or
reorder a migration that has shipped; append a new one. How a list is applied and recorded is
each backend's (`tether.stores.sqlite.SqliteMigrations`,
`tether.stores.postgres.PostgresMigrations`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["MigrationList"]

F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"^m(\d{3,})_[a-z0-9_]+$")


class MigrationList(Generic[F]):
    """Register migrations in order with `add()` or as a decorator."""

    def __init__(self, store: str) -> None:
        self.store = store
        """The key these migrations are recorded under."""
        self._items: list[tuple[str, F]] = []

    def __call__(self, fn: F) -> F:
        """Register `fn` as the next migration (use as a decorator)."""
        self.add(fn.__name__, fn)
        return fn

    def add(self, name: str, fn: F) -> None:
        """Register `fn` under `name` as the next migration."""
        match = _NAME.match(name)
        if match is None:
            raise ValueError(f"migration name {name!r} must look like m001_what_changed")
        if self._items:
            last = self._items[-1][0]
            if _number(last) >= int(match.group(1)):
                raise ValueError(
                    f"migration {name!r} must come after {last!r}: migrations are append-only"
                )
        self._items.append((name, fn))

    @property
    def names(self) -> list[str]:
        """The declared migration names, in order."""
        return [name for name, _ in self._items]


def _number(name: str) -> int:
    match = _NAME.match(name)
    assert match is not None  # only validated names are stored
    return int(match.group(1))
