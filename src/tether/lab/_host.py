"""What a lab agent needs from the runtime that created it, as public, read-only surfaces.

`Runtime` implements `AgentHost`; agents and episodes know only this protocol, so the lab's
modules import downwards: runtime -> agent -> episode -> host.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from .._eager import step
from ..blobs import BlobResolver
from ..errors import ConfigError
from ..llm import LLMClient, client_from_config
from ..stores.message_store import MessageStore
from ..stores.run_store import RunStore
from ._definition import MODEL_CONFIG_KEYS, Definition
from ._leases import Heartbeat, ScopeLocks
from ._recorder import RunListener

__all__ = ["AgentHost", "ClientPool", "TaskSet"]

T = TypeVar("T")


class TaskSet:
    """Tasks someone waits for before closing (running episodes, title workflows).

    A task's failure reaches whoever awaits it; one nobody awaits is already in the run store,
    so it is not logged a second time as "never retrieved".
    """

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Start `coro` as a task of this set (inside the running loop)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._settle)
        return task

    def start(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Like `spawn`, but `coro`'s first steps run now, in the caller's frame and context,
        up to its first wait (`tether._eager.step`); the task goes on from there."""
        future = step(coro)
        task = future if isinstance(future, asyncio.Task) else _settled(future)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._settle)
        return task

    def _settle(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()

    def __len__(self) -> int:
        return len(self._tasks)

    def pending(self) -> list[asyncio.Task[Any]]:
        """The tasks still running."""
        return list(self._tasks)

    async def cancel_all(self) -> None:
        """Cancel every task still running and wait until each has ended (a cancelled title
        workflow records that it was)."""
        pending = self.pending()
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


def _settled(future: asyncio.Future[T]) -> asyncio.Task[T]:
    """A task ending as `future` (done) did."""

    async def outcome() -> T:
        return future.result()

    return asyncio.get_running_loop().create_task(outcome())


class ClientPool:
    """LLM clients built from model configs: one per distinct config, shared by every agent
    that names it, closed together."""

    __slots__ = ("_clients", "generation")

    def __init__(self) -> None:
        self._clients: dict[str, LLMClient] = {}
        self.generation = 0
        """How many times the clients were closed (what an agent built on them is rebuilt
        from the next time it is used)."""

    def get(self, config: dict[str, Any]) -> LLMClient:
        """The client for `config`, built on first use.

        Raises:
            ConfigError: an unknown provider, or a missing key (MissingKeyError).
        """
        key = json.dumps(config, sort_keys=True, default=repr)
        client = self._clients.get(key)
        if client is None:
            try:
                client = client_from_config(dict(config))
            except TypeError as exc:  # an adapter that does not take one of the keys
                raise ConfigError(
                    f"model config {sorted(config)}: {exc}; the keys are "
                    f"{', '.join(sorted(MODEL_CONFIG_KEYS))}"
                ) from exc
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        self.generation += 1
        for client in clients:
            await client.aclose()


class AgentHost(Protocol):
    """The runtime as its agents see it."""

    @property
    def defaults(self) -> Definition:
        """Parts every agent of the runtime uses unless it sets its own."""
        ...

    @property
    def message_store(self) -> MessageStore: ...

    @property
    def run_store(self) -> RunStore: ...

    def blob_resolver(self, store: MessageStore) -> BlobResolver | None:
        """The resolver of the blobs `store`'s records refer to (one per blob store)."""
        ...

    @property
    def listeners(self) -> Sequence[RunListener]:
        """Who is told of every run event as it happens (a live, read-only view)."""
        ...

    @property
    def episodes(self) -> TaskSet:
        """Running episodes."""
        ...

    @property
    def background(self) -> TaskSet:
        """Best-effort work started by episodes (title workflows)."""
        ...

    @property
    def clients(self) -> ClientPool:
        """The LLM clients built from model configs."""
        ...

    @property
    def scopes(self) -> ScopeLocks:
        """One writer per memory scope: what an episode holds while it loads, runs, commits."""
        ...

    @property
    def heartbeat(self) -> Heartbeat:
        """Renews the leases of running runs and held scopes (`lease_ttl`: `heartbeat.ttl`)."""
        ...

    def provenance_tags(self) -> list[str]:
        """The automatic `version:` / `commit:` tags of every run."""
        ...

    @property
    def prices(self) -> Mapping[str, Any]:
        """Price overrides for models genai-prices does not know (`tether.pricing`)."""
        ...

    def awake(self) -> None:
        """An episode starts (in the running loop): the runtime's own beat work starts now if
        it has any and it is not running (the approval-timeout sweep)."""
        ...

    async def answer_workflow(
        self, workflow_run_id: str, paused_run_id: str, outcome: dict[str, Any]
    ) -> None:
        """Paused run `paused_run_id` of workflow run `workflow_run_id` ended: when the
        workflow waits for it, journal `outcome` and resume the workflow (in this process when
        its workflow is here). Never raises: a failure is logged."""
        ...
