"""Regenerate tests/baseline/prompt-equivalence.baseline.json. Never hand-edit that file:
run this, then review `git diff` like any other pinned contract."""

from pathlib import Path

from tether.testing.baseline import derive_baseline

target = Path(__file__).resolve().parents[1] / "tests/baseline/prompt-equivalence.baseline.json"
target.write_text(derive_baseline(), encoding="utf-8")
print(f"wrote {target}")
