"""Reading an ASGI scope without building a Request (the middleware run before any app)."""

from __future__ import annotations

from starlette.types import Scope

__all__ = ["header"]


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of the header `name` (lower-case bytes), or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None
