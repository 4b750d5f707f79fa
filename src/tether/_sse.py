"""The one incremental Server-Sent Events decoder: bytes in, whole events out, however they are
split. The provider adapters (`tether.llm`) and the MCP client's streamable HTTP channel
(`tether.mcp`) both read their event streams with it.

It follows the WHATWG event-stream rules (``data`` lines joined with ``\\n``, ``event``/``id``
fields, ``:`` comments, one optional space after the colon, CR / LF / CRLF line ends, a leading
BOM) with one deliberate difference: `flush()` dispatches an event left unterminated at the end of
the body. Real providers end streams that way (the Anthropic SDK fixtures end without a newline,
Gemini's prompt-blocked reply ends ``}\\r\\n`` with no blank line), and the SDKs keep that event.

A reader that never calls `flush()` (the MCP channel, whose answer is a complete event) keeps
the strict rule. `retry` holds the last ``retry:`` field the server sent, for a reader that
reconnects.

Lines that are not an SSE field at all (a bare JSON error object a server appends to the stream)
are kept in `stray` for the adapter to inspect; a stream of valid events never fills it.

Work per event is O(1) in the length of the stream: only an incomplete line is buffered, as a
list of fragments joined once when its line ends.
"""

from __future__ import annotations

__all__ = ["SSEDecoder", "ServerSentEvent"]

_BOM = b"\xef\xbb\xbf"
_STRAY_LIMIT = 256 * 1024
"""Bytes of non-SSE lines kept for error reporting; more is dropped."""


class ServerSentEvent:
    """One dispatched event: its type (``message`` when the stream named none), data and id."""

    __slots__ = ("data", "event", "id")

    def __init__(self, event: str, data: str, id: str | None = None) -> None:
        self.event = event
        self.data = data
        self.id = id

    def __repr__(self) -> str:
        return f"ServerSentEvent(event={self.event!r}, data={self.data!r:.80})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerSentEvent):
            return NotImplemented
        return (self.event, self.data, self.id) == (other.event, other.data, other.id)

    # Mutable and compared by value, so unhashable: defining __eq__ alone sets __hash__ to None.


class SSEDecoder:
    """Feed it raw body chunks with `feed()`; call `flush()` once the body has ended."""

    __slots__ = (
        "_cr",
        "_data",
        "_event",
        "_id",
        "_started",
        "_stray_size",
        "_tail",
        "retry",
        "stray",
    )

    def __init__(self) -> None:
        self._tail: list[bytes] = []
        """Fragments of a line whose end has not arrived yet."""
        self._cr = False
        """The last chunk ended with CR: a LF starting the next one belongs to that line end."""
        self._started = False
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None
        self.stray: list[str] = []
        """Lines that were not SSE fields (e.g. a bare JSON error body), in order."""
        self._stray_size = 0
        self.retry: int | None = None
        """The last valid ``retry:`` field (milliseconds before reconnecting), if any."""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode one chunk of the body; return the events it completed, in order."""
        if self._tail or self._cr or not self._started:
            chunk = self._continue(chunk)
        if not chunk:
            return []
        lines = chunk.splitlines()
        last = chunk[-1]
        if last == 13:  # CR
            self._cr = True
        elif last != 10:  # LF: anything else means the last line is not finished
            self._tail.append(lines.pop())
        events: list[ServerSentEvent] = []
        data = self._data
        for line in lines:
            # The two lines of nearly every event get a fast path; the rest go through _line.
            if not line:
                if data:
                    events.append(self._dispatch(data))
                    data = self._data = []
                self._event = None
            elif line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                data.append(value.decode("utf-8", "replace"))
            else:
                self._line(line, events)
        return events

    def _continue(self, chunk: bytes) -> bytes:
        """The slow start of `feed()`: a possible BOM, a CR/LF pair split between chunks, and a
        line left unfinished by earlier chunks. Returns what to split into lines (b"" to wait)."""
        if not self._started:
            if self._tail:
                chunk = self._tail.pop() + chunk
            if len(chunk) < 3 and _BOM.startswith(chunk):
                # Too short to tell whether the body starts with a BOM: wait for more.
                if chunk:
                    self._tail.append(chunk)
                return b""
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if self._tail and chunk:
            self._tail.append(chunk)
            if b"\n" not in chunk and b"\r" not in chunk:
                return b""
            chunk = b"".join(self._tail)
            self._tail = []
        return chunk

    def flush(self) -> list[ServerSentEvent]:
        """The body ended: finish a last line and dispatch a last event without a blank line."""
        events: list[ServerSentEvent] = []
        if self._tail:
            line = b"".join(self._tail)
            self._tail = []
            if not self._started:
                self._started = True
                if line.startswith(_BOM):
                    line = line[3:]
            if line:
                self._line(line, events)
        self._cr = False
        self._line(b"", events)
        return events

    def _dispatch(self, data: list[str]) -> ServerSentEvent:
        """The event a blank line ends: its data lines joined by newlines."""
        return ServerSentEvent(
            self._event or "message", data[0] if len(data) == 1 else "\n".join(data), self._id
        )

    def _line(self, line: bytes, events: list[ServerSentEvent]) -> None:
        if not line:
            data = self._data
            if data:
                events.append(self._dispatch(data))
                self._data = []
            self._event = None
            return
        if line[0] == 58:  # ':' starts a comment
            return
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif field == b"retry":
            if value.isdigit():  # the reconnection delay; anything else is ignored (WHATWG)
                self.retry = int(value)
        elif self._stray_size < _STRAY_LIMIT:
            self._stray_size += len(line)
            self.stray.append(line.decode("utf-8", "replace"))
