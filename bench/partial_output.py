"""Partial structured output per chunk, against the floor of a plain join plus one parse.

    .venv/bin/python bench/partial_output.py [REPEATS]

A 100 KB structured answer (an object holding a list of records) arrives in 10-byte chunks;
each chunk goes through the turn's text buffer and `PartialOutput.feed`, then the stream's end
flushes. The floor is what any consumer pays at least: joining the chunks and parsing the whole
answer once. Target (issue 23): at most 3x the floor (every chunk re-parsed the whole answer
before: about 10,000 parses of 50 KB on average). Medians of REPEATS runs (default 15).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from pydantic_core import from_json

from tether._partial import PartialOutput
from tether._text import TextBuffer

ANSWER = json.dumps(
    {"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"], "ok": True} for i in range(1600)]}
)
CHUNKS = [ANSWER[i : i + 10] for i in range(0, len(ANSWER), 10)]


def floor() -> float:
    start = time.perf_counter()
    text = "".join(CHUNKS)
    from_json(text, allow_partial="trailing-strings")
    return time.perf_counter() - start


def text_only() -> float:
    """The turn's own cost of the chunks (their text events), without partial output."""
    start = time.perf_counter()
    buffer = TextBuffer()
    for chunk in CHUNKS:
        buffer.add(chunk)
    buffer.value()
    return time.perf_counter() - start


def streamed() -> tuple[float, int]:
    start = time.perf_counter()
    buffer = TextBuffer()
    partial = PartialOutput()
    events = 0
    for chunk in CHUNKS:
        buffer.add(chunk)
        # As the turn loop does: a chunk past the due length only is handed to feed().
        if buffer.size >= getattr(partial, "next", 0) and partial.feed(buffer) is not None:
            events += 1
    flush = getattr(partial, "flush", None)  # (before issue 23 every chunk was parsed)
    if flush is not None and flush(buffer) is not None:
        events += 1
    elapsed = time.perf_counter() - start
    assert partial.last == json.loads(ANSWER)
    return elapsed, events


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    floors, texts, runs, counts = [], [], [], []
    for _ in range(repeats):
        floors.append(floor())
        texts.append(text_only())
        elapsed, events = streamed()
        runs.append(elapsed)
        counts.append(events)
    # What partial output adds to the turn's text events, per run, against the floor.
    ratios = sorted((r - t) / f for r, t, f in zip(runs, texts, floors, strict=True))
    print(f"answer {len(ANSWER):,} chars in {len(CHUNKS):,} chunks of 10")
    print(f"floor (join + one parse): median {statistics.median(floors) * 1000:.2f} ms")
    print(f"text events alone: median {statistics.median(texts) * 1000:.2f} ms")
    print(f"text events + partial output: median {statistics.median(runs) * 1000:.2f} ms")
    print(f"partial_output events: {statistics.median(counts):.0f}")
    print(
        f"partial output's cost / floor: median {statistics.median(ratios):.2f} "
        f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}; target <= 3)"
    )


if __name__ == "__main__":
    main()
