"""The Ray engine: the cases of an experiment on a pool of Ray actors, one runtime each.

Ray schedules and retries; we do not. Each actor loads the project's registry (agents and
workflows do not pickle, so the target goes by registry id) and points its runtime at the shared
store, then runs up to `concurrency` cases at once on its own event loop. The driver sends the
cases in batches, one actor call each (`CaseActor.run_batch`), so a call's cost (serializing,
scheduling, the round trip) is paid once per batch, not once per case: batches are large while
much is left and shrink towards the end (each a share of what is left), so no actor idles long
while another finishes a big one. Each actor has two batches in flight, so its next one is there
when one ends. An actor's first call is one case, so an actor still starting (its process, its
imports) holds no batch up while the others run; an actor that has answered once (kept from an
earlier experiment) gets full batches at once. The driver records each case's result as its
batch returns.

A worker process that dies mid-batch is restarted by Ray (`max_restarts`) and the batch is sent
again (`max_task_retries`): Ray actor tasks run at least once, not exactly once, so the case's
own idempotency (`tether.evals._case`: the workflow journal, the agent case's scope records)
makes each case of a retried batch resume (or read back its finished run) instead of starting
over.

The store must be one every worker reaches: PostgreSQL when the cluster spans machines; a
SQLite file only when every node runs on this machine (checked after joining the cluster); never
``memory``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import AgentRunError, ConfigError, RegistryError
from ..lab import DEFAULT_STORE, Runtime, find_config, load_registry
from ._case import Plan, Target, resolve_target, run_case, run_together
from ._dataset import Case, Dataset
from ._evaluators import Declared, Evaluator, unique_names

__all__ = ["ActorPool", "CaseActor", "batch_size", "require_ray", "run_ray", "shared_store_url"]

_log = logging.getLogger("tether.evals")

MAX_RESTARTS = 3
"""How often Ray restarts an actor whose process died."""
MAX_TASK_RETRIES = 3
"""How often Ray sends a batch again after its actor died under it."""
MAX_BATCH = 64
"""The most cases one actor call runs."""
IN_FLIGHT = 2
"""Batches sent to one actor at a time (its cases still run `concurrency` at once)."""
KEPT_PLANS = 4
"""The experiments' plans an actor keeps built (the latest ones its calls named)."""


def require_ray() -> Any:
    """The `ray` module.

    Raises:
        ConfigError: Ray is not installed (naming the extra to install).
    """
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the Ray engine needs Ray: pip install 'tether[ray]' (or use the local engine)"
        ) from None
    return ray


def shared_store_url(runtime: Runtime) -> str:
    """The runtime's store as a URL every worker can open (a relative SQLite path made
    absolute against the project).

    Raises:
        ConfigError: an in-memory store, which no other process can reach.
    """
    url = runtime.store_url or DEFAULT_STORE
    if url in ("memory", "memory://", ":memory:") or url.endswith(":memory:"):
        raise ConfigError(
            "the Ray engine needs a store every worker reaches: a SQLite file (a cluster on "
            "this machine) or PostgreSQL, not memory; pass --store or set store in tether.toml"
        )
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/"):
        return prefix + str((runtime.root / url[len(prefix) :]).resolve())
    return url


@dataclass(frozen=True, slots=True)
class _Context:
    """What one experiment's cases run with on an actor."""

    plan: Plan
    target: Any
    header: list[Evaluator]


class CaseActor:
    """One Ray actor: the project's registry loaded, its runtime on the shared store. It
    outlives one experiment (the driver keeps its actors for the runtime's life): each call
    names its experiment's plan, which the actor builds once and keeps while calls name it."""

    def __init__(self, config_path: str, store_url: str, concurrency: int = 1) -> None:
        ray = require_ray()
        registry = load_registry(config_path)
        runtime = registry.runtime
        if runtime.store_url != store_url:
            runtime.use_store(store_url)
        self.runtime = runtime
        # A restarted actor may be sent a batch again whose cases ran (or half ran) before.
        self.restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        self.concurrency = concurrency
        self._slots: asyncio.Semaphore | None = None
        self._plans: dict[tuple[str, bytes], _Context] = {}

    def use(self, plan: str, evaluators: bytes) -> _Context:
        """What the cases of `plan` (its JSON text) run with, `evaluators` (pickled) among
        them: built the first time a call names them, then kept (the last few)."""
        key = (plan, evaluators)
        context = self._plans.get(key)
        if context is None:
            data = json.loads(plan)
            target = Target(data["target"]["kind"], data["target"]["id"])
            built = Plan(
                data["experiment"],
                data["generation"],
                target,
                tuple(data["versions"]),
                fresh=bool(data.get("fresh")) and not self.restarted,
            )
            _, resolved = resolve_target(self.runtime, f"{target.kind}:{target.id}")
            header = require_ray().cloudpickle.loads(evaluators)
            context = self._plans[key] = _Context(built, resolved, header)
            while len(self._plans) > KEPT_PLANS:
                del self._plans[next(iter(self._plans))]
        return context

    async def run(self, context: _Context, case: dict[str, Any], repeat: int) -> dict[str, Any]:
        """One repeat of one case (its JSON): its `case_finished` record."""
        loaded = Dataset.of([case]).cases[0]
        evaluators = unique_names([*context.header, *loaded.evaluators])
        return await run_case(
            self.runtime, context.target, context.plan, loaded, repeat, evaluators
        )

    async def run_batch(
        self, batch: list[tuple[dict[str, Any], int]], plan: str, evaluators: bytes
    ) -> list[dict[str, Any] | str]:
        """The (case JSON, repeat) pairs of `batch` under `plan` and `evaluators` (see `use`),
        `concurrency` at a time over every batch this actor runs: for each, in order, its
        record, or why it could not run (a string)."""
        context = self.use(plan, evaluators)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        slots = self._slots

        async def one(case: dict[str, Any], repeat: int) -> dict[str, Any] | str:
            async with slots:
                try:
                    return await self.run(context, case, repeat)
                except Exception as exc:  # this case only: the batch's others go on
                    return f"{type(exc).__name__}: {exc}"

        return list(await asyncio.gather(*(one(case, repeat) for case, repeat in batch)))

    def pid(self) -> int:
        return os.getpid()


