"""Small pieces of SQL the SQLite and PostgreSQL stores share."""

from __future__ import annotations

from typing import Any

__all__ = ["where_equal"]


def where_equal(placeholder: str, **filters: Any) -> tuple[str, list[Any]]:
    """``" WHERE a = ? AND b = ?"`` for the filters that are not None, and their values.

    Column names come from our own keyword arguments, never from a caller's data.
    """
    columns = [name for name, value in filters.items() if value is not None]
    if not columns:
        return "", []
    clause = " WHERE " + " AND ".join(f"{c} = {placeholder}" for c in columns)
    return clause, [filters[c] for c in columns]
