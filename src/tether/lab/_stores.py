"""Store URLs: `memory`, `sqlite:///relative.db`, `sqlite:////absolute.db`, `sqlite:///:memory:`,
`postgresql://user@host/db` (or `postgres://…`).

The runtime opens its stores from one URL the first time it needs one. The three SQLite stores
share one connection to the file (one writer per file: their operations never race each other
for SQLite's write lock); the three PostgreSQL stores share one connection pool, opened on first
use and sized by `pool_min_size` / `pool_max_size` in the URL. The runtime closes what it opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..blobs import BlobResolver, BlobStore
from ..errors import ConfigError
from ..stores.message_store import MessageStore
from ..stores.run_store import RunStore
from ..stores.workflow_store import WorkflowStore

__all__ = [
    "DEFAULT_STORE",
    "RuntimeStores",
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


class RuntimeStores:
    """A runtime's three stores: the ones given stay the caller's (never closed here); the rest
    open from one URL the first time one is needed, relative paths under `root`."""

    def __init__(
        self,
        url: str | None,
        root: str | PathLike[str] | None,
        message: MessageStore | None = None,
        run: RunStore | None = None,
        workflow: WorkflowStore | None = None,
    ) -> None:
        self.url = url
        """The store URL (None: `DEFAULT_STORE`)."""
        self.root = Path(root) if root is not None else Path.cwd()
        """The project directory (default: the current directory)."""
        self._root_given = root is not None
        self._message, self._run, self._workflow = message, run, workflow
        self._opened: StoreSet | None = None
        self._resolvers: dict[int, tuple[BlobStore, BlobResolver]] = {}
        self.closed = False
        """Set when the runtime closed: opening is refused from then on."""

    def _open(self) -> StoreSet:
        if self.closed:
            raise ConfigError("this runtime is closed")
        if self._opened is None:
            self._opened = open_stores(self.url or DEFAULT_STORE, self.root)
        return self._opened

    @property
    def is_open(self) -> bool:
        """True once the stores of the URL were opened (the URL is then fixed)."""
        return self._opened is not None

    def adopt_project(self, root: Path, store: str | None) -> None:
        """Make these the project's stores at `root` (the registry does this): a runtime given
        no root keeps its default store and provenance in the project, not in whatever
        directory a command runs in; `store` (the project's store key) applies when the
        runtime was given none. Nothing changes once the stores are open."""
        if self._opened is not None:
            return
        if not self._root_given:
            self.root = root
        if store is not None and self.url is None:
            self.root = root
            self.use(store)

    def use(self, url: str) -> None:
        """Point stores that are not open yet at `url` (the registry's `store` key does this
        when the runtime was created without one)."""
        if self._opened is not None:
            raise ConfigError("the runtime's stores are already open; pass store= when creating it")
        self.url = url

    @property
    def message(self) -> MessageStore:
        return self._message if self._message is not None else self._open().message

    @property
    def run(self) -> RunStore:
        return self._run if self._run is not None else self._open().run

    def resolver(self, store: MessageStore) -> BlobResolver | None:
        """The one `BlobResolver` (and so the one byte-bounded cache) of the blob store that
        `store`'s records refer to (`tether.blobs`); None for a message store of the caller's
        that keeps no blobs."""
        blobs = getattr(store, "blobs", None)
        if not isinstance(blobs, BlobStore):
            return None
        found = self._resolvers.get(id(blobs))
        if found is None or found[0] is not blobs:
            found = self._resolvers[id(blobs)] = (blobs, BlobResolver(blobs))
        return found[1]

    @property
    def workflow(self) -> WorkflowStore:
        return self._workflow if self._workflow is not None else self._open().workflow

    async def aclose(self) -> None:
        """Close what was opened here (idempotent)."""
        if self._opened is not None:
            await self._opened.aclose()


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
    # Each backend is imported when its URL is opened (a command that opens no store loads none).
    if url in ("memory", "memory://", ":memory:"):
        from ..stores.memory import (
            InMemoryBlobStore,
            InMemoryMessageStore,
            InMemoryRunStore,
            InMemoryWorkflowStore,
        )

        blobs = InMemoryBlobStore()  # one dict: the message and run stores keep each blob once
        return StoreSet(
            InMemoryMessageStore(blobs=blobs),
            InMemoryRunStore(blobs=blobs),
            InMemoryWorkflowStore(),
        )
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
    from ..stores.sqlite import SqliteMessageStore, SqliteRunStore, SqliteWorkflowStore, connect

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
