"""PostgreSQL storage: the three tether stores on a server that several processes or machines share.

Needs the `postgres` extra (psycopg 3): ``pip install 'tether[postgres]'``.

`PostgresMessageStore`, `PostgresRunStore` and `PostgresWorkflowStore` pass the same contract suites
as the in-memory and SQLite stores. Each one takes a URL (the store makes a connection pool of its
own, opens it on first use and closes it in `aclose()`), a `psycopg_pool.AsyncConnectionPool`
(`connection_pool(url)` makes one set up as the stores expect; with `owns=True` the last owning
store closes it), or a psycopg `AsyncConnection` of the caller's (it stays the caller's):

```python
messages = PostgresMessageStore("postgresql://tether@db.internal/tether?pool_max_size=20")
await messages.append("notes", [{"role": "user", "content": [...]}])
```

One module per store (`_messages`, `_runs`, `_workflows`, with the scope leases in `_leases`)
over the shared plumbing (`_connection`, `_backed`, `_migrations`). The reads whose SQL is the
same in SQLite, and the checks and encodings around each write, are written once, for both, in
`tether.stores._sql` and its `_sql_runs` / `_sql_workflows` (over a `Dialect` and a hook per
statement); the statements of the writes, with their upserts, `RETURNING` and notices, are this
package's, and the schema is `tether.stores._ddl` in PostgreSQL's words. How it is built:

- **A connection pool.** Each operation takes a connection from the pool for as long as it runs,
  so concurrent requests of one process do not queue on one socket. `pool_min_size` (default 1)
  and `pool_max_size` (default 10) in the URL's query size it; libpq never sees them. A runtime
  gives its three stores one pool. After the server dropped the connections, the call that met a
  dead one fails and the next gets a live one. On a caller's single connection, the stores'
  operations take turns under one `asyncio.Lock` per connection, so their transactions never
  interleave.
- **Ordered named migrations.** `PostgresMigrations(store)` is an append-only list of async
  functions named `mNNN_what_changed`, recorded per store in `tether_migrations`. They run on
  first use in one transaction under a transaction-scoped advisory lock, so processes that start
  together apply each migration exactly once. The stores' own list is `schema`: one initial
  schema, then one appended migration per change.
- **Message and event appends are one statement.** The scope (or run) row carries the length.
  An append bumps it with `INSERT … ON CONFLICT DO UPDATE … RETURNING` (or `UPDATE … RETURNING`),
  which row-locks it until commit, and inserts the new records numbered after it in the same
  statement. That costs the same at record 10 and record 10,000, and writers on other
  connections queue on the row lock instead of losing or duplicating records; `(scope, seq)` is
  the primary key as a backstop. The pool's connections run READ COMMITTED whatever the
  server's default, which that queue relies on; a caller's connection keeps the caller's
  settings. A workflow step append locks its run row the same way, then numbers the step
  through the `(run_id, seq)` index.
- **JSON is stored as text**, not `jsonb`: what is read back is exactly the text that was
  written (key order included), and a damaged value is reported as `StoreCorruptError` with the
  record left in place, as in SQLite.
- Tables are prefixed `tether_`. To keep them in a schema of their own, name it in the URL:
  ``postgresql://host/db?options=-csearch_path%3Dtether``.
"""

from __future__ import annotations

from ... import _extras

try:
    import psycopg  # noqa: F401 - checked first, so a missing extra says what to install
    import psycopg_pool  # noqa: F401
except ImportError as exc:  # pragma: no cover - only without the extra
    raise _extras.missing_extra(
        "tether's PostgreSQL stores need psycopg 3 and psycopg_pool", "postgres"
    ) from exc

from ._backed import PostgresBacked
from ._blobs import PostgresBlobStore
from ._connection import (
    POOL_MAX_SIZE,
    POOL_MIN_SIZE,
    Connection,
    Pool,
    connection_async_lock,
    connection_pool,
    pool_settings,
)
from ._messages import PostgresMessageStore
from ._migrations import MIGRATIONS_TABLE, PostgresMigration, PostgresMigrations
from ._runs import PostgresRunStore
from ._schema import schema
from ._workflows import PostgresWorkflowStore

__all__ = [
    "MIGRATIONS_TABLE",
    "POOL_MAX_SIZE",
    "POOL_MIN_SIZE",
    "Connection",
    "Pool",
    "PostgresBacked",
    "PostgresBlobStore",
    "PostgresMessageStore",
    "PostgresMigration",
    "PostgresMigrations",
    "PostgresRunStore",
    "PostgresWorkflowStore",
    "connection_async_lock",
    "connection_pool",
    "pool_settings",
    "schema",
]
