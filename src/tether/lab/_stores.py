"""Store URLs: `memory`, `sqlite:///relative.db`, `sqlite:////absolute.db`, `sqlite:///:memory:`,
`postgresql://user@host/db` (or `postgres://…`).

The runtime opens its stores from one URL the first time it needs one. The three SQLite stores
share one connection to the file (one writer per file: their operations never race each other
for SQLite's write lock); the three PostgreSQL stores share one connection pool, opened on first
use and sized by `pool_min_size` / `pool_max_size` in the URL. The runtime closes what it opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError
from ..stores.memory import InMemoryMessageStore, InMemoryRunStore, InMemoryWorkflowStore
from ..stores.message_store import MessageStore
from ..stores.run_store import RunStore
from ..stores.sqlite import SqliteMessageStore, SqliteRunStore, SqliteWorkflowStore, connect
from ..stores.workflow_store import WorkflowStore

__all__ = [
    "DEFAULT_STORE",
    "StoreSet",
    "open_stores",
    "redact_url",
    "sqlite_path",
]

STORE_SCHEMES = (
    "memory, sqlite:///relative/path.db, sqlite:////absolute/path.db, "
    "postgresql://user:password@host/db (or postgres://...)"
)
"""Every kind of store URL, as error messages list them."""

DEFAULT_STORE = "sqlite:///.tether/tether.db"
"""Where a runtime keeps its data when it is given no store: a file under `.tether/`."""


@dataclass(slots=True)
class StoreSet:
    """The three stores of a runtime, and what it must close."""

    message: MessageStore
    run: RunStore
    workflow: WorkflowStore
    owned: list[Any] = field(default_factory=list)

    async def aclose(self) -> None:
        owned, self.owned = self.owned, []
        for store in owned:
            await store.aclose()


def redact_url(url: str) -> str:
    """The URL with any password replaced, fit for an error message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def sqlite_path(url: str, root: Path) -> str | None:
    """The database path a `sqlite:///…` URL names (relative paths against `root`), or None
    when `url` is not a SQLite URL."""
    if not url.startswith("sqlite://"):
        return None
    rest = url[len("sqlite://") :]
    if not rest.startswith("/"):
        raise ConfigError(
            f"store URL {url!r}: write sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = rest[1:]
    if not path:
        raise ConfigError(f"store URL {url!r} names no database file")
    if path == ":memory:":
        return path
    p = Path(path)
    return str(p if p.is_absolute() else root / p)


def open_stores(url: str, root: Path) -> StoreSet:
    """Open the stores a URL names.

    Raises:
        ConfigError: the URL is not one tether knows.
    """
    if url in ("memory", "memory://", ":memory:"):
        return StoreSet(InMemoryMessageStore(), InMemoryRunStore(), InMemoryWorkflowStore())
    if url.startswith(("postgres://", "postgresql://")):
        return _open_postgres(url)
    path = sqlite_path(url, root)
    if path is None:
        scheme = url.split("://", 1)[0] if "://" in url else None
        what = f"scheme {scheme!r}" if scheme else "form"
        raise ConfigError(
            f"unknown store URL {redact_url(url)!r} (unknown {what}); the store URLs are: "
            f"{STORE_SCHEMES}"
        )
    # One connection for the three stores: one writer per file in this process, so the run
    # recorder never races the message appends for SQLite's write lock.
    conn = connect(path)
    message = SqliteMessageStore(conn, owns=True)
    run = SqliteRunStore(conn, owns=True)
    workflow = SqliteWorkflowStore(conn, owns=True)
    return StoreSet(message, run, workflow, owned=[message, run, workflow])


def _open_postgres(url: str) -> StoreSet:
    try:
        from ..stores.postgres import (
            PostgresMessageStore,
            PostgresRunStore,
            PostgresWorkflowStore,
            connection_pool,
        )
    except ImportError as exc:
        scheme = url.split(":", 1)[0]
        raise ConfigError(
            f"store URL {scheme}://…: PostgreSQL stores need psycopg 3 and psycopg_pool; "
            "install them with pip install 'tether[postgres]'"
        ) from exc
    # One connection pool for the three stores (sized by pool_min_size / pool_max_size in the
    # URL), closed with the last of them.
    pool = connection_pool(url)
    message = PostgresMessageStore(pool, owns=True)
    run = PostgresRunStore(pool, owns=True)
    workflow = PostgresWorkflowStore(pool, owns=True)
    return StoreSet(message, run, workflow, owned=[message, run, workflow])
