"""The access log's lines follow the answers of the event loop's turn (`DeferredLines`)."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator

import pytest

from tether.web import DeferredLines, defer_access_log


@pytest.fixture
def logger(request: pytest.FixtureRequest) -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    target = logging.StreamHandler(stream)
    target.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger(f"tests.web.deferred.{request.node.name}")
    log.propagate = False
    log.setLevel(logging.INFO)
    handler = DeferredLines(target)
    log.addHandler(handler)
    yield log, stream
    log.removeHandler(handler)


async def test_lines_logged_in_a_turn_are_written_after_it_in_order(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = logger
    log.info("one %d", 1)
    log.info("two")
    assert stream.getvalue() == ""  # the turn is not over
    await asyncio.sleep(0)
    assert stream.getvalue() == "INFO one 1\nINFO two\n"
    log.info("three")
    await asyncio.sleep(0)
    assert stream.getvalue().splitlines()[-1] == "INFO three"


def test_a_line_logged_outside_a_loop_is_written_at_once(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = logger
    log.info("now")
    assert stream.getvalue() == "INFO now\n"


async def test_pending_lines_are_written_when_the_handler_is_flushed(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = logger
    log.info("last words")
    # What logging.shutdown does at exit, were the loop gone before its next turn.
    for handler in log.handlers:
        handler.flush()
    assert stream.getvalue() == "INFO last words\n"


async def test_the_target_filters_still_apply(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = logger
    [handler] = [h for h in log.handlers if isinstance(h, DeferredLines)]
    handler.target.addFilter(lambda record: "secret" not in record.getMessage())
    log.info("a secret")
    log.info("public")
    await asyncio.sleep(0)
    assert stream.getvalue() == "INFO public\n"


def test_defer_access_log_wraps_uvicorns_handlers_once() -> None:
    access = logging.getLogger("uvicorn.access")
    saved = access.handlers[:]
    stream_handler = logging.StreamHandler(io.StringIO())
    access.handlers = [stream_handler]
    try:
        defer_access_log()
        defer_access_log()
        [handler] = access.handlers
        assert isinstance(handler, DeferredLines) and handler.target is stream_handler
    finally:
        access.handlers = saved
