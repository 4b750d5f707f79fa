"""WAL checkpoints of an SQLite file, from a thread of their own.

In WAL mode a commit appends to the `-wal` file; a *checkpoint* copies those pages back into the
database file and syncs it. By default SQLite does that inside whichever commit takes the WAL
past 1,000 pages: every few hundred writes one commit takes several milliseconds instead of
tens of microseconds, and since the stores write from the event loop, every run in the process
waits for it (a deterministic workload hits it on the same turn each time).

A connection the stores own turns that off (`PRAGMA wal_autocheckpoint = 0`) and a
`Checkpointer` does it instead: a daemon thread with its own connection runs a PASSIVE
checkpoint (it takes no lock a writer needs and gives up on pages a reader still uses) every
`every` seconds when something was written since the last one. sqlite3 releases the GIL while
SQLite works, so the copy and the sync happen beside the event loop, not in it. The last
connection to close checkpoints what is left, as SQLite always does.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

__all__ = ["Checkpointer"]

logger = logging.getLogger("tether.stores")


class Checkpointer:
    """Checkpoints the WAL of the database at `path` every `every` seconds while writes come.

    `wrote()` marks that something was written (cheap: it sets a flag); `stop()` ends the
    thread and waits for it.
    """

    def __init__(self, path: str, *, every: float = 1.0) -> None:
        self.path = path
        self.every = every
        self.runs = 0
        """Checkpoints done (for tests and diagnostics)."""
        self._dirty = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="tether-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def wrote(self) -> None:
        self._dirty = True

    def _loop(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while not self._stop.wait(self.every):
                if not self._dirty:
                    continue
                self._dirty = False
                try:
                    if conn is None:
                        conn = sqlite3.connect(self.path, isolation_level=None)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.runs += 1
                except sqlite3.Error:
                    # Another process's checkpoint, a file being replaced: the next round (or
                    # the last connection's close) does it.
                    logger.debug("WAL checkpoint of %s failed", self.path, exc_info=True)
        finally:
            if conn is not None:
                conn.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
