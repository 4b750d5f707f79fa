"""The byte-identity baseline (seed 000): leaving every optional axis out produces the pinned
request byte for byte, the ChatRequest and each provider's wire body alike, key order included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.testing.baseline import (
    OPTIONAL_KEYS,
    PROVIDERS,
    derive_baseline,
    derive_bodies,
    derive_request,
)

FOLDER = Path(__file__).parent
PINNED = FOLDER / "prompt-equivalence.baseline.json"


def test_a_minimal_config_produces_the_pinned_request_byte_for_byte() -> None:
    # If this fails because a default legitimately changed, run
    # `python scripts/regen_baseline.py` and review the diff; never hand-edit the file.
    assert derive_baseline().encode() == PINNED.read_bytes()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_provider_sends_the_pinned_body_byte_for_byte(provider: str) -> None:
    pinned = (FOLDER / f"prompt-equivalence.{provider}.body.json").read_bytes()
    assert derive_bodies()[provider] == pinned


def test_the_pin_keeps_key_order() -> None:
    # A key-sorted copy would hide a reordering; the pinned text is in the written order.
    assert list(json.loads(PINNED.read_text())) == ["model", "system", "messages"]
    assert list(derive_request()) == ["model", "system", "messages"]
    anthropic = json.loads((FOLDER / "prompt-equivalence.anthropic.body.json").read_bytes())
    assert list(anthropic) == ["model", "max_tokens", "system", "messages", "stream"]


def test_no_optional_axis_key_appears_at_all() -> None:
    request = derive_request()
    assert [key for key in OPTIONAL_KEYS if key in request] == []
