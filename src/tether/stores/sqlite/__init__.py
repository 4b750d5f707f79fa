"""The SQLite stores, and the connection helper, migrations and transactions they share.

One module per store (`_messages`, `_runs`, `_workflows`, with the scope leases in `_leases`;
the reads whose SQL is the same in PostgreSQL, and the checks and encodings around each write,
are shared, in `tether.stores._sql` and its `_sql_runs` / `_sql_workflows`; the schema is
`tether.stores._ddl` in SQLite's words), over three pieces of plumbing:

- `connect(path)` opens a connection the way every store expects it (WAL, a busy timeout,
  foreign keys on, autocommit so that `transaction()` alone decides where a transaction begins).
- `SqliteMigrations(store)` is an append-only, ordered list of migration functions named
  `mNNN_what_changed`. `apply(conn)` runs the ones not yet recorded for that store in the
  `tether_migrations` table, each in its own transaction together with its record, so two
  processes opening the same file at once apply each migration exactly once. The stores' own
  list is `schema`: one initial schema, then one appended migration per change.
- `transaction(conn)` is `BEGIN IMMEDIATE … COMMIT` (or a savepoint when one is already open):
  taking the write lock up front means a read-then-write inside it can never be interleaved with
  another writer, which is what makes appends atomic across processes.

These three are SQLite's own; they are not part of `tether.stores`' backend-neutral surface.

A store takes its connection from the caller and migrates on construction; it closes only a
connection it opened itself (`SqliteMessageStore.open(path)` and the like).

```python
conn = connect(".tether/tether.db")
messages = SqliteMessageStore(conn)         # migrates the file (every store's tables)
workflows = SqliteWorkflowStore(conn)       # finds it migrated
```

The tables are the PostgreSQL stores' tables, under the same names (`tether_messages`,
`tether_runs`, `tether_workflow_runs`, ...). Adding a store of your own next to these: declare
`my_migrations = SqliteMigrations("mine")`, decorate one function per schema change with
`@my_migrations`, and call `my_migrations.apply(conn)` in the store's constructor. Never edit or
reorder a migration that has shipped; append a new one.
"""

from __future__ import annotations

from ._blobs import SqliteBlobStore
from ._connection import SqliteBacked, connect, connection_thread_lock, is_busy, transaction
from ._messages import SqliteMessageStore
from ._migrations import MIGRATIONS_TABLE, Migration, SqliteMigrations
from ._runs import SqliteRunStore
from ._schema import schema
from ._workflows import SqliteWorkflowStore

__all__ = [
    "MIGRATIONS_TABLE",
    "Migration",
    "SqliteBacked",
    "SqliteBlobStore",
    "SqliteMessageStore",
    "SqliteMigrations",
    "SqliteRunStore",
    "SqliteWorkflowStore",
    "connect",
    "connection_thread_lock",
    "is_busy",
    "schema",
    "transaction",
]
