"""The Ray engine on a real local Ray cluster (`ray start --head` plus a second node, one CPU
each, no dashboard), started once for this module: cases on both nodes through the shared
SQLite store, a worker process killed mid-case (Ray restarts it and retries the case, which
resumes from its journal), the CLI's --engine ray, and the stores it refuses."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import ray
except ImportError:
    if os.environ.get("CI"):
        raise  # CI installs Ray (the dev extra): there these tests must run, never skip
    pytest.skip(
        "the Ray engine's tests need Ray: pip install 'tether[ray]'", allow_module_level=True
    )

from typer.testing import CliRunner

from tether.cli import app
from tether.errors import AgentRunError, ConfigError
from tether.evals import evaluate
from tether.evals._dataset import Case, Dataset
from tether.evals._evaluators import Evaluator
from tether.evals._ray import MAX_BATCH, _drive, batch_size
from tether.lab import Registry, Runtime, load_registry
from tether.testing.ray_cluster import LocalRayCluster

pytestmark = [
    pytest.mark.timeout(240),
    # Ray's own modules may warn about their internals (deprecations of their dependencies,
    # on import and at shutdown); those are not ours to fix. Warnings from tether stay errors.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*"),
    pytest.mark.filterwarnings("ignore::FutureWarning:ray.*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:google.protobuf.*"),
]

LAB = """
import asyncio
import os
from pathlib import Path

from tether import define_tool
from tether.lab import Runtime
from tether.testing import script_client

HERE = Path(__file__).resolve().parent
SPACE = HERE.parent


def answer(request):
    text = request["messages"][-1]["content"][-1].get("text", "")
    return {"text": f"yes: {text}"}


lab = Runtime(version="1.0", defaults={"model": script_client([answer] * 10000)})
answerer = lab.create_agent(id="answerer")


def where():
    import ray

    return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}


def log(line):
    with open(SPACE / "steps.log", "a") as f:
        f.write(line + "\\n")


async def flow(input, ctx):
    case = input["case"]

    async def first():
        log(f"first {case}")
        return where()

    async def second():
        log(f"second {case}")
        marker = SPACE / f"hold-{case}"
        if input.get("hold") and not marker.exists():
            # The first attempt tells the test its pid and waits to be killed.
            marker.write_text(str(os.getpid()))
            await asyncio.sleep(120)
        return where()

    a = await ctx.step("first", first)
    b = await ctx.step("second", second)
    return {"first": a, "second": b}


flow_workflow = lab.create_workflow("flow", flow)


async def hold(args):
    marker = SPACE / "hold-agent"
    if args.get("who") == "hold" and not marker.exists():
        # The first attempt tells the test its pid and waits to be killed, mid-episode.
        marker.write_text(str(os.getpid()))
        await asyncio.sleep(120)
    return "held"


def holding(request):
    last = request["messages"][-1]["content"]
    if any(part["type"] == "tool_result" for part in last):
        return {"text": "done holding"}
    return {"tool_use": [{"name": "hold", "input": {"who": last[-1].get("text", "")}}]}