def _is_local(ray: Any) -> bool:
    """Whether every live node of the cluster runs on this machine."""
    here = ray.util.get_node_ip_address()
    addresses = {n.get("NodeManagerAddress") for n in ray.nodes() if n.get("Alive")}
    return addresses <= {here, "127.0.0.1", "localhost"}


async def run_ray(
    runtime: Runtime,
    plan: Plan,
    work: list[tuple[Case, int, list[Evaluator]]],
    *,
    concurrency: int,
    address: str | None,
    on_finished: Callable[[dict[str, Any]], None],
    header: list[Evaluator],
) -> None:
    """Run `work` on a Ray cluster; `on_finished` receives each case's record. `header` is
    the evaluators every case shares (pickled by value, sent with each call, unpickled once
    per experiment by each actor). The connection and the actors stay with `runtime` for its next
    experiment (`ActorPool`), closed with it.

    Raises:
        ConfigError: Ray missing, no project config, a store the workers cannot share.
        AgentRunError: a case still failed after Ray's retries (the others are recorded; a
            rerun resumes the rest).
    """
    ray = require_ray()
    try:
        config_path, _ = find_config(runtime.root)
    except RegistryError as exc:
        raise ConfigError(
            f"the Ray engine loads the project's registry in every worker: {exc}"
        ) from exc
    store_url = shared_store_url(runtime)
    for case, _, _ in work:
        if any(not isinstance(e, Declared) for e in case.evaluators):
            raise ConfigError(
                f"case {case.id!r}: with the Ray engine a case's own evaluators must be specs; "
                "pass Python evaluators in evaluators=[...]"
            )
    key = (address, str(config_path), store_url, concurrency)
    pool: ActorPool | None = runtime._engines.get("ray")
    if pool is not None and not pool.serves(key):
        del runtime._engines["ray"]
        await pool.aclose()
        pool = None
    if pool is None:
        pool = ActorPool(ray, key, started=_connect(ray, address))
    try:
        if store_url.startswith("sqlite:") and not _is_local(ray):
            raise ConfigError(
                "this Ray cluster has nodes on other machines, which cannot share a SQLite "
                "file; use a PostgreSQL store (--store postgresql://...)"
            )
        blob: bytes = ray.cloudpickle.dumps(header)
        plan_json = json.dumps(
            {
                "experiment": plan.experiment,
                "generation": plan.generation,
                "target": plan.target.to_json(),
                "versions": list(plan.versions),
                "fresh": plan.fresh,
            }
        )
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        actors = pool.actors_for(min(cpus, max(1, len(work))))
        runtime._engines["ray"] = pool
        await _drive(actors, work, on_finished, (plan_json, blob), pool.gone, pool.up)
    except AgentRunError:
        raise  # cases failed: the actors that are up stay for the next experiment
    except BaseException:
        # Anything else (a refused store, a cancellation) leaves nothing behind: the actors may
        # still run what they were sent.
        runtime._engines.pop("ray", None)
        await pool.aclose()
        raise


