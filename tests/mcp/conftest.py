"""Fixtures of the MCP tests.

tests/mcp is deliberately not a package: a package here would be named `mcp` and shadow the
SDK the interop tests serve. Its helper modules (all named `mcp_*`) are imported by name, so
this directory goes on sys.path.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mcp_kit import Kit


@pytest.fixture
async def kit() -> AsyncIterator[Kit]:
    """Test servers and agents, all closed when the test ends."""
    k = Kit()
    try:
        yield k
    finally:
        await k.aclose()
