"""The AWS event stream framing (``application/vnd.amazon.eventstream``), decoded incrementally:
bytes in, whole messages out, however the body is split.

One message on the wire (all integers big-endian)::

    total length (4) | headers length (4) | prelude CRC32 (4)
    headers (headers length bytes) | payload | message CRC32 (4)

The prelude CRC covers the first 8 bytes, the message CRC everything before it. Each header is
a name (1-byte length, UTF-8), a type byte and a value: 0/1 true/false, 2 byte, 3 short, 4 int,
5 long, 6 bytes and 7 string (2-byte length first), 8 timestamp (8), 9 UUID (16). A CRC that does
not match, a length out of bounds or a header of an unknown type is an `LLMStreamError`: the bytes
are not what the server framed, so nothing of them is read as an answer.

Each message becomes a `ServerSentEvent` so the adapters' read loop (`HTTPAdapter._read`) is the
same for both framings: ``event`` is the ``:event-type`` header for an event message,
``exception:<:exception-type>`` for a modelled exception and ``error:<:error-code>`` for a
generic error (whose ``:error-message`` header becomes ``{"message": ...}`` data); ``data`` is
the payload as text (JSON for Bedrock). Work per message is O(its size): only an incomplete
message is buffered.
"""

from __future__ import annotations

import json
import struct
from zlib import crc32

from .._sse import ServerSentEvent
from ..errors import LLMStreamError

__all__ = ["MAX_MESSAGE", "EventStreamDecoder", "decode_headers", "encode_message"]

MAX_MESSAGE = 16 * 1024 * 1024
"""The longest message the format allows (16 MiB)."""
_MAX_HEADERS = 128 * 1024
_PRELUDE = struct.Struct(">III")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_FIXED = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
"""Header value types of a fixed size, and that size."""


def _corrupt(provider: str, what: str) -> LLMStreamError:
    return LLMStreamError(
        f"{provider} sent a corrupt event stream frame: {what}",
        provider=provider,
        retryable=True,
    )


def decode_headers(data: bytes | bytearray, start: int, end: int) -> dict[str, object]:
    """The headers in ``data[start:end]``; raises ValueError on a malformed one."""
    headers: dict[str, object] = {}
    pos = start
    while pos < end:
        size = data[pos]
        pos += 1
        name = bytes(data[pos : pos + size]).decode("utf-8")
        pos += size
        kind = data[pos]
        pos += 1
        value: object
        if kind == 7 or kind == 6:
            (length,) = _U16.unpack_from(data, pos)
            pos += 2
            raw = bytes(data[pos : pos + length])
            pos += length
            value = raw.decode("utf-8") if kind == 7 else raw
        elif kind == 0 or kind == 1:
            value = kind == 0
        elif kind in _FIXED:
            width = _FIXED[kind]
            raw = bytes(data[pos : pos + width])
            pos += width
            value = raw if kind == 9 else int.from_bytes(raw, "big", signed=True)
        else:
            raise ValueError(f"header {name!r} has unknown type {kind}")
        headers[name] = value
    if pos != end:
        raise ValueError("headers overrun their length")
    return headers


class EventStreamDecoder:
    """Feed it raw body chunks with `feed()`; call `flush()` once the body has ended.

    Has the `SSEDecoder` interface the adapters' read loop uses (`stray` stays empty: every
    byte is framed or the stream is corrupt).
    """

    __slots__ = ("_checked", "_have", "_need", "_pending", "provider", "stray")

    def __init__(self, provider: str = "bedrock") -> None:
        self.provider = provider
        self._pending: list[bytes] = []
        """Fragments of a message whose end has not arrived (joined once it has)."""
        self._have = 0
        self._need = 0
        """Bytes the pending message needs before it can be decoded."""
        self._checked = False
        """The prelude of the pending message passed its checks already."""
        self.stray: list[str] = []

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode one chunk; return the messages it completed, in order."""
        if self._pending:
            self._pending.append(chunk)
            self._have += len(chunk)
            if self._have < self._need:
                return []
            data = b"".join(self._pending)
            self._pending = []
        else:
            data = chunk
        size = len(data)
        pos = 0
        need = 12
        events: list[ServerSentEvent] = []
        while size - pos >= 12:
            total, header_size, prelude_crc = _PRELUDE.unpack_from(data, pos)
            if not self._checked:
                if crc32(data[pos : pos + 8]) != prelude_crc:
                    raise _corrupt(self.provider, "the prelude CRC does not match")
                if total < 16 or total > MAX_MESSAGE or header_size > min(_MAX_HEADERS, total - 16):
                    raise _corrupt(
                        self.provider,
                        f"lengths out of bounds (total {total}, headers {header_size})",
                    )
                self._checked = True
            end = pos + total
            if end > size:
                need = total
                break
            (message_crc,) = _U32.unpack_from(data, end - 4)
            if crc32(data[pos : end - 4]) != message_crc:
                raise _corrupt(self.provider, "the message CRC does not match")
            start = pos + 12
            try:
                headers = decode_headers(data, start, start + header_size)
            except (ValueError, IndexError, struct.error) as exc:
                raise _corrupt(self.provider, f"bad headers: {exc}") from exc
            payload = data[start + header_size : end - 4]
            events.append(self._event(headers, payload))
            self._checked = False
            pos = end
        if pos < size:
            rest = data[pos:] if pos else data
            self._pending = [rest]
            self._have = len(rest)
            self._need = need
        return events

    def _event(self, headers: dict[str, object], payload: bytes) -> ServerSentEvent:
        kind = headers.get(":message-type", "event")
        text = payload.decode("utf-8", "replace")
        if kind == "event":
            return ServerSentEvent(str(headers.get(":event-type", "")), text)
        if kind == "exception":
            return ServerSentEvent(f"exception:{headers.get(':exception-type', '')}", text or "{}")
        message = headers.get(":error-message") or text
        body = json.dumps({"message": message})
        return ServerSentEvent(f"error:{headers.get(':error-code', '')}", body)

    def flush(self) -> list[ServerSentEvent]:
        """The body ended: a message left incomplete is a broken stream."""
        if self._pending:
            left = self._have
            self._pending = []
            raise LLMStreamError(
                f"{self.provider} stream ended inside an event stream frame ({left} bytes of it)",
                provider=self.provider,
                retryable=True,
            )
        return []


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One message with string headers (for tests and benchmarks that play a server)."""
    raw = bytearray()
    for name, value in headers.items():
        encoded_name = name.encode("utf-8")
        encoded = value.encode("utf-8")
        raw += bytes([len(encoded_name)]) + encoded_name + b"\x07" + _U16.pack(len(encoded))
        raw += encoded
    total = 12 + len(raw) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw))
    prelude += _U32.pack(crc32(prelude))
    body = prelude + bytes(raw) + payload
    return body + _U32.pack(crc32(body))
