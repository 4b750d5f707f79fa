"""Regenerate the byte-identity baseline under tests/baseline/. Never hand-edit those files: run
this, then review `git diff` like any other pinned contract."""

from pathlib import Path

from tether.testing.baseline import derive_baseline, derive_bodies

folder = Path(__file__).resolve().parents[1] / "tests/baseline"
target = folder / "prompt-equivalence.baseline.json"
target.write_text(derive_baseline(), encoding="utf-8")
print(f"wrote {target}")
for provider, body in derive_bodies().items():
    path = folder / f"prompt-equivalence.{provider}.body.json"
    path.write_bytes(body)
    print(f"wrote {path}")
