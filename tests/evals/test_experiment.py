"""Running an experiment: each case a tagged run, repeats, resuming without re-running finished
cases, refusing a changed rerun, restarting."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether import define_tool
from tether.errors import ConfigError, DatasetError, ExperimentMismatchError
from tether.evals import Plan, Target, evaluate, list_experiments, read_experiment, show
from tether.lab import Runtime, run_tags
from tether.testing import script_client

from .conftest import Counter

CASES: list[dict[str, Any]] = [
    {"id": "a", "input": "one", "evaluators": [{"type": "contains", "value": "one"}]},
    {"id": "b", "input": "two", "evaluators": [{"type": "contains", "value": "nope"}]},
    {"id": "c", "input": "three"},
]


def model_calls(counter: Counter) -> int:
    return len(counter.model.calls)


async def test_each_case_is_a_run_tagged_with_the_experiment_and_the_case(lab: Runtime) -> None:
    report = await evaluate(lab, "echo", CASES, experiment="first")
    assert report["experiment"] == "first" and report["status"] == "completed"
    assert [(c["id"], c["status"]) for c in report["cases"]] == [
        ("a", "passed"),
        ("b", "failed"),
        ("c", "passed"),
    ]
    assert report["evaluators"] == {
        "contains": {"passed": 1, "total": 2, "rate": 0.5},
    }
    assert report["summary"]["pass_rate"] == pytest.approx(2 / 3, abs=1e-5)
    assert report["tokens"]["total"] == 15
    assert report["cost_usd"]["unknown"] == 3
    for case in report["cases"]:
        info = await lab.run_store.get_run(case["run_id"])
        assert info is not None and info.kind == "agent" and info.status == "completed"
        assert info.tags[:2] == ["experiment:first", f"case:{case['id']}"]
        assert "version:1.0" in info.tags
        assert info.memory_scope is not None and info.memory_scope.startswith("eval/first/1/")
    [listed] = await list_experiments(lab.run_store)
    assert (listed.kind, listed.name, listed.status) == ("experiment", "first", "completed")


async def test_repeats_pass_a_case_only_when_every_run_passes(
    lab: Runtime, counter: Counter
) -> None:
    flaky = {"n": 0}

    def every_other(case: Any, result: Any) -> bool:
        flaky["n"] += 1
        return case.id != "b" or flaky["n"] % 2 == 0

    report = await evaluate(
        lab,
        "echo",
        [{"id": "a", "input": "x"}, {"id": "b", "input": "y"}],
        evaluators=[every_other],
        repeat=3,
        experiment="rep",
        concurrency=1,
    )
    a, b = report["cases"]
    assert (a["status"], a["pass_rate"], len(a["runs"])) == ("passed", 1.0, 3)
    assert b["status"] == "failed" and 0 < b["pass_rate"] < 1
    assert report["evaluators"]["every_other"]["total"] == 6
    assert model_calls(counter) == 6


async def test_a_rerun_resumes_and_runs_no_finished_case_again(
    lab: Runtime, counter: Counter
) -> None:
    cases = [{"id": f"c{i}", "input": f"n{i}"} for i in range(12)]
    gate = asyncio.Event()
    six = asyncio.Event()
    seen: list[str] = []

    async def slow(case: Any, result: Any) -> bool:
        seen.append(case.id)
        if len(seen) == 6:
            six.set()
        if len(seen) >= 5:
            await gate.wait()  # the rest hang: the experiment is cancelled meanwhile
        return True

    task = asyncio.ensure_future(
        evaluate(lab, "echo", cases, evaluators=[slow], experiment="resume", concurrency=2)
    )
    await six.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    state = await read_experiment(lab.run_store, "resume")
    assert state is not None and state.info.status == "failed"
    finished = {k[0] for k in state.finished}
    assert len(finished) == 4
    calls_before = model_calls(counter)
    gate.set()
    report = await evaluate(lab, "echo", cases, evaluators=[slow], experiment="resume")
    assert report["summary"]["done"] == 12 and report["status"] == "completed"
    # The 4 recorded cases were not run again; the 2 cancelled mid-evaluation had completed
    # episodes, which were read back instead of run again.
    assert model_calls(counter) - calls_before == 12 - 6
    runs = [r for r in await lab.run_store.list_runs(limit=500) if r.kind == "agent"]
    per_case: dict[str, int] = {}
    for r in runs:
        if r.status == "completed":
            case = next(t for t in r.tags if t.startswith("case:"))
            per_case[case] = per_case.get(case, 0) + 1
    assert per_case == {f"case:c{i}": 1 for i in range(12)}
    recovered = [c for c in report["cases"] if c["id"] in set(seen[4:6])]
    assert all(c["status"] == "passed" for c in recovered)


async def test_an_agent_case_interrupted_mid_episode_starts_on_a_clean_scope(
    lab: Runtime,
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def wait(args: Any) -> str:
        started.set()
        await release.wait()
        return "done"

    def model(request: Any) -> dict[str, Any]:
        last = request["messages"][-1]
        if any(p["type"] == "tool_result" for p in last["content"]):
            return {"text": "finished"}
        return {"tool_use": [{"name": "wait", "input": {}}]}

    lab.create_agent(
        id="hang", tools=[define_tool(name="wait", execute=wait)], model=script_client([model] * 4)
    )
    cases = [{"id": "a", "input": "x"}]
    task = asyncio.ensure_future(evaluate(lab, "hang", cases, experiment="clean"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    scope = Plan("clean", 1, Target("agent", "hang"), ()).scope("a", 0)
    [dead] = await lab.run_store.list_runs(memory_scope=scope)
    assert dead.status == "cancelled"
    release.set()
    report = await evaluate(lab, "hang", cases, experiment="clean")
    [case] = report["cases"]
    info = await lab.run_store.get_run(case["run_id"])
    assert info is not None and info.memory_scope == f"{scope}~2"
    assert case["runs"][0]["output"] == "finished"
    # The new episode started on an empty conversation, not after the interrupted one's turn.
    stored = await lab.message_store.load(f"{scope}~2")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]


async def test_a_workflow_case_resumes_from_its_journal(lab: Runtime, counter: Counter) -> None:
    cases = [
        {"id": "ok", "input": {"text": "hi"}},
        {"id": "flaky", "input": {"text": "yo", "fail_once": True}},
    ]
    first = await evaluate(lab, "pipeline", cases, experiment="wf")
    by_id = {c["id"]: c for c in first["cases"]}
    assert by_id["ok"]["status"] == "passed"
    assert by_id["flaky"]["status"] == "error"
    assert "second step broken once" in by_id["flaky"]["error"]
    # An errored case is finished: a rerun does not run it again ...
    again = await evaluate(lab, "pipeline", cases, experiment="wf")
    assert counter.calls == {"first:hi": 1, "second:hi": 1, "first:yo": 1, "second:yo": 1}
    assert again["cases"] == first["cases"]
    # ... while a workflow case that a crash left unfinished resumes: its first step is
    # replayed from the journal, not run again.
    zz = {"id": "zz", "input": {"text": "zz", "fail_once": True}}
    plan = Plan("wf2", 1, Target("workflow", "pipeline"), tuple(lab.provenance_tags()))
    run_id = plan.workflow_run_id("zz", 0)
    with pytest.raises(RuntimeError), run_tags(plan.tags("zz")):
        await lab.workflows["pipeline"].run(zz["input"], workflow_run_id=run_id).result
    assert counter.calls["first:zz"] == 1 and counter.calls["second:zz"] == 1
    report = await evaluate(lab, "pipeline", [zz], experiment="wf2")
    [case] = report["cases"]
    assert case["status"] == "passed" and case["run_id"] == run_id
    assert counter.calls["first:zz"] == 1 and counter.calls["second:zz"] == 2
    info = await lab.run_store.get_run(run_id)
    assert info is not None and info.tags[:2] == ["experiment:wf2", "case:zz"]


async def test_a_changed_rerun_is_refused_unless_restarted(lab: Runtime, counter: Counter) -> None:
    await evaluate(lab, "echo", CASES, experiment="x")
    changed = [*CASES[:2], {"id": "c", "input": "THREE"}]
    with pytest.raises(ExperimentMismatchError, match="dataset") as caught:
        await evaluate(lab, "echo", changed, experiment="x")
    assert set(caught.value.differences) == {"dataset_hash"}
    with pytest.raises(ExperimentMismatchError, match="target"):
        await evaluate(lab, "tooler", CASES, experiment="x")
    lab.version = "2.0"
    lab._provenance = None
    with pytest.raises(ExperimentMismatchError, match="target version"):
        await evaluate(lab, "echo", CASES, experiment="x")
    calls = model_calls(counter)
    report = await evaluate(lab, "echo", changed, experiment="x", restart=True)
    assert report["generation"] == 2 and report["versions"][0] == "version:2.0"
    assert model_calls(counter) - calls == 3
    assert [c["runs"][0]["output"] for c in report["cases"]][2] == "echo: THREE"
    # The first generation's results are still in the record.
    state = await read_experiment(lab.run_store, "x")
    assert state is not None
    events = await lab.run_store.events(state.info.run_id)
    assert sum(e["type"] == "case_finished" for e in events) == 6


async def test_bad_arguments_are_refused_before_anything_runs(lab: Runtime) -> None:
    with pytest.raises(ConfigError, match="no agent or workflow 'nobody'"):
        await evaluate(lab, "nobody", CASES)
    with pytest.raises(ConfigError, match="concurrency"):
        await evaluate(lab, "echo", CASES, concurrency=0)
    with pytest.raises(ConfigError, match="repeat"):
        await evaluate(lab, "echo", CASES, repeat=0)
    with pytest.raises(DatasetError, match="run options") as caught:
        await evaluate(lab, "echo", [{"id": "a", "input": {"question": "x"}}])
    assert caught.value.field == "cases[0].input"
    with pytest.raises(ConfigError, match="no experiment 'absent'"):
        await show(lab, "absent")
    assert await lab.run_store.list_runs() == []


async def test_an_agent_case_may_give_run_options(lab: Runtime) -> None:
    report = await evaluate(
        lab,
        "echo",
        [{"id": "m", "input": {"messages": [{"role": "user", "content": "from messages"}]}}],
        evaluators=[{"type": "contains", "value": "from messages"}],
        experiment="opts",
    )
    assert report["cases"][0]["status"] == "passed"


@pytest.mark.parametrize("priced", [True, False])
async def test_an_agent_case_takes_its_cost_from_the_finished_run_without_reading_it_back(
    priced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = {"script": {"input_mtok": 1.0, "output_mtok": 2.0}} if priced else None
    lab = Runtime(store="memory", version=False, prices=prices)
    lab.create_agent(
        id="echo",
        model=script_client(
            [{"text": "hi", "usage": {"input_tokens": 1000, "output_tokens": 500}}] * 4
        ),
    )
    store = lab.run_store
    read: list[str] = []
    get_run = store.get_run

    async def spy(run_id: str) -> Any:
        read.append(run_id)
        return await get_run(run_id)

    monkeypatch.setattr(store, "get_run", spy)
    report = await evaluate(lab, "echo", [{"id": "a", "input": "x"}, {"id": "b", "input": "y"}])
    runs = [run["run_id"] for case in report["cases"] for run in case["runs"]]
    assert not set(read) & set(runs)  # no case's run was read back to score it
    state = await read_experiment(store, report["experiment"])
    assert state is not None
    for record in state.finished.values():
        info = await get_run(record["run_id"])
        assert info is not None and record["cost_usd"] == info.cost_usd
        if priced:
            assert record["cost_usd"] == pytest.approx(0.002) and record["cost_note"] is None
        else:
            assert record["cost_usd"] is None
            assert record["cost_note"] == (
                f"run {info.run_id} records no cost_usd (no price known for model "
                f"{info.meta['model']!r})"
            )
    await lab.aclose()


async def test_the_report_is_what_its_record_says_without_reading_it_back(
    lab: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = lab.run_store
    events = store.events
    read: list[str] = []

    async def counted(run_id: str, **kw: Any) -> Any:
        read.append(run_id)
        return await events(run_id, **kw)

    monkeypatch.setattr(store, "events", counted)
    report = await evaluate(lab, "echo", CASES, experiment="kept", repeat=2)
    assert "experiment:kept" not in read  # a new experiment: its record is never read
    assert report == await show(lab, "kept")
    assert report["status"] == "completed" and report["summary"]["runs"] == 6
    # A rerun picks the record up (read once, as it opens) and reports it all.
    read.clear()
    more = [*CASES, {"id": "d", "input": "four"}]
    again = await evaluate(lab, "echo", more, experiment="kept", repeat=2, restart=True)
    assert read.count("experiment:kept") == 1
    assert again == await show(lab, "kept") and again["generation"] == 2


async def test_a_record_another_driver_wrote_to_meanwhile_is_read_back(lab: Runtime) -> None:
    def progress(event: dict[str, Any]) -> None:
        if event["type"] == "case" and event["record"]["case"] == "a":
            # Another driver records case c first (the first record of a case counts).
            foreign: Any = {
                "type": "case_finished",
                "at": 1.0,
                "data": {
                    "case": "c",
                    "repeat": 0,
                    "generation": 1,
                    "status": "error",
                    "run_id": "r",
                },
            }
            writes.append(asyncio.ensure_future(lab.run_store.append_events(run_id, [foreign])))

    run_id = "experiment:shared"
    writes: list[Any] = []
    report = await evaluate(
        lab, "echo", CASES, experiment="shared", concurrency=1, progress=progress
    )
    await asyncio.gather(*writes)
    assert [(c["id"], c["status"]) for c in report["cases"]][-1] == ("c", "error")
    assert report == await show(lab, "shared")
