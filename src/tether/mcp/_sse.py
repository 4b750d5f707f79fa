"""An incremental Server-Sent Events parser: bytes in, (event, data, id) out.

Servers differ in ways the spec allows: CRLF, LF or CR line ends (even split across chunks), an
opening event whose data is empty (a resumability primer), comments, and multi-line data.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SseEvent", "SseParser"]


@dataclass(slots=True, frozen=True)
class SseEvent:
    event: str
    data: str
    id: str | None


class SseParser:
    """Feed decoded text; collect complete events. One instance per response body."""

    __slots__ = ("_buffer", "_data", "_event", "_id", "_pending_cr", "retry")

    def __init__(self) -> None:
        self.retry: int | None = None
        """The last `retry:` the server sent (milliseconds before reconnecting), if any."""
        self._buffer = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, text: str) -> list[SseEvent]:
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF that was split across chunks
        self._pending_cr = False
        buffer = self._buffer + text
        events: list[SseEvent] = []
        start = 0
        n = len(buffer)
        i = 0
        while i < n:
            ch = buffer[i]
            if ch == "\r" or ch == "\n":
                line = buffer[start:i]
                if ch == "\r":
                    if i + 1 < n:
                        if buffer[i + 1] == "\n":
                            i += 1
                    else:
                        self._pending_cr = True
                event = self._line(line)
                if event is not None:
                    events.append(event)
                start = i + 1
            i += 1
        self._buffer = buffer[start:]
        return events

    def _line(self, line: str) -> SseEvent | None:
        if line == "":
            if not self._data:  # no data field: nothing to dispatch (the spec's rule)
                self._event = ""
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data), self._id)
            self._data = []
            self._event = ""
            return event
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        elif field == "retry" and value.isdigit():
            self.retry = int(value)
        return None
