"""A real PostgreSQL server for the tests that need one: one throwaway cluster per session.

`postgres_url()` returns the URL of a fresh, empty schema on it (the URL sets `search_path`), so
each test gets its own tables without a new database or cluster. The server is either

- the one `TETHER_TEST_POSTGRES_URL` names (tests create schemas `tether_test_*` in it and drop
  them at the end), or
- a cluster this module starts on first use with the Debian server binaries
  (`/usr/lib/postgresql/*/bin/initdb`, `pg_ctl`) in a temporary directory: a unix socket only
  (no TCP port to collide on), trust authentication, fsync off. As root it runs as the
  `postgres` user (initdb refuses root), else as `nobody`.

Where neither is available the tests skip, saying how to get a server. `shutdown()` stops the
cluster (and drops the schemas); the session fixtures of the suites that use it call it, and
an atexit hook covers a run that never reached them.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

ENV = "TETHER_TEST_POSTGRES_URL"
HOW_TO_GET_ONE = (
    "PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/initdb): install them with "
    f"`apt-get install postgresql`, or set {ENV} to a server the tests may create schemas in"
)


class PostgresServer:
    """A running server: its base URL, and the cluster directory when this module made it."""

    def __init__(self, url: str, *, cluster: Path | None = None, pg_ctl: list[str] | None = None):
        self.url = url
        self._cluster = cluster
        self._pg_ctl = pg_ctl
        self._schemas: list[str] = []
        self._admin: psycopg.Connection[tuple[object, ...]] | None = None

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """A synchronous autocommit connection to the base URL, for setup and inspection."""
        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.url, autocommit=True)
        return self._admin

    def fresh_url(self) -> str:
        """The URL of a new empty schema (its `search_path` set through `options`)."""
        schema = f"tether_test_{uuid.uuid4().hex[:12]}"
        self.admin().execute(f'CREATE SCHEMA "{schema}"')
        self._schemas.append(schema)
        return with_search_path(self.url, schema)

    def stop(self) -> None:
        if self._admin is not None:
            if self._cluster is None:
                for schema in self._schemas:
                    self._admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            self._admin.close()
            self._admin = None
        self._schemas.clear()
        if self._cluster is not None and self._pg_ctl is not None:
            subprocess.run(
                [*self._pg_ctl, "stop", "-D", str(self._cluster / "data"), "-m", "immediate"],
                capture_output=True,
                check=False,
            )
            shutil.rmtree(self._cluster, ignore_errors=True)
            self._cluster = None


def with_search_path(url: str, schema: str) -> str:
    """`url` with `options=-csearch_path=<schema>` added to its query."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema}', safe='')}"


def _server_bin() -> Path | None:
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")

    def version(path: str) -> tuple[int, ...]:
        major = Path(path).parent.parent.name
        return tuple(int(p) for p in major.split(".") if p.isdigit())

    return Path(max(found, key=version)).parent if found else None


def _start_cluster(bin_dir: Path) -> PostgresServer:
    cluster = Path(tempfile.mkdtemp(prefix="tether-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        for name in ("postgres", "nobody"):
            try:
                user = pwd.getpwnam(name)
            except KeyError:
                continue
            os.chown(cluster, user.pw_uid, user.pw_gid)
            prefix = ["runuser", "-u", name, "--"]
            break
        else:
            shutil.rmtree(cluster, ignore_errors=True)
            pytest.skip("running as root with no 'postgres' or 'nobody' user to run initdb as")
    data, log = cluster / "data", cluster / "server.log"
    pg_ctl = [*prefix, str(bin_dir / "pg_ctl")]
    settings = (
        f"-c listen_addresses='' -c unix_socket_directories='{cluster}' -c fsync=off"
        " -c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
    )
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "tether", "--auth=trust"]
    steps = [
        [*prefix, *initdb, "-E", "UTF8", "--no-locale", "--no-sync"],
        [*pg_ctl, "start", "-w", "-D", str(data), "-l", str(log), "-o", settings],
    ]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            server_log = log.read_text() if log.exists() else ""
            subprocess.run([*pg_ctl, "stop", "-D", str(data), "-m", "immediate"], check=False)
            shutil.rmtree(cluster, ignore_errors=True)
            raise RuntimeError(
                f"starting the test PostgreSQL cluster failed: {' '.join(cmd)}\n"
                f"{done.stdout}{done.stderr}{server_log}"
            )
    url = f"postgresql://tether@/postgres?host={quote(str(cluster), safe='')}"
    return PostgresServer(url, cluster=cluster, pg_ctl=pg_ctl)


_server: PostgresServer | None = None
_failure: BaseException | None = None


def postgres_server() -> PostgresServer:
    """The session's server, started on first use; skips the calling test where there is none.

    Raises:
        RuntimeError: the binaries are there but the cluster would not start (a real failure,
            not a skip; the cause is kept so later tests fail fast with it).
    """
    global _server, _failure
    if _server is not None:
        return _server
    if _failure is not None:
        raise RuntimeError("the test PostgreSQL server failed to start earlier") from _failure
    url = os.environ.get(ENV)
    if url:
        _server = PostgresServer(url)
    else:
        bin_dir = _server_bin()
        if bin_dir is None:
            pytest.skip(HOW_TO_GET_ONE)
        try:
            _server = _start_cluster(bin_dir)
        except RuntimeError as exc:
            _failure = exc
            raise
    atexit.register(shutdown)
    return _server


def postgres_url() -> str:
    """A URL of a fresh, empty schema on the session's server."""
    return postgres_server().fresh_url()


def shutdown() -> None:
    """Stop the cluster this module started (drop the schemas on a server it was given).
    Idempotent."""
    global _server
    server, _server = _server, None
    if server is not None:
        server.stop()
