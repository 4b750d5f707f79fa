"""The Ray engine: the cases of an experiment on a pool of Ray actors, one runtime each.

Ray schedules and retries; we do not. Each actor loads the project's registry (agents and
workflows do not pickle, so the target goes by registry id) and points its runtime at the shared
store, then runs up to `concurrency` cases at once on its own event loop. The driver keeps
`actors × concurrency` cases in flight and records each result as it arrives.

A worker process that dies mid-case is restarted by Ray (`max_restarts`) and the case is sent
again (`max_task_retries`): Ray actor tasks run at least once, not exactly once, so the case's
own idempotency (`tether.evals._case`: the workflow journal, the agent case's scope records)
makes a retried case resume instead of starting over.

The store must be one every worker reaches: PostgreSQL when the cluster spans machines; a
SQLite file only when every node runs on this machine (checked after joining the cluster); never
``memory``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import AgentRunError, ConfigError, RegistryError
from ..lab import DEFAULT_STORE, Runtime, find_config, load_registry
from ._case import Plan, Target, resolve_target, run_case, run_together
from ._dataset import Case, Dataset
from ._evaluators import Declared, Evaluator, unique_names

__all__ = ["CaseActor", "require_ray", "run_ray", "shared_store_url"]

_log = logging.getLogger("tether.evals")

MAX_RESTARTS = 3
"""How often Ray restarts an actor whose process died."""
MAX_TASK_RETRIES = 3
"""How often Ray sends a case again after its actor died under it."""


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


class CaseActor:
    """One Ray actor: the project's registry loaded, its runtime on the shared store."""

    def __init__(
        self,
        config_path: str,
        store_url: str,
        plan: dict[str, Any],
        evaluators: bytes,
    ) -> None:
        ray = require_ray()
        registry = load_registry(config_path)
        runtime = registry.runtime
        if runtime.store_url != store_url:
            runtime.use_store(store_url)
        self.runtime = runtime
        target = Target(plan["target"]["kind"], plan["target"]["id"])
        self.plan = Plan(plan["experiment"], plan["generation"], target, tuple(plan["versions"]))
        _, self.target = resolve_target(runtime, f"{target.kind}:{target.id}")
        self.header: list[Evaluator] = ray.cloudpickle.loads(evaluators)

    async def run(self, case: dict[str, Any], repeat: int) -> dict[str, Any]:
        loaded = Dataset.of([case]).cases[0]
        evaluators = unique_names([*self.header, *loaded.evaluators])
        return await run_case(self.runtime, self.target, self.plan, loaded, repeat, evaluators)

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
    the evaluators every case shares (shipped once per actor, pickled by value).

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
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {
            "logging_level": logging.WARNING,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address is None:
            kwargs["include_dashboard"] = False
        ray.init(address=address, **kwargs)
        started = True
    actors: list[Any] = []
    try:
        if store_url.startswith("sqlite:") and not _is_local(ray):
            raise ConfigError(
                "this Ray cluster has nodes on other machines, which cannot share a SQLite "
                "file; use a PostgreSQL store (--store postgresql://...)"
            )
        blob: bytes = ray.cloudpickle.dumps(header)
        plan_json = {
            "experiment": plan.experiment,
            "generation": plan.generation,
            "target": plan.target.to_json(),
            "versions": list(plan.versions),
        }
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        remote = ray.remote(
            num_cpus=1,
            max_restarts=MAX_RESTARTS,
            max_task_retries=MAX_TASK_RETRIES,
            max_concurrency=concurrency,
        )(CaseActor)
        actors = [
            remote.remote(str(config_path), store_url, plan_json, blob)
            for _ in range(min(cpus, max(1, len(work))))
        ]
        await _drive(actors, work, concurrency, on_finished)
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
        if started:
            ray.shutdown()


async def _drive(
    actors: list[Any],
    work: list[tuple[Case, int, list[Evaluator]]],
    concurrency: int,
    on_finished: Callable[[dict[str, Any]], None],
) -> None:
    items = iter(work)
    failures: list[str] = []

    async def slot(actor: Any) -> None:
        for case, repeat, _ in items:
            try:
                record: Mapping[str, Any] = await actor.run.remote(case.to_json(), repeat)
            except Exception as exc:
                # Ray gave up on it (its retries spent); the rest go on, a rerun resumes it.
                _log.error("case %r (repeat %d) failed on Ray: %s", case.id, repeat, exc)
                failures.append(f"{case.id} (repeat {repeat}): {type(exc).__name__}: {exc}")
                continue
            on_finished(dict(record))

    await run_together([slot(a) for a in actors for _ in range(concurrency)])
    if failures:
        more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
        shown = "; ".join(failures[:3]) + more
        raise AgentRunError(
            f"{len(failures)} case run(s) failed on Ray after its retries: {shown}. "
            "Run the experiment again to resume them"
        )
