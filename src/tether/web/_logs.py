"""The token kept out of the server's access log."""

from __future__ import annotations

import logging
import re

__all__ = ["TokenScrubber", "scrub_access_log"]

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
