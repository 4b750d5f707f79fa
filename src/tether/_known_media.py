"""Media this process has already decoded, by the identity of its base64 text.

A media part made by `image()` (or checked once by `check_media_part`) travels as the same
`str` object through the session, the transcript record, the run event and the request. Each of
those would otherwise decode the base64 to validate it, hash the bytes to name the blob, and
the first request would read the blob back and encode it again. `KNOWN` remembers, for the
texts it was shown, the bytes and (once computed) their sha256, so a first turn decodes and
hashes a 5 MB image at most once, and the resolver serves the first request from the text it
already has.

Entries are found by `id(text)` and then checked to be that very object (the entry holds a
reference, so the id cannot be reused while it is kept). The memo is bounded: at most
`KNOWN_MAX_BYTES` of bytes and text together, least recently used first out; an item bigger
than the bound is not kept. It is an optimisation only: a text it lacks is decoded as before.
"""

from __future__ import annotations

import binascii
import hashlib
from collections import OrderedDict

__all__ = ["KNOWN", "KNOWN_MAX_BYTES", "KnownMedia", "decode_base64"]

KNOWN_MAX_BYTES = 64 * 1024 * 1024
"""What the process-wide memo keeps at most, bytes and base64 text counted together."""


def decode_base64(text: str) -> bytes:
    """The bytes of strict base64 `text` (no whitespace, right padding).

    Raises:
        binascii.Error: it is not.
    """
    return binascii.a2b_base64(text, strict_mode=True)


class _Entry:
    __slots__ = ("raw", "sha", "text")

    def __init__(self, text: str, raw: bytes) -> None:
        self.text = text
        self.raw = raw
        self.sha: str | None = None


class KnownMedia:
    """A bounded memo of base64 texts and their bytes (see the module docstring)."""

    def __init__(self, max_bytes: int = KNOWN_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._by_id: OrderedDict[int, _Entry] = OrderedDict()
        self._by_sha: dict[str, _Entry] = {}
        self._size = 0

    def remember(self, text: str, raw: bytes) -> None:
        """Keep `raw` as the bytes of `text` (which the caller just encoded or decoded)."""
        cost = len(text) + len(raw)
        if cost > self.max_bytes or id(text) in self._by_id:
            return
        self._by_id[id(text)] = _Entry(text, raw)
        self._size += cost
        while self._size > self.max_bytes:
            _, old = self._by_id.popitem(last=False)
            self._size -= len(old.text) + len(old.raw)
            if old.sha is not None and self._by_sha.get(old.sha) is old:
                del self._by_sha[old.sha]

    def _entry(self, text: str) -> _Entry | None:
        entry = self._by_id.get(id(text))
        if entry is None or entry.text is not text:
            return None
        self._by_id.move_to_end(id(text))
        return entry

    def raw(self, text: str) -> bytes | None:
        """The bytes of `text` when it is a text this memo was shown; else None."""
        entry = self._entry(text)
        return None if entry is None else entry.raw

    def decoded(self, text: str) -> bytes:
        """The bytes of `text`: remembered, or decoded now (strictly) and remembered.

        Raises:
            binascii.Error: `text` is not base64.
        """
        entry = self._entry(text)
        if entry is not None:
            return entry.raw
        raw = decode_base64(text)
        self.remember(text, raw)
        return raw

    def sha256(self, text: str, raw: bytes) -> str:
        """The sha256 hex of `raw`, the bytes of `text`, hashed once while `text` is kept."""
        entry = self._entry(text)
        if entry is not None and entry.sha is not None:
            return entry.sha
        sha = hashlib.sha256(raw).hexdigest()
        if entry is not None:
            entry.sha = sha
            self._by_sha[sha] = entry
        return sha

    def clear(self) -> None:
        """Forget everything (as a new process knows nothing)."""
        self._by_id.clear()
        self._by_sha.clear()
        self._size = 0

    def text(self, sha: str) -> str | None:
        """The base64 text of the bytes named `sha`, when a kept text was hashed to it."""
        entry = self._by_sha.get(sha)
        return None if entry is None else entry.text


KNOWN = KnownMedia()
"""The process-wide memo the media helpers, the stores and `BlobResolver` share."""
