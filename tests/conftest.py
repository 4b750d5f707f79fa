"""Shared test setup: no real provider keys reach a test, and fixtures are found where they lie."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("TETHER_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared")
"""The shared material beside the checkout (``../shared``); TETHER_SHARED_DIR points elsewhere."""
FIXTURES = SHARED / "fixtures" / "providers"

_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real provider: keys are removed from the environment."""
    for key in _KEYS:
        monkeypatch.delenv(key, raising=False)


def provider_fixtures() -> Path:
    """The recorded wire data; tests that need it skip, saying why, where ../shared is absent."""
    if not FIXTURES.is_dir():
        pytest.skip(f"provider wire fixtures not found at {FIXTURES} (a clone without ../shared)")
    return FIXTURES