def _connect(ray: Any, address: str | None) -> bool:
    """Join (or start) the cluster unless this process already has; whether it did."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {
        "logging_level": logging.WARNING,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if address is None:
        kwargs["include_dashboard"] = False
    ray.init(address=address, **kwargs)
    return True


class ActorPool:
    """The driver's Ray connection and its CaseActors, kept for the runtime's life (closed with
    it): a second experiment on the same cluster, project, store and concurrency starts no
    worker and imports nothing again."""

    def __init__(self, ray: Any, key: tuple[Any, ...], *, started: bool) -> None:
        self.ray = ray
        self.key = key
        self.started = started
        """Whether this pool joined the cluster (then it leaves it when it closes)."""
        self.actors: list[Any] = []
        self.up: set[Any] = set()
        """The actors that have answered a call: up, their start-up behind them."""

    def serves(self, key: tuple[Any, ...]) -> bool:
        """Whether this pool runs experiments for `key` (and its connection is still up)."""
        return key == self.key and self.ray.is_initialized()

    def actors_for(self, count: int) -> list[Any]:
        """`count` actors, started as needed."""
        _, config_path, store_url, concurrency = self.key
        if len(self.actors) < count:
            remote = self.ray.remote(
                num_cpus=1,
                max_restarts=MAX_RESTARTS,
                max_task_retries=MAX_TASK_RETRIES,
                max_concurrency=IN_FLIGHT,
            )(CaseActor)
            self.actors += [
                remote.remote(config_path, store_url, concurrency)
                for _ in range(count - len(self.actors))
            ]
        return self.actors[:count]

    def gone(self, actor: Any) -> None:
        """`actor`'s call failed after Ray's retries: it takes no more work."""
        self.up.discard(actor)
        if actor in self.actors:
            self.actors.remove(actor)
            if self.ray.is_initialized():
                self.ray.kill(actor, no_restart=True)

    async def aclose(self) -> None:
        actors, self.actors = self.actors, []
        self.up.clear()
        if self.ray.is_initialized():
            for actor in actors:
                self.ray.kill(actor, no_restart=True)
            if self.started:
                self.ray.shutdown()


def batch_size(left: int, actors: int) -> int:
    """How many of the `left` cases the next batch takes: a share of what is left (so the
    last batches are small and the actors finish together), at most MAX_BATCH."""
    return max(1, min(MAX_BATCH, -(-left // (2 * IN_FLIGHT * actors))))


class _Driver:
    """The driver's side of one pass: the cases left, handed out in batches to the actors."""

    def __init__(
        self,
        actors: list[Any],
        work: list[tuple[Case, int, list[Evaluator]]],
        on_finished: Callable[[dict[str, Any]], None],
        context: tuple[Any, ...],
        on_gone: Callable[[Any], None],
        up: set[Any],
    ) -> None:
        self.actors = actors
        self.queue = deque(work)
        self.on_finished = on_finished
        self.context = context
        self.on_gone = on_gone
        self.up = up
        self.failures: list[str] = []
        self.gone: list[str] = []
        """Why an actor stopped taking work (its call failed after Ray's retries)."""

    def failed(self, case: Case, repeat: int, why: str) -> None:
        # Ray gave up on it (its retries spent); the rest go on, a rerun resumes it.
        _log.error("case %r (repeat %d) failed on Ray: %s", case.id, repeat, why)
        self.failures.append(f"{case.id} (repeat {repeat}): {why}")

    async def send(self, actor: Any, batch: list[tuple[Case, int, list[Evaluator]]]) -> bool:
        """Run `batch` on `actor` and record its cases; False when the call itself failed."""
        try:
            records: list[Mapping[str, Any] | str] = await actor.run_batch.remote(
                [(case.to_json(), repeat) for case, repeat, _ in batch], *self.context
            )
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            self.gone.append(why)
            self.on_gone(actor)
            for case, repeat, _ in batch:
                self.failed(case, repeat, why)
            return False
        self.up.add(actor)
        for (case, repeat, _), record in zip(batch, records, strict=True):
            if isinstance(record, str):
                self.failed(case, repeat, record)
            else:
                self.on_finished(dict(record))
        return True

    async def slot(self, actor: Any) -> None:
        queue = self.queue
        while queue:
            batch = [queue.popleft() for _ in range(batch_size(len(queue), len(self.actors)))]
            if not await self.send(actor, batch):
                return  # the actor is gone: the others take the rest

    async def serve(self, actor: Any) -> None:
        # The first call of an actor not known to be up is one case: one still starting (its
        # process, its imports) holds no batch up meanwhile, the ones up take the work.
        if (
            actor not in self.up
            and self.queue
            and not await self.send(actor, [self.queue.popleft()])
        ):
            return
        await run_together([self.slot(actor) for _ in range(IN_FLIGHT)])

    async def run(self) -> None:
        await run_together([self.serve(actor) for actor in self.actors])
        while self.queue:  # every actor is gone
            case, repeat, _ = self.queue.popleft()
            self.failed(case, repeat, self.gone[0] if self.gone else "no actor took it")


async def _drive(
    actors: list[Any],
    work: list[tuple[Case, int, list[Evaluator]]],
    on_finished: Callable[[dict[str, Any]], None],
    context: tuple[Any, ...] = (),
    on_gone: Callable[[Any], None] = lambda actor: None,
    up: set[Any] | None = None,
) -> None:
    """Run `work` on `actors`, each call sent `context` after its batch (the plan and the
    evaluators); `on_gone` learns of each actor whose call failed after Ray's retries. `up`
    holds the actors known to be up (their first call is a full batch); each actor that answers
    a call is added to it."""
    driver = _Driver(actors, work, on_finished, context, on_gone, set() if up is None else up)
    await driver.run()
    failures = driver.failures
    if failures:
        more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
        shown = "; ".join(failures[:3]) + more
        raise AgentRunError(
            f"{len(failures)} case run(s) failed on Ray after its retries: {shown}. "
            "Run the experiment again to resume them"
        )
