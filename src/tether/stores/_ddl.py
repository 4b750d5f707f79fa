"""The schema of both SQL backends, written once: each migration's statements, for the few words
SQLite and PostgreSQL spell differently (`Words`).

The tables, their columns and their indexes are the same in both. What a backend adds is its
own tool for run search — SQLite's FTS5 table, PostgreSQL's generated `tsvector` column and its
GIN index — given as its `Words` or as statements of its own in the backend's `_schema` module,
which registers this list under the same names (`tether.stores.sqlite._schema`,
`tether.stores.postgres._schema`). Append only: a migration that shipped is never edited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["MIGRATIONS", "POSTGRES", "SQLITE", "Words"]


@dataclass(frozen=True, slots=True)
class Words:
    """The words of a dialect's DDL."""

    real: str
    """A Unix time or an amount."""
    count: str
    """A count or a sequence number that may grow large."""
    blob: str
    """Bytes."""
    ident: str
    """The column numbering a table's rows in insertion order ("": SQLite's rowid does)."""
    tie: str
    """What an index by time adds to order rows of equal times (the `ident` column)."""
    keyed: str
    """What ends a table whose primary key is its whole use (SQLite's `WITHOUT ROWID`)."""
    run_search: str
    """The column of `tether_runs` that run search reads ("": the backend indexes it apart)."""


SQLITE: Final = Words("REAL", "INTEGER", "BLOB", "", "", " WITHOUT ROWID", "")
POSTGRES: Final = Words(
    real="DOUBLE PRECISION",
    count="BIGINT",
    blob="BYTEA",
    ident="id BIGINT GENERATED ALWAYS AS IDENTITY",
    tie=", id",
    keyed="",
    run_search="search tsvector GENERATED ALWAYS AS"
    " (to_tsvector('simple', input_text || ' ' || output_text)) STORED",
)


def _table(name: str, *columns: str, end: str = "") -> str:
    """`CREATE TABLE name (...)` of the columns given (an empty one left out)."""
    return f"CREATE TABLE {name} (" + ",".join(f" {c}" for c in columns if c) + f"){end}"


def _add(table: str, *columns: str) -> list[str]:
    return [f"ALTER TABLE {table} ADD COLUMN {column}" for column in columns]


def _when_set(table: str, column: str) -> str:
    """An index of the rows where `column` is set (a sweep reads a range, not the table)."""
    return f"CREATE INDEX {table}_{column} ON {table} ({column}) WHERE {column} IS NOT NULL"


def _initial_schema(w: Words) -> list[str]:
    r, n = w.real, w.count
    started = f"started_at{w.tie}"
    return [
        # -- messages: a scope row carries its length, so an append bumps one row.
        _table(
            "tether_message_scopes",
            w.ident,
            "scope TEXT PRIMARY KEY",
            f"length {n} NOT NULL DEFAULT 0",
            "title TEXT",
            f"created_at {r} NOT NULL",
            f"updated_at {r} NOT NULL",
        ),
        f"CREATE INDEX tether_message_scopes_updated ON tether_message_scopes (updated_at{w.tie})",
        _table(
            "tether_messages",
            "scope TEXT NOT NULL REFERENCES tether_message_scopes (scope) ON DELETE CASCADE",
            f"seq {n} NOT NULL",
            "record TEXT NOT NULL",
            "PRIMARY KEY (scope, seq)",
            end=w.keyed,
        ),
        # -- leases: which episode may write a scope now (`ScopeLeases`).
        _table(
            "tether_scope_leases",
            "scope TEXT PRIMARY KEY",
            "owner TEXT NOT NULL",
            f"expires_at {r} NOT NULL",
            end=w.keyed,
        ),
        # -- runs: one row per run, one per event.
        _table(
            "tether_runs",
            w.ident,
            "run_id TEXT PRIMARY KEY",
            "kind TEXT NOT NULL",
            "name TEXT NOT NULL",
            "status TEXT NOT NULL",
            f"started_at {r} NOT NULL",
            f"ended_at {r}",
            "tags TEXT NOT NULL",
            "memory_scope TEXT",
            "workflow_run_id TEXT",
            "step_id TEXT",
            "error TEXT",
            "meta TEXT NOT NULL",
            f"event_count {n} NOT NULL DEFAULT 0",
            "usage TEXT NOT NULL DEFAULT '{}'",
            f"cost_usd {r}",
            "input_text TEXT NOT NULL DEFAULT ''",
            "output_text TEXT NOT NULL DEFAULT ''",
            w.run_search,
            f"lease_expires_at {r}",
            "parent_run_id TEXT",
            "parent_tool_call_id TEXT",
            "traceback TEXT",
        ),
        # A filtered page of a large store is an index range, not a scan: the run list shows
        # root runs (no workflow run) newest first, a timeline the runs one episode started.
        *(
            f"CREATE INDEX tether_runs_{index} ON tether_runs ({columns})"
            for index, columns in (
                ("started", started),
                ("scope", "memory_scope"),
                ("status_started", f"status, {started}"),
                ("name_started", f"name, {started}"),
                ("workflow_started", f"workflow_run_id, {started}"),
                ("parent_started", f"parent_run_id, {started}"),
            )
        ),
        _table(
            "tether_run_events",
            "run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE",
            f"seq {n} NOT NULL",
            "type TEXT NOT NULL",
            f"at {r} NOT NULL",
            "data TEXT NOT NULL",
            "PRIMARY KEY (run_id, seq)",
            end=w.keyed,
        ),
        _table(
            "tether_run_tags",
            "tag TEXT NOT NULL",
            "run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE",
            "PRIMARY KEY (tag, run_id)",
            end=w.keyed,
        ),
        # -- workflows: one row per run, one per journaled step.
        _table(
            "tether_workflow_runs",
            w.ident and f"{w.ident} UNIQUE",
            "run_id TEXT PRIMARY KEY",
            "workflow_id TEXT NOT NULL",
            "status TEXT NOT NULL",
            "input TEXT NOT NULL",
            "output TEXT",
            "error TEXT",
            "parent_run_id TEXT",
            "root_run_id TEXT NOT NULL",
            "parent_step_id TEXT",
            "attempts INTEGER NOT NULL DEFAULT 1",
            f"created_at {r} NOT NULL",
            f"updated_at {r} NOT NULL",
            "lease_owner TEXT",
            f"lease_expires_at {r}",
        ),
        "CREATE INDEX tether_workflow_runs_by_workflow ON tether_workflow_runs (workflow_id)",
        "CREATE INDEX tether_workflow_runs_by_root ON tether_workflow_runs (root_run_id)",
        _table(
            "tether_workflow_steps",
            "run_id TEXT NOT NULL REFERENCES tether_workflow_runs (run_id)",
            "step_id TEXT NOT NULL",
            "seq INTEGER NOT NULL",
            "name TEXT NOT NULL",
            "output TEXT NOT NULL",
            f"created_at {r} NOT NULL",
            "PRIMARY KEY (run_id, step_id)",
            "UNIQUE (run_id, seq)",
        ),
    ]


