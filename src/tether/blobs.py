"""Media bytes kept once, by their sha256: the `BlobStore` protocol and `BlobResolver`.

A media part (`{"type": "image" | "document" | "audio", "media_type", ...}`) carries its bytes
one of three ways: inline base64 (`"data"`), a URL (`"url"`), or a reference into a blob store
(`"blob"`: the sha256 of the bytes, hex, with `"size"` in bytes). The stores
(`tether.stores`) turn inline data over a threshold (`DEFAULT_BLOB_THRESHOLD`, 64 KB) into a
reference when a record or a run event is written, and keep the bytes once however many
records, conversations and requests refer to them.

A transcript loaded from a store therefore holds references, and reading it reads no blob.
The bytes are read when a request is built: an agent given `blobs=` (a `BlobResolver`, which the
lab passes for its runtime's store) puts the resolver on each `ChatRequest`, and the provider
adapter swaps each reference for the base64 data just before it encodes the body
(`BlobResolver.resolve`). The resolver keeps the base64 text of the blobs it read in an LRU
bounded in bytes, so a conversation that carries one image reads and encodes it once, not once
per turn; the blobs this process has just moved out of a part are served from the part's own text
(`tether._known_media`), with no read at all.

```python
resolver = BlobResolver(store.blobs)
messages = await resolver.resolve(loaded_messages)   # references -> data parts
```

Nothing here imports the stores: the harness and the providers know the protocol only.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ._known_media import KNOWN
from .errors import BlobCorruptError, ConfigError

__all__ = [
    "DEFAULT_BLOB_CACHE_BYTES",
    "DEFAULT_BLOB_THRESHOLD",
    "MEDIA_PART_TYPES",
    "BlobInfo",
    "BlobResolver",
    "BlobStore",
    "blob_key",
    "checked_blob",
    "is_blob_key",
]

MEDIA_PART_TYPES = frozenset({"image", "document", "audio"})
"""The `type` of a message part that carries media."""

DEFAULT_BLOB_THRESHOLD = 64 * 1024
"""Inline media data over this many bytes (decoded) is stored once as a blob and referenced."""

DEFAULT_BLOB_CACHE_BYTES = 256 * 1024 * 1024
"""What a `BlobResolver` keeps of the blobs it read, counted as base64 text."""


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What a blob store knows about one blob besides its bytes."""

    sha256: str
    """The key: the sha256 of the bytes, 64 lowercase hex digits."""
    size: int
    """The length of the bytes."""
    media_type: str
    """The media type the bytes were first stored with (`image/png`, `application/pdf`)."""


@runtime_checkable
class BlobStore(Protocol):
    """Bytes kept once under their sha256. Nothing is ever deleted (a blob may be referred to
    from any number of records, events and conversations)."""

    async def put(self, data: bytes, media_type: str) -> str:
        """Keep `data` (once: putting the same bytes again writes nothing) and return its key,
        the sha256 hex of `data`."""
        ...

    async def get(self, sha: str) -> bytes:
        """The bytes stored under `sha`.

        Raises:
            BlobNotFoundError: no blob is stored under `sha`.
            BlobCorruptError: the stored bytes do not hash to `sha`.
        """
        ...

    async def info(self, sha: str) -> BlobInfo | None:
        """Size and media type of the blob under `sha`, without reading its bytes; None when
        there is none."""
        ...


def blob_key(data: bytes) -> str:
    """The key a blob store keeps `data` under: its sha256, hex."""
    return hashlib.sha256(data).hexdigest()


def is_blob_key(value: object) -> bool:
    """True for a string that can be a blob key (64 lowercase hex digits)."""
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def checked_blob(sha: str, data: bytes) -> bytes:
    """`data` when it hashes to `sha`.

    Raises:
        BlobCorruptError: it does not (the stored copy is damaged).
    """
    if blob_key(data) != sha:
        raise BlobCorruptError(sha, f"the {len(data)} stored bytes hash to {blob_key(data)}")
    return data


