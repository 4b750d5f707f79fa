"""`SqliteBlobStore`: media bytes kept once per file, under their sha256 (`tether.blobs`)."""

from __future__ import annotations

import sqlite3
import time

from ...blobs import DEFAULT_BLOB_THRESHOLD, BlobInfo, blob_key, checked_blob
from ...errors import BlobNotFoundError
from .._blobs import NewBlobs, check_threshold
from ._connection import SqliteBacked, transaction
from ._schema import schema

__all__ = ["BlobWriting", "SqliteBlobStore", "insert_blobs"]


def insert_blobs(conn: sqlite3.Connection, blobs: NewBlobs) -> None:
    """Keep `blobs` in the caller's transaction; bytes already kept are not written again."""
    if blobs:
        now = time.time()
        conn.executemany(
            "INSERT INTO tether_blobs (sha256, media_type, size, data, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
            [(sha, media, len(raw), raw, now) for sha, (raw, media) in blobs.items()],
        )


class SqliteBlobStore(SqliteBacked):
    """A `BlobStore` in the `tether_blobs` table of a SQLite file (the table the message and
    run stores of the same file write their media to). Takes its connection from the caller
    and migrates on construction. `reads` counts the blobs read."""

    def __init__(self, conn: sqlite3.Connection, *, owns: bool = False) -> None:
        super().__init__(conn, owns=owns)
        self._sync(schema.apply)
        self.reads = 0
        """How many times bytes were read (`get`)."""

    async def put(self, data: bytes, media_type: str) -> str:
        sha = blob_key(data)

        def op(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                insert_blobs(conn, {sha: (bytes(data), media_type)})

        await self._run(op)
        return sha

    async def get(self, sha: str) -> bytes:
        def op(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute("SELECT data FROM tether_blobs WHERE sha256 = ?", (sha,)).fetchone()
            return None if row is None else bytes(row[0])

        self.reads += 1
        data = await self._run(op)
        if data is None:
            raise BlobNotFoundError(sha)
        return checked_blob(sha, data)

    async def info(self, sha: str) -> BlobInfo | None:
        def op(conn: sqlite3.Connection) -> tuple[str, int] | None:
            row = conn.execute(
                "SELECT media_type, size FROM tether_blobs WHERE sha256 = ?", (sha,)
            ).fetchone()
            return None if row is None else (str(row[0]), int(row[1]))

        row = await self._run(op)
        return None if row is None else BlobInfo(sha, row[1], row[0])


class BlobWriting(SqliteBacked):
    """What the message and run stores share: migrating on construction, `blob_threshold`, and
    `blobs` on the same connection."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        owns: bool = False,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        super().__init__(conn, owns=owns)
        self._sync(schema.apply)
        self.blob_threshold = check_threshold(blob_threshold)
        """Inline media over this many bytes is stored as a blob."""
        self.blobs = SqliteBlobStore(conn)
        """The blobs this store's records refer to (the same file's table)."""