def _run_lease_tokens(w: Words) -> list[str]:
    # The token of the lease a run's writer holds: its writes are refused once another writer
    # took the run over (`RunStore` fencing).
    return _add("tether_runs", "lease_owner TEXT")


def _workflow_waits(w: Words) -> list[str]:
    # What a waiting workflow run waits for (`ctx.wait_for`), and when that wait times out.
    table = "tether_workflow_runs"
    return [*_add(table, "wait TEXT", f"wait_deadline {w.real}"), _when_set(table, "wait_deadline")]


def _run_event_pieces(w: Words) -> list[str]:
    # An event whose JSON text is longer than `run_store.PIECE` is stored here in pieces (its
    # row's `data` is empty), so a stream passes it on a piece at a time (`EventPieces`).
    return [
        _table(
            "tether_run_event_pieces",
            "run_id TEXT NOT NULL REFERENCES tether_runs (run_id) ON DELETE CASCADE",
            f"seq {w.count} NOT NULL",
            "piece INTEGER NOT NULL",
            "text TEXT NOT NULL",
            "PRIMARY KEY (run_id, seq, piece)",
            end=w.keyed,
        )
    ]


def _blobs(w: Words) -> list[str]:
    # Media bytes kept once, under their sha256 (`tether.blobs`): records and run events hold
    # a reference. Nothing deletes a row (a blob may be referred to from any scope or run).
    return [
        _table(
            "tether_blobs",
            "sha256 TEXT PRIMARY KEY",
            "media_type TEXT NOT NULL",
            f"size {w.count} NOT NULL",
            f"data {w.blob} NOT NULL",
            f"created_at {w.real} NOT NULL",
            end=w.keyed,
        )
    ]


def _paused_runs(w: Words) -> list[str]:
    # A paused run's pending calls (listed with the run), the turn it resumes from (read only
    # by the resumer) and when its calls expire.
    columns = ("pending TEXT", "paused_turn TEXT", f"pending_deadline {w.real}")
    return [*_add("tether_runs", *columns), _when_set("tether_runs", "pending_deadline")]


def _runs_indexed_as_they_end(w: Words) -> list[str]:
    # SQLite's run search index takes a run's text once, as it ends (its own `unindexed`
    # column), and then (m008) ended runs in batches; PostgreSQL searches a generated column,
    # always up to date: nothing shared.
    return []


def _workflow_index_partial(w: Words) -> list[str]:
    # Most runs belong to no workflow run: the index of a workflow run's runs lists only those
    # that do (a query by workflow_run_id = ... reads it all the same), so starting any other
    # run writes one index page less. The root-run list reads the parent index, as before.
    return [
        "DROP INDEX tether_runs_workflow_started",
        "CREATE INDEX tether_runs_workflow_started ON tether_runs"
        f" (workflow_run_id, started_at{w.tie}) WHERE workflow_run_id IS NOT NULL",
    ]


def _scope_versions(w: Words) -> list[str]:
    # A scope's version (`ScopeVersions`): one more with every append or replace of its
    # records, so that a writer that knows the version it left can tell that nobody wrote the
    # scope since. A new scope row starts at a random number (a scope deleted and written
    # again never comes back to a version it had); the rows already stored start at 0.
    return _add("tether_message_scopes", f"version {w.count} NOT NULL DEFAULT 0")


MIGRATIONS: Final[tuple[tuple[str, Callable[[Words], list[str]]], ...]] = (
    ("m001_initial_schema", _initial_schema),
    ("m002_run_lease_tokens", _run_lease_tokens),
    ("m003_workflow_waits", _workflow_waits),
    ("m004_run_event_pieces", _run_event_pieces),
    ("m005_blobs", _blobs),
    ("m006_paused_runs", _paused_runs),
    ("m007_runs_indexed_as_they_end", _runs_indexed_as_they_end),
    ("m008_runs_indexed_in_batches", _runs_indexed_as_they_end),
    ("m009_workflow_index_partial", _workflow_index_partial),
    ("m010_scope_versions", _scope_versions),
)
"""Each migration's name, and its statements for a dialect. Append only."""