holder = lab.create_agent(
    id="holder",
    model=script_client([holding] * 100),
    tools=[define_tool(name="hold", input_schema={"type": "object"}, execute=hold)],
)
"""


@dataclass
class Space:
    root: Path
    package: str
    cluster: LocalRayCluster

    def registry(self) -> Registry:
        for name in [m for m in sys.modules if m.split(".")[0] == self.package]:
            del sys.modules[name]
        return load_registry(self.root)

    def steps(self) -> list[str]:
        path = self.root / "steps.log"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster(nodes=2, cpus=1) as started:
        yield started


@pytest.fixture
def space(
    cluster: LocalRayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Space]:
    package = f"rayapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "lab.py").write_text(textwrap.dedent(LAB))
    (tmp_path / "tether.toml").write_text(
        f'runtime = "{package}.lab:lab"\n'
        f'agents = ["{package}.lab:answerer", "{package}.lab:holder"]\n'
        f'workflows = ["{package}.lab:flow_workflow"]\n'
        'store = "sqlite:///.tether/ray.db"\n'
    )
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    yield Space(tmp_path, package, cluster)
    if ray.is_initialized():
        ray.shutdown()


async def test_cases_run_on_both_nodes_and_land_in_the_shared_store(space: Space) -> None:
    registry = space.registry()
    lab = registry.runtime
    cases = [{"id": f"w{i}", "input": {"case": f"w{i}"}} for i in range(6)]
    async with lab:
        report = await evaluate(
            lab,
            "flow",
            cases,
            evaluators=[{"type": "json_schema", "schema": {"type": "object"}}],
            experiment="on-ray",
            engine="ray",
            address=space.cluster.address,
            concurrency=2,
        )
        assert report["summary"]["done"] == 6 and report["summary"]["passed"] == 6
        outputs = [json.loads(c["runs"][0]["output"]) for c in report["cases"]]
        nodes = {o["first"]["node"] for o in outputs}
        assert len(nodes) == 2, "both nodes ran cases"
        assert os.getpid() not in {o["first"]["pid"] for o in outputs}
        # Each case is a workflow run in the project's store, tagged as usual.
        for case in report["cases"]:
            info = await lab.run_store.get_run(case["run_id"])
            assert info is not None and info.status == "completed"
            assert info.tags[:2] == ["experiment:on-ray", f"case:{case['id']}"]
        agents = await evaluate(
            lab,
            "answerer",
            [{"id": "q", "input": "hello", "expected": "no"}],
            evaluators=[{"type": "equals"}, {"type": "contains", "value": "yes"}],
            experiment="agent-on-ray",
            engine="ray",
            address=space.cluster.address,
        )
        [case] = agents["cases"]
        assert case["results"]["contains"]["passed"] is True
        assert case["results"]["equals"]["passed"] is False  # the evaluators ran on Ray
    assert sorted(space.steps()) == sorted(
        [f"first w{i}" for i in range(6)] + [f"second w{i}" for i in range(6)]
    )


async def test_a_second_experiment_on_the_runtime_reuses_its_ray_connection_and_actors(
    space: Space,
) -> None:
    lab = space.registry().runtime

    async def experiment(name: str) -> set[int]:
        report = await evaluate(
            lab,
            "flow",
            [{"id": f"{name}{i}", "input": {"case": f"{name}{i}"}} for i in range(6)],
            experiment=name,
            engine="ray",
            address=space.cluster.address,
        )
        assert report["summary"]["done"] == 6
        return {json.loads(c["runs"][0]["output"])["first"]["pid"] for c in report["cases"]}

    async with lab:
        first = await experiment("one")
        pool = lab._engines["ray"]
        actors = list(pool.actors)
        pids = set(await asyncio.gather(*(a.pid.remote() for a in actors)))
        assert first <= pids and len(pids) == 2
        # The actors' workers are processes of the cluster's sessions (what the bench counts).
        assert {os.getsid(pid) for pid in pids} <= set(space.cluster.sessions)
        second = await experiment("two")
        # The same actors (the same worker processes) ran the second one: no start-up.
        assert lab._engines["ray"] is pool and pool.actors == actors
        assert second <= pids
        assert ray.is_initialized()
    # Closing the runtime kills its actors and leaves the cluster it joined.
    assert not ray.is_initialized() and not pool.actors


async def kill_when_held(marker: Path) -> int:
    """Kill the worker that wrote its pid to `marker` (it is another process: a file is how it
    can tell us), once it has; returns that pid."""
    while (pid := _written_pid(marker)) is None:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return pid


def _written_pid(marker: Path) -> int | None:
    text = marker.read_text() if marker.exists() else ""
    return int(text) if text else None


async def test_a_worker_killed_mid_case_is_retried_and_resumes_from_the_journal(
    space: Space,
) -> None:
    registry = space.registry()
    lab = registry.runtime
    cases = [{"id": "held", "input": {"case": "held", "hold": True}}] + [
        {"id": f"k{i}", "input": {"case": f"k{i}"}} for i in range(3)
    ]
    async with lab:
        killer = asyncio.ensure_future(kill_when_held(space.root / "hold-held"))
        report = await evaluate(
            lab,
            "flow",
            cases,
            experiment="killed",
            engine="ray",
            address=space.cluster.address,
            concurrency=1,
        )
        killed = await killer
    assert report["summary"]["passed"] == 4
    held = next(c for c in report["cases"] if c["id"] == "held")
    output = json.loads(held["runs"][0]["output"])
    assert output["first"]["pid"] == killed  # journaled by the killed worker, replayed
    assert output["second"]["pid"] != killed  # ran again on the restarted one
    steps = space.steps()
    assert steps.count("first held") == 1 and steps.count("second held") == 2
    for i in range(3):
        assert steps.count(f"first k{i}") == 1 and steps.count(f"second k{i}") == 1


async def test_an_agent_case_killed_mid_episode_runs_again_on_a_clean_scope(
    space: Space,
) -> None:
    # The actor Ray restarted looks for the case's earlier attempt (a fresh one need not).
    lab = space.registry().runtime
    async with lab:
        killer = asyncio.ensure_future(kill_when_held(space.root / "hold-agent"))
        report = await evaluate(
            lab,
            "holder",
            [{"id": "h", "input": "hold"}, {"id": "g", "input": "pass"}],
            evaluators=[{"type": "contains", "value": "done holding"}],
            experiment="killed-agent",
            engine="ray",
            address=space.cluster.address,
            concurrency=1,
        )
        await killer
        assert report["summary"]["passed"] == 2
        scopes: dict[str, str] = {}
        for case in report["cases"]:
            info = await lab.run_store.get_run(case["run_id"])
            assert info is not None and info.status == "completed"
            scopes[case["id"]] = str(info.memory_scope)
    # h ran in the killed worker: its retry skipped the interrupted scope; g ran once.
    assert scopes["h"].endswith("/h/0~2") and scopes["g"].endswith("/g/0")


def test_the_cli_runs_an_experiment_on_the_cluster(space: Space) -> None:
    data = space.root / "qa.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "input": f"q{i}", "expected": f"yes: q{i}"}) + "\n"
            for i in range(4)
        )
    )
    space.registry()
    try:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "run",
                "answerer",
                "-d",
                str(data),
                "--evaluators",
                str(_write(space.root / "ev.yaml", "- {type: equals}\n")),
                "--engine",
                "ray",
                "--address",
                space.cluster.address,
                "--json",
            ],
            prog_name="tether",
        )
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == space.package]:
            del sys.modules[name]
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["evaluators"]["equals"] == {"passed": 4, "total": 4, "rate": 1.0}


async def test_on_postgresql_the_workers_write_to_the_same_server(space: Space) -> None:
    from tests.postgres_server import postgres_url

    url = postgres_url()
    config = space.root / "tether.toml"
    config.write_text(config.read_text().replace('"sqlite:///.tether/ray.db"', f'"{url}"'))
    registry = space.registry()
    lab = registry.runtime
    cases = [{"id": f"p{i}", "input": {"case": f"p{i}"}} for i in range(4)]
    async with lab:
        report = await evaluate(
            lab,
            "flow",
            cases,
            experiment="on-postgres",
            engine="ray",
            address=space.cluster.address,
            concurrency=2,
        )
        assert report["summary"]["passed"] == 4
        for case in report["cases"]:
            info = await lab.run_store.get_run(case["run_id"])
            assert info is not None and info.status == "completed"
    fresh = Runtime(store=url, version=False)
    async with fresh:
        [listed] = await fresh.run_store.list_runs(kind="experiment")
        assert listed.name == "on-postgres" and listed.status == "completed"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


async def test_stores_the_workers_cannot_share_are_refused(
    space: Space, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Runtime(store="memory", root=space.root)
    memory.create_agent(id="answerer", model="openai:gpt-4o")
    with pytest.raises(ConfigError, match="not memory"):
        await evaluate(memory, "answerer", [{"id": "a", "input": "x"}], engine="ray")
    registry = space.registry()
    lab = registry.runtime
    elsewhere = [{"NodeManagerAddress": "198.51.100.7", "Alive": True}]
    monkeypatch.setattr(ray, "nodes", lambda: elsewhere)
    async with lab:
        with pytest.raises(ConfigError, match="PostgreSQL"):
            await evaluate(
                lab,
                "answerer",
                [{"id": "a", "input": "x"}],
                experiment="far",
                engine="ray",
                address=space.cluster.address,
            )
        assert not ray.is_initialized()
        runs = await lab.run_store.list_runs(kind="agent")
        assert runs == []


class FakeActor:
    """Stands in for a CaseActor handle: `run_batch.remote(batch)` answers soon, each case with
    a record (or the failure `fail` names), and remembers every call; its first call answers
    once the actor is up (`start`, an event to wait for)."""

    def __init__(
        self,
        fail: dict[str, str] | None = None,
        broken: bool = False,
        start: asyncio.Event | None = None,
    ) -> None:
        self.calls: list[list[tuple[dict[str, object], int]]] = []
        self.fail = fail or {}
        self.broken = broken
        self.start = start
        self.run_batch = self

    async def remote(self, batch: list[tuple[dict[str, object], int]]) -> object:
        self.calls.append(batch)
        if self.start is not None:
            await self.start.wait()
        await asyncio.sleep(0)  # the answer comes later, as Ray's does
        if self.broken:
            raise RuntimeError("the actor died")
        return [self.fail.get(str(c["id"])) or {"case": c["id"], "repeat": r} for c, r in batch]


def _work(n: int, repeat: int = 1) -> list[tuple[Case, int, list[Evaluator]]]:
    cases = Dataset.of([{"id": f"c{i}", "input": f"c{i}"} for i in range(n)]).cases
    return [(case, r, []) for case in cases for r in range(repeat)]


async def test_one_actor_call_runs_a_batch_of_cases_and_each_case_runs_once() -> None:
    actors = [FakeActor(), FakeActor()]
    recorded: list[dict[str, object]] = []
    await _drive(actors, _work(500, repeat=2), recorded.append)
    keys = [(r["case"], r["repeat"]) for r in recorded]
    assert sorted(keys) == sorted((f"c{i}", r) for i in range(500) for r in range(2))
    calls = [batch for actor in actors for batch in actor.calls]
    assert all(actor.calls for actor in actors)  # both actors got work
    assert len(calls) < 1000 / 10  # far fewer calls than cases
    assert max(len(b) for b in calls) == MAX_BATCH and min(len(b) for b in calls) == 1
    # Batches shrink as the work runs out: a share of what is left.
    assert [batch_size(left, 2) for left in (1000, 100, 9, 1)] == [MAX_BATCH, 13, 2, 1]


async def test_an_actor_that_answered_before_gets_a_full_batch_first() -> None:
    actors = [FakeActor(), FakeActor()]
    up: set[object] = set()
    await _drive(actors, _work(300), lambda record: None, up=up)
    # Not known to be up: one case first; both answered, so both are up now.
    assert [len(actor.calls[0]) for actor in actors] == [1, 1]
    assert up == set(actors)
    for actor in actors:
        actor.calls.clear()
    await _drive(actors, _work(300), lambda record: None, up=up)
    # Up (the runtime's next experiment): a full share of the work at once.
    assert len(actors[0].calls[0]) == batch_size(300, 2)
    assert min(len(actor.calls[0]) for actor in actors) > 1
    # One whose call failed (Ray's retries spent) is up no more.
    dead = FakeActor(broken=True)
    up.add(dead)
    with pytest.raises(AgentRunError):
        await _drive([dead], _work(3), lambda record: None, up=up, on_gone=up.discard)
    assert dead not in up


async def test_a_batch_that_fails_fails_its_cases_and_the_others_are_recorded() -> None:
    recorded: list[dict[str, object]] = []
    with pytest.raises(AgentRunError, match="1 case run") as caught:
        await _drive([FakeActor(fail={"c1": "StoreError: locked"})], _work(3), recorded.append)
    assert "c1 (repeat 0): StoreError: locked" in str(caught.value)
    # A dead actor (Ray's retries spent) fails the cases it was sent, and none is left.
    with pytest.raises(AgentRunError, match=r"2 case run.*RuntimeError: the actor died"):
        await _drive([FakeActor(broken=True)], _work(2), recorded.append)
    assert [r["case"] for r in recorded] == ["c0", "c2"]


async def test_an_actor_still_starting_holds_one_case_and_a_dead_one_none() -> None:
    started = asyncio.Event()
    late, up = FakeActor(start=started), FakeActor()
    recorded: list[dict[str, object]] = []
    others_done = asyncio.Event()

    def record(done: dict[str, object]) -> None:
        recorded.append(done)
        if len(recorded) == 299:
            others_done.set()

    drive = asyncio.ensure_future(_drive([late, up], _work(300), record))
    # The actor up runs every case but the late one's first.
    await asyncio.wait_for(others_done.wait(), 10)
    assert [len(b) for b in late.calls] == [1]
    started.set()
    await drive
    assert len(recorded) == 300
    # An actor gone (Ray's retries spent) takes no more: the other runs the rest.
    dead, fine = FakeActor(broken=True), FakeActor()
    with pytest.raises(AgentRunError, match="1 case run"):
        await _drive([dead, fine], _work(50), recorded.append)
    assert len(recorded) == 349 and [len(b) for b in dead.calls] == [1]
