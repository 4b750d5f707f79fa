"""Start-up of the `tether` command without garbage collection.

Importing a program (the command line, typer and pydantic under it, a project's app and the
lab) makes many long-lived objects (modules, classes, functions) and next to no garbage: the
collections those allocations trigger find nothing to free, and each one walks every object
made so far again (a twentieth of `tether agent list` went to them). So the command holds
collection off while it starts (from `main()` until its root callback has parsed the global
options, and again while it imports the project), then freezes what start-up made
(`gc.freeze`: never walked again; it lives as long as the process anyway) and turns
collection back on, so what runs next (a server, an episode) collects as usual.

Only the command does this: `pause_collection()` is called by `tether.__main__.main`; in any
other process (a program that runs the typer app itself, the tests) these calls do nothing.
Collection that someone else turned off stays off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collection_paused", "pause_collection", "resume_collection"]

_command = False
"""Whether this process is the `tether` command (`pause_collection` was called)."""
_paused = False
"""Whether collection is off because this module turned it off."""


def pause_collection() -> None:
    """Garbage collection off until `resume_collection()` (if it is on now); marks this
    process as the command."""
    global _command, _paused
    _command = True
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collection() -> None:
    """What start-up made frozen and garbage collection on again, if `pause_collection`
    turned it off."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


@contextmanager
def collection_paused() -> Iterator[None]:
    """In the command: collection off inside the block, then what it made frozen and
    collection on again. Elsewhere, or when collection is off already: nothing."""
    global _paused
    if not _command or not gc.isenabled():
        yield
        return
    gc.disable()
    _paused = True
    try:
        yield
    finally:
        resume_collection()
