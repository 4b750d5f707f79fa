"""How an MCP server over HTTP is authorized: `OAuth(...)` (a person logs in) or
`ClientCredentials(...)` (a machine does), and where their tokens are kept."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, runtime_checkable
from urllib.parse import urlsplit

from ..errors import ConfigError, StoreCorruptError

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_REDIRECT_URI",
    "DEFAULT_TOKEN_FILE",
    "Authorize",
    "ClientCredentials",
    "FileTokenStore",
    "MemoryTokenStore",
    "OAuth",
    "TokenStore",
]

DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"
"""Where the default login listens for the browser coming back (a fixed port, so a client
registered once stays valid)."""
DEFAULT_TOKEN_FILE = Path(".tether") / "mcp-auth.json"
"""Where tokens and client registrations are kept by default, relative to the project (the
working directory), created readable by its owner only."""

Authorize: TypeAlias = Callable[[str], Awaitable[str]]
"""`async def authorize(authorization_url) -> the URL the browser was sent back to`."""


@runtime_checkable
class TokenStore(Protocol):
    """Keeps what a login earned (tokens, client registrations), per MCP server."""

    async def load(self, key: str) -> dict[str, Any] | None:
        """The entry saved under `key` (an MCP server's URL), or None."""
        ...

    async def save(self, key: str, value: dict[str, Any]) -> None:
        """Replace the entry under `key`."""
        ...


class MemoryTokenStore:
    """A token store that forgets everything when the process ends."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Any]] = {}

    async def load(self, key: str) -> dict[str, Any] | None:
        entry = self._entries.get(key)
        return json.loads(json.dumps(entry)) if entry is not None else None

    async def save(self, key: str, value: dict[str, Any]) -> None:
        self._entries[key] = json.loads(json.dumps(value))

    def __repr__(self) -> str:
        return "MemoryTokenStore()"


class FileTokenStore:
    """A JSON file readable and writable by its owner only (0600, in a directory created 0700).
    Each save rewrites it atomically, so a crash never leaves half a file."""

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_TOKEN_FILE) -> None:
        self.path = Path(path)
        self._lock = asyncio.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {"version": 1, "servers": {}}
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise StoreCorruptError(
                f"the MCP token file {self.path} is not JSON ({exc}); delete it to log in again"
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
            raise StoreCorruptError(
                f"the MCP token file {self.path} is not a token file; delete it to log in again"
            )
        return data

    def _write(self, data: dict[str, Any]) -> None:
        directory = self.path.parent
        if not directory.exists():
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".mcp-auth-", dir=directory)  # created 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    async def load(self, key: str) -> dict[str, Any] | None:
        async with self._lock:
            entry = (await asyncio.to_thread(self._read))["servers"].get(key)
        return entry if isinstance(entry, dict) else None

    async def save(self, key: str, value: dict[str, Any]) -> None:
        async with self._lock:

            def update() -> None:
                data = self._read()
                data["servers"][key] = value
                self._write(data)

            await asyncio.to_thread(update)

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"


def _store(value: TokenStore | str | os.PathLike[str] | None, what: str) -> TokenStore:
    if value is None:
        return FileTokenStore()
    if isinstance(value, str | os.PathLike):
        return FileTokenStore(value)
    if isinstance(value, TokenStore):
        return value
    raise ConfigError(
        f"{what}(token_store=...) takes a path or an object with async load(key) and "
        f"save(key, value), got {type(value).__name__}"
    )


def _check_url(value: str | None, name: str, *, https_path: bool = False) -> None:
    if value is None:
        return
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"OAuth({name}=...) must be an http(s) URL, got {value!r}")
    if https_path and (parts.scheme != "https" or parts.path in ("", "/")):
        raise ConfigError(
            f"OAuth({name}=...) must be an https URL with a path (the client ID metadata "
            f"document's own URL), got {value!r}"
        )


@dataclass(frozen=True, eq=False)
class OAuth:
    """Log in to an MCP server through its authorization server (the MCP authorization spec:
    OAuth 2.1 with PKCE, discovered from the server's protected resource metadata).

    The client is registered with a pre-registered `client_id` (and `client_secret`) when
    given, else with `client_metadata_url` as a client ID metadata document when the
    authorization server supports them, else by dynamic client registration. Tokens and
    registrations are kept in `token_store` (default: `.tether/mcp-auth.json`, owner-only),
    so the next run does not log in again; an expired token is refreshed.

    Args:
        client_name: How the authorization server shows this client to the person.
        redirect_uri: Where the browser comes back to; the default login listens there
            (a loopback address).
        authorize: `async (authorization_url) -> url the browser was sent back to`; the
            default opens the browser and listens on `redirect_uri`.
        scope: The scopes to ask for at first (default: what the server's challenge or
            metadata names).
        client_id: A pre-registered client id.
        client_secret: Its secret, if it is a confidential client.
        client_metadata_url: The https URL of this client's metadata document.
        token_store: A path, a `TokenStore`, or None for the default file.
    """

    kind: ClassVar[str] = "oauth"

    client_name: str = "tether"
    redirect_uri: str = DEFAULT_REDIRECT_URI
    authorize: Authorize | None = None
    scope: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_metadata_url: str | None = None
    token_store: TokenStore | str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.client_name, str) or not self.client_name:
            raise ConfigError("OAuth(client_name=...) must be a non-empty string")
        _check_url(self.redirect_uri, "redirect_uri")
        redirect = urlsplit(self.redirect_uri)
        if redirect.scheme == "http" and redirect.hostname not in ("localhost", "127.0.0.1", "::1"):
            raise ConfigError(
                f"OAuth(redirect_uri={self.redirect_uri!r}) must be https, or http on a loopback "
                "address (127.0.0.1, localhost): the authorization code travels in it"
            )
        _check_url(self.client_metadata_url, "client_metadata_url", https_path=True)
        if self.authorize is not None and not callable(self.authorize):
            raise ConfigError("OAuth(authorize=...) is an async function (url) -> returned url")
        if self.client_secret is not None and self.client_id is None:
            raise ConfigError("OAuth(client_secret=...) needs the client_id it belongs to")
        if self.scope is not None and not isinstance(self.scope, str):
            raise ConfigError("OAuth(scope=...) is a space-separated string of scopes")
        object.__setattr__(self, "_store", _store(self.token_store, "OAuth"))

    @property
    def store(self) -> TokenStore:
        store: TokenStore = object.__getattribute__(self, "_store")
        return store


@dataclass(frozen=True, eq=False)
class ClientCredentials:
    """A machine-to-machine client: the OAuth client-credentials grant, with a client id and
    secret registered with the MCP server's authorization server beforehand. Tokens are kept in
    memory and fetched again when they expire or the server refuses them."""

    kind: ClassVar[str] = "client_credentials"

    client_id: str
    client_secret: str = field(repr=False)
    scope: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.client_id, str) or not self.client_id:
            raise ConfigError("ClientCredentials(client_id=...) must be a non-empty string")
        if not isinstance(self.client_secret, str) or not self.client_secret:
            raise ConfigError("ClientCredentials(client_secret=...) must be a non-empty string")
        object.__setattr__(self, "_store", MemoryTokenStore())

    @property
    def store(self) -> TokenStore:
        store: TokenStore = object.__getattribute__(self, "_store")
        return store
