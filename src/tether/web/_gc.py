"""Garbage collection settled for a process that serves: what start-up made frozen, and young
collections rarer.

A server answering a burst of requests allocates fast (each request, its response and the run
it starts), and the young generation's default threshold (700 allocations) has the collector
run every few requests; every tenth of those walks the middle generation too, and a full
collection walks every object alive (the app, its imported modules, every run in flight):
100-225 ms each during a burst of 500 starts. What exists once the app is built lives as long
as the process, so it is frozen (never walked again), and the young threshold is raised so that
collections come about seventy times less often. Cycles are still collected, later.

Only the serving entries (`tether serve`, its workers) call it: a program that serves an app
itself (`aserve` in its own event loop) keeps its own collector settings.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_gc"]

YOUNG_THRESHOLD = 50_000
"""Allocations (net of deallocations) between two collections of the young generation."""


def settle_gc() -> None:
    """Collect once, freeze what is left, and raise the young generation's threshold to
    `YOUNG_THRESHOLD` (never lower it); call it after the app is built, before serving."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
