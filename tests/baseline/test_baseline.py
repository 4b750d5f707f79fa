from __future__ import annotations

import json
from pathlib import Path

from tether.testing.baseline import OPTIONAL_KEYS, derive_baseline

PINNED = Path(__file__).with_name("prompt-equivalence.baseline.json")


def test_a_minimal_config_produces_the_pinned_request_byte_for_byte() -> None:
    # If this fails because a default legitimately changed, run
    # `python scripts/regen_baseline.py` and review the diff; never hand-edit the file.
    assert derive_baseline().encode() == PINNED.read_bytes()


def test_no_optional_axis_key_appears_at_all() -> None:
    request = json.loads(derive_baseline())
    present = [key for key in OPTIONAL_KEYS if key in request]
    assert present == []
    assert sorted(request) == ["messages", "model", "system"]
