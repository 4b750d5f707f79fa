"""SQLite's run search: ended runs go into the FTS5 index in batches (`INDEX_BATCH`), and a
search finds a run whether its batch went in yet or not."""

from __future__ import annotations

from pathlib import Path

from tether.stores import RunInfo, RunQuery, SqliteRunStore
from tether.stores.sqlite import connect
from tether.stores.sqlite._runs import INDEX_BATCH


def _run(i: int) -> RunInfo:
    return RunInfo(
        run_id=f"r{i}",
        kind="agent",
        name="researcher",
        started_at=float(i),
        input_text=f"topic{i:03d} harbour",
    )


async def test_ended_runs_are_indexed_in_batches_and_found_before_their_batch(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / "runs.db")
    store = SqliteRunStore(conn)
    count = 2 * INDEX_BATCH + 3
    indexed: list[int] = []
    for i in range(count):
        await store.start_run(_run(i))
        await store.finish_run(f"r{i}", "completed", output_text=f"answer{i:03d}")
        (rows,) = conn.execute("SELECT count(*) FROM tether_runs_fts").fetchone()
        indexed.append(rows)
    # One insert per batch, not per run: the index grows by a batch when the run whose rowid
    # is a multiple of INDEX_BATCH ends.
    assert indexed == [INDEX_BATCH * ((i + 1) // INDEX_BATCH) for i in range(count)]
    (pending,) = conn.execute("SELECT count(*) FROM tether_runs WHERE unindexed").fetchone()
    assert pending == 3
    # Found by its input and its output, in the index or not yet.
    for i in (0, INDEX_BATCH - 1, INDEX_BATCH, count - 1):
        for q in (f"topic{i:03d}", f"answer{i:03d} harb"):
            page = await store.query_runs(RunQuery(q=q))
            assert [r.run_id for r in page.runs] == [f"r{i}"], q
    page = await store.query_runs(RunQuery(q="harbour"), limit=count)
    assert len(page.runs) == count
    # The batch reads its runs through the partial index, not a scan of every run.
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT rowid FROM tether_runs"
        " WHERE unindexed AND status NOT IN ('running', 'waiting', 'paused')"
    ).fetchall()
    assert "tether_runs_unindexed" in str(plan)
    await store.aclose()
    conn.close()


async def test_a_run_indexed_before_it_is_taken_up_again_is_reindexed_as_it_ends(
    tmp_path: Path,
) -> None:
    store = SqliteRunStore.open(tmp_path / "runs.db")
    for i in range(INDEX_BATCH):  # the last one's end puts them all in the index
        await store.start_run(_run(i))
        await store.finish_run(f"r{i}", "completed", output_text="lighthouse")
    await store.finish_run("r0", "running")
    await store.finish_run("r0", "failed", error="E: x", output_text="ferry")
    page = await store.query_runs(RunQuery(q="ferry"))
    assert [r.run_id for r in page.runs] == ["r0"]
    page = await store.query_runs(RunQuery(q="lighthouse"), limit=100)
    assert "r0" not in [r.run_id for r in page.runs]
    await store.aclose()