class BlobResolver:
    """Swaps blob references in messages for base64 data, reading each blob once.

    The base64 text of each blob read is kept in a least-recently-used cache bounded by
    `max_bytes` (a blob bigger than the whole bound is read for each request that needs it and
    not kept). `reads` counts the reads from the store.
    """

    def __init__(self, store: BlobStore, *, max_bytes: int = DEFAULT_BLOB_CACHE_BYTES) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ConfigError(f"max_bytes must be an int >= 0, not {max_bytes!r}")
        self.store = store
        """Where the bytes are read from."""
        self.max_bytes = max_bytes
        """The cache bound, in characters of base64 text."""
        self.reads = 0
        """How many blobs were read from the store so far."""
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cached = 0
        self._lock = asyncio.Lock()

    @property
    def cached_bytes(self) -> int:
        """The base64 text the cache holds now, in characters."""
        return self._cached

    async def data(self, sha: str) -> str:
        """The base64 text of the blob under `sha` (read from the store unless cached).

        Raises:
            BlobNotFoundError: the store holds no such blob.
            BlobCorruptError: the stored bytes do not hash to `sha`.
        """
        found = self._cache.get(sha)
        if found is not None:
            self._cache.move_to_end(sha)
            return found
        async with self._lock:  # two requests needing one blob read it once
            found = self._cache.get(sha)
            if found is not None:
                return found
            # This process may have just moved these bytes out of a part: take its text as it is.
            text = KNOWN.text(sha)
            if text is None:
                raw = await self.store.get(sha)  # checked against `sha` by the store
                self.reads += 1
                text = base64.b64encode(raw).decode("ascii")
            self._keep(sha, text)
            return text

    def _keep(self, sha: str, text: str) -> None:
        if len(text) > self.max_bytes:
            return
        self._cache[sha] = text
        self._cached += len(text)
        while self._cached > self.max_bytes:
            _, old = self._cache.popitem(last=False)
            self._cached -= len(old)

    async def resolve(self, messages: Sequence[Mapping[str, Any]]) -> list[Any]:
        """`messages` with each blob reference replaced by a part with `data` (its other keys
        kept; `size` dropped). Messages without references are the same objects; with none at
        all the result is a plain copy of the list.

        Raises:
            BlobNotFoundError: a referenced blob is not in the store.
            BlobCorruptError: a referenced blob's stored bytes are damaged.
        """
        needed: dict[str, None] = {}
        for message in messages:
            _references(message.get("content"), needed)
        if not needed:
            return list(messages)
        texts = {sha: await self.data(sha) for sha in needed}
        return [_swap_message(m, texts) for m in messages]


def _references(parts: Any, out: dict[str, None]) -> None:
    """Collect the blob keys `parts` (a content list, or a tool result's output) refers to."""
    if not isinstance(parts, list):
        return
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in MEDIA_PART_TYPES:
            sha = part.get("blob")
            if isinstance(sha, str):
                out[sha] = None
        elif kind == "tool_result":  # the media a tool returned is in its `parts`
            _references(part.get("parts"), out)


def _swap_message(message: Mapping[str, Any], texts: Mapping[str, str]) -> Any:
    content = message.get("content")
    swapped = _swap_parts(content, texts)
    return message if swapped is content else {**message, "content": swapped}


def _swap_parts(parts: Any, texts: Mapping[str, str]) -> Any:
    if not isinstance(parts, list):
        return parts
    out: list[Any] | None = None
    for i, part in enumerate(parts):
        new = part
        if isinstance(part, dict):
            kind = part.get("type")
            if kind in MEDIA_PART_TYPES and isinstance(part.get("blob"), str):
                new = {k: v for k, v in part.items() if k not in ("blob", "size")}
                new["data"] = texts[part["blob"]]
            elif kind == "tool_result":
                media = _swap_parts(part.get("parts"), texts)
                if media is not part.get("parts"):
                    new = {**part, "parts": media}
        if new is not part:
            if out is None:
                out = list(parts)
            out[i] = new
    return parts if out is None else out
