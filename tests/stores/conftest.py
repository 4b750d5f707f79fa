"""Store test setup: the PostgreSQL server the `postgres` backends use is stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.postgres_server import shutdown


@pytest.fixture(scope="session", autouse=True)
def _stop_the_test_postgres_server() -> Iterator[None]:
    """Started on first use by `postgres_url()`; stopped (if it was) when the session ends."""
    yield
    shutdown()
