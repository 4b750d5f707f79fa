"""The server's access log: the token kept out of it, and its lines written after the answers
of the event loop's turn rather than before each (`defer_access_log`)."""

from __future__ import annotations

import asyncio
import logging
import re

__all__ = ["DeferredLines", "TokenScrubber", "defer_access_log", "scrub_access_log"]

_TOKEN = re.compile(r"([?&]token=)[^&#\s]*", re.IGNORECASE)


class TokenScrubber(logging.Filter):
    """Writes `token=…` for the value of every `token` query parameter in a log record (the
    printed login link, `/login?token=TOKEN`, would otherwise leave the token in the log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN.sub(r"\1…", a) if isinstance(a, str) else a for a in record.args
            )
        if isinstance(record.msg, str) and "token=" in record.msg.lower():
            record.msg = _TOKEN.sub(r"\1…", record.msg)
        return True


def scrub_access_log() -> None:
    """Put a `TokenScrubber` on uvicorn's access log (once; call it after uvicorn configured
    its logging, in the process that serves)."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, TokenScrubber) for f in logger.filters):
        logger.addFilter(TokenScrubber())


class DeferredLines(logging.Handler):
    """Hands the records it gets to `target` once the event loop's current turn is over, all
    of that turn's records at once (one write and flush for a stream); a record logged outside
    a running loop is handed over at once.

    uvicorn logs a request's access line as its answer starts: formatted, written and flushed
    there, the line held up every answer behind it (500 starts answered in one turn of the
    loop each waited for the access lines of the ones before it). Deferred, the answers leave
    first and the lines follow in the same order. Records still pending when the process
    exits are written by `logging.shutdown` (`flush`)."""

    def __init__(self, target: logging.Handler) -> None:
        super().__init__(target.level)
        self.target = target
        self._pending: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.target.handle(record)
            return
        if not self._pending:
            loop.call_soon(self.flush)
        self._pending.append(record)

    def flush(self) -> None:
        self.acquire()
        try:
            records, self._pending = self._pending, []
        finally:
            self.release()
        if not records:
            return
        target = self.target
        if not isinstance(target, logging.StreamHandler):
            for record in records:
                target.handle(record)
            return
        lines = []
        for record in records:
            if target.filter(record):
                try:
                    lines.append(target.format(record) + target.terminator)
                except Exception:
                    target.handleError(record)
        target.acquire()
        try:
            target.stream.write("".join(lines))
            target.flush()
        except Exception:
            target.handleError(records[-1])
        finally:
            target.release()

    def close(self) -> None:
        self.flush()
        super().close()


def defer_access_log() -> None:
    """Put uvicorn's access log handlers behind `DeferredLines` (once; call it after uvicorn
    configured its logging, in the process that serves)."""
    logger = logging.getLogger("uvicorn.access")
    logger.handlers = [
        h if isinstance(h, DeferredLines) else DeferredLines(h) for h in logger.handlers
    ]
