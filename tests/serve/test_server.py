"""The serving entries settle the garbage collector before they serve (`tether.web.settle_gc`):
what start-up made is frozen and young collections are rarer. A program that serves an app in
its own event loop (`aserve`) keeps its collector as it was."""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from tether.lab import Runtime
from tether.serve import _server
from tether.serve._server import ServeOptions, aserve, serve_with, worker_app
from tether.web import DeferredLines, settle_gc
from tether.web._gc import YOUNG_THRESHOLD


@pytest.fixture
def collector() -> Iterator[list[tuple[int, int]]]:
    """The collector's state restored after the test; the list gets (young threshold, frozen
    count) as a server would have begun to serve."""
    threshold = gc.get_threshold()
    gc.unfreeze()
    seen: list[tuple[int, int]] = []
    yield seen
    gc.unfreeze()
    gc.set_threshold(*threshold)


def note(seen: list[tuple[int, int]]) -> None:
    seen.append((gc.get_threshold()[0], gc.get_freeze_count()))


def test_settle_gc_freezes_and_never_lowers_the_threshold(collector: object) -> None:
    gc.set_threshold(700, 10, 10)
    settle_gc()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() > 0
    gc.set_threshold(YOUNG_THRESHOLD * 2, 10, 10)
    settle_gc()
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD * 2


def test_serve_settles_the_collector_before_serving(
    collector: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.set_threshold(700, 10, 10)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, *a, **k: note(collector))
    runtime = Runtime(store="memory", version=False)
    serve_with(runtime, ServeOptions(port=0))
    [(young, frozen)] = collector
    assert young == YOUNG_THRESHOLD and frozen > 0


def test_a_worker_settles_the_collector_once_its_app_is_built(
    collector: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gc.set_threshold(700, 10, 10)
    (tmp_path / "settled_app.py").write_text(
        "from tether.lab import Runtime\nruntime = Runtime(store='memory', version=False)\n"
    )
    (tmp_path / "tether.toml").write_text('runtime = "settled_app:runtime"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = {"config": str(tmp_path / "tether.toml"), "store": None, "options": {"port": 0}}
    monkeypatch.setenv(_server._WORKER_ENV, json.dumps(spec))
    worker_app()
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD and gc.get_freeze_count() > 0


async def test_aserve_leaves_the_collector_alone(
    collector: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.set_threshold(700, 10, 10)

    async def serve(self: uvicorn.Server, *args: object) -> None:
        note(collector)

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    runtime = Runtime(store="memory", version=False)
    await aserve(runtime, port=0)
    assert collector == [(700, 0)]


def test_serve_writes_the_access_log_after_each_turn_of_the_loop(
    collector: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[logging.Handler]] = []
    monkeypatch.setattr(
        uvicorn.Server,
        "run",
        lambda self, *a, **k: seen.append(logging.getLogger("uvicorn.access").handlers[:]),
    )
    serve_with(Runtime(store="memory", version=False), ServeOptions(port=0))
    [handlers] = seen
    assert handlers and all(isinstance(h, DeferredLines) for h in handlers)
