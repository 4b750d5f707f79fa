"""`PostgresBlobStore`: media bytes kept once per database, under their sha256
(`tether.blobs`)."""

from __future__ import annotations

import time

from ...blobs import DEFAULT_BLOB_THRESHOLD, BlobInfo, blob_key, checked_blob
from ...errors import BlobNotFoundError
from .._blobs import NewBlobs, check_threshold
from ._backed import PostgresBacked
from ._connection import Connection, Pool, execute, fetch_one

__all__ = ["BlobWriting", "PostgresBlobStore", "insert_blobs"]

_INSERT = (
    "INSERT INTO tether_blobs (sha256, media_type, size, data, created_at)"
    " SELECT b.sha256, b.media_type, b.size, b.data, %(now)s"
    " FROM unnest(%(shas)s::text[], %(types)s::text[], %(sizes)s::bigint[], %(datas)s::bytea[])"
    " AS b (sha256, media_type, size, data)"
    " ON CONFLICT (sha256) DO NOTHING"
)


async def insert_blobs(conn: Connection, blobs: NewBlobs) -> None:
    """Keep `blobs` in the caller's transaction (one statement); bytes already kept are not
    written again."""
    if blobs:
        await execute(
            conn,
            _INSERT,
            {
                "now": time.time(),
                "shas": list(blobs),
                "types": [media for _, media in blobs.values()],
                "sizes": [len(raw) for raw, _ in blobs.values()],
                "datas": [raw for raw, _ in blobs.values()],
            },
        )


class PostgresBlobStore(PostgresBacked):
    """A `BlobStore` in the `tether_blobs` table (the table the message and run stores of the
    same database write their media to). `reads` counts the blobs read."""

    _kind = "blob store"

    def __init__(self, conn: Connection | Pool | str, *, owns: bool | None = None) -> None:
        super().__init__(conn, owns=owns)
        self.reads = 0
        """How many times bytes were read (`get`)."""

    async def put(self, data: bytes, media_type: str) -> str:
        sha = blob_key(data)
        async with self._session() as conn:
            await insert_blobs(conn, {sha: (bytes(data), media_type)})
        return sha

    async def get(self, sha: str) -> bytes:
        self.reads += 1
        async with self._session() as conn:
            row = await fetch_one(conn, "SELECT data FROM tether_blobs WHERE sha256 = %s", (sha,))
        if row is None:
            raise BlobNotFoundError(sha)
        return checked_blob(sha, bytes(row[0]))

    async def info(self, sha: str) -> BlobInfo | None:
        async with self._session() as conn:
            row = await fetch_one(
                conn, "SELECT media_type, size FROM tether_blobs WHERE sha256 = %s", (sha,)
            )
        return None if row is None else BlobInfo(sha, int(row[1]), str(row[0]))


class BlobWriting(PostgresBacked):
    """What the message and run stores add: `blob_threshold`, and `blobs` over the same pool or
    connection."""

    def __init__(
        self,
        conn: Connection | Pool | str,
        *,
        owns: bool | None = None,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        super().__init__(conn, owns=owns)
        self.blob_threshold = check_threshold(blob_threshold)
        """Inline media over this many bytes is stored as a blob."""
        shared = self._pool if self._pool is not None else self._conn
        assert shared is not None
        self.blobs = PostgresBlobStore(shared, owns=False)
        """The blobs this store's records refer to (the same database's table)."""
