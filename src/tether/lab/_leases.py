"""One writer per memory scope, and heartbeats for running runs.

`ScopeLocks.hold(store, scope, run_id)` is what an episode runs its load, model calls and commits
inside: an in-process `asyncio.Lock` per scope (episodes of this process queue on it in order),
then the store's scope lease (`ScopeLeases`: a row taken in one short transaction), so episodes
on one scope run one after another in this process and across processes and machines. Nothing
holds a transaction or a connection across a model call; the lease is renewed by the runtime's
heartbeat and expires if its process dies. Waiting is bounded by `scope_lock_timeout`, then the
episode fails with `ScopeBusyError` naming the scope and the holder. An episode started from
inside a run that already holds its scope (an agent tool running an episode on its own scope)
fails at once with it: waiting would be waiting for itself.

`Heartbeat` is one task per runtime that renews, every sixth of `lease_ttl`, every lease the
runtime holds: the scope leases of running episodes and the run leases of running episodes and
workflow runs in the RunStore (one write per store per beat). A run whose process died stops
being renewed and reads as "interrupted" once its lease expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeGuard

from .._eager import step
from .._heartbeat import Heartbeat as _Beat
from .._owners import holder_gone, owner_name
from ..errors import LeaseLostError, ScopeBusyError
from ..stores.message_store import MessageStore, ScopeLeases, WatchesScopes
from ..stores.run_store import RunStore

__all__ = [
    "LEASE_TTL",
    "SCOPE_LOCK_TIMEOUT",
    "Heartbeat",
    "ScopeHold",
    "ScopeHolding",
    "ScopeLocks",
    "scope_owner",
]

logger = logging.getLogger("tether.lab")

LEASE_TTL = 30.0
"""Seconds a lease (a scope's, a run's) lasts unless renewed; renewed every sixth of that."""
SCOPE_LOCK_TIMEOUT = 600.0
"""Seconds an episode waits for its memory scope before `ScopeBusyError`."""

_FIRST_POLL = 0.01
"""Seconds before an episode waiting for a scope another process holds tries again, in a store
that cannot tell it when the scope is released (doubling each time up to `_MAX_POLL`)."""
_MAX_POLL = 0.25

_HELD: ContextVar[frozenset[tuple[int, str]]] = ContextVar(
    "tether_held_scopes", default=frozenset()
)
"""The scopes (store id, scope) the running episode and the episodes around it hold."""


def scope_owner(run_id: str) -> str:
    """The owner name of an episode's scope lease: `host:pid.start:run_id` (unique per
    episode, saying where the holder runs; see `tether._owners`)."""
    return owner_name(run_id)


class Heartbeat(_Beat):
    """Renews the leases a runtime holds while it holds them (see the module docstring): the
    run leases of each run store in one write a beat, each scope lease on its own."""

    def __init__(self, ttl: float) -> None:
        super().__init__(ttl)
        self._runs: dict[int, set[str]] = {}
        self._lost: set[tuple[int, str]] = set()

    def hold_run(self, store: RunStore, run_id: str) -> None:
        """Renew the lease of `run_id` in `store` until `drop_run`."""
        run_ids = self._runs.get(id(store))
        if run_ids is None:
            run_ids = self._runs[id(store)] = set()

            async def renew() -> bool:
                if run_ids:
                    await store.renew_leases(sorted(run_ids), lease_ttl=self.ttl)
                return True

            self.hold(("runs", id(store)), renew)
        run_ids.add(run_id)

    def drop_run(self, store: RunStore, run_id: str) -> None:
        run_ids = self._runs.get(id(store))
        if run_ids is not None:
            run_ids.discard(run_id)
            if not run_ids:
                del self._runs[id(store)]
                self.drop(("runs", id(store)))

    def hold_scope(self, store: ScopeLeases, scope: str, owner: str) -> None:
        """Renew `owner`'s lease on `scope` until `drop_scope`."""
        key = (id(store), scope)

        async def renew() -> bool:
            return await store.renew_scope(scope, owner, ttl=self.ttl)

        async def lost() -> None:
            logger.error(
                "the lease of memory scope %r was taken over: this process did not renew it "
                "for longer than it lasts",
                scope,
            )
            self._lost.add(key)

        self.hold(("scope", *key), renew, lost)

    def drop_scope(self, store: ScopeLeases, scope: str) -> None:
        self.drop(("scope", id(store), scope))
        self._lost.discard((id(store), scope))

    def lost_scope(self, store: ScopeLeases, scope: str) -> bool:
        """Whether a renewal found the lease on `scope` taken by another owner."""
        return (id(store), scope) in self._lost

    def keep(self, key: str, job: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Run `job()` at every beat from now until `drop(key)` or `aclose()`, whether or not
        any lease is held (the runtime's approval-timeout sweep). Its failure is logged and it
        runs again at the next beat. Each run is in a context of its own: what it starts is
        nobody's child, whichever episode or workflow first started the beat."""
        if self.holds(key) and self.beating():
            return

        async def beat() -> bool:
            try:
                await asyncio.get_running_loop().create_task(
                    job(), name=f"tether-lab:{key}", context=contextvars.Context()
                )
            except Exception:
                logger.warning("the %s on the runtime's beat failed", key, exc_info=True)
            return True

        self.hold(key, beat)

    async def aclose(self) -> None:
        self._runs.clear()
        await super().aclose()


class ScopeHold:
    """An episode's hold on its scope, for as long as the episode runs."""

    __slots__ = ("_heartbeat", "_leases", "owner", "released", "scope")

    def __init__(
        self, scope: str, owner: str, heartbeat: Heartbeat, leases: ScopeLeases | None
    ) -> None:
        self.scope = scope
        self.owner = owner
        self._heartbeat = heartbeat
        self._leases = leases
        self.released = False
        """The episode's last write gave the lease back (`TurnEnds`): nothing to release."""

    def given_back(self) -> None:
        """The lease was given back in the episode's last write: no renewal, no release."""
        self.released = True
        if self._leases is not None:
            self._heartbeat.drop_scope(self._leases, self.scope)

    @property
    def lease(self) -> str | None:
        """The owner the episode's writes to the scope carry (`MessageStore.append(lease=)`),
        so that the store refuses them once another episode took the scope over; None for a
        store without scope leases."""
        return self.owner if self._leases is not None else None

    def check(self) -> None:
        """Raise LeaseLostError when a renewal found the scope's lease taken over (this
        process did not renew it for longer than it lasts, and another episode took the
        scope): what the episode would write now could interleave with that episode's turn.
        The store refuses such a write by itself; this only stops the episode sooner."""
        if self._leases is not None and self._heartbeat.lost_scope(self._leases, self.scope):
            raise LeaseLostError("memory scope", self.scope)


class ScopeLocks:
    """One writer per memory scope (see the module docstring)."""

    def __init__(self, heartbeat: Heartbeat, *, timeout: float = SCOPE_LOCK_TIMEOUT) -> None:
        self.heartbeat = heartbeat
        self.timeout = timeout
        self._locks: dict[tuple[int, str], tuple[asyncio.Lock, list[str]]] = {}
        """(store id, scope) -> its lock, and the owners holding or waiting for it (the first
        holds it)."""

    def hold(self, store: MessageStore, scope: str, run_id: str) -> ScopeHolding:
        """Hold `scope` of `store` for an `async with` block (which gets the `ScopeHold`): wait
        for this process's other episodes on it, then for its lease; give both back at the
        end, however the block ends.

        Raises (on entering the block):
            ScopeBusyError: the scope stayed held for `timeout` seconds, or the caller already
                holds it (an episode inside an episode on the same scope).
        """
        return ScopeHolding(self, store, scope, run_id)

    async def _lease(self, store: ScopeLeases, scope: str, owner: str, deadline: float) -> None:
        """Take the scope's lease; while another process holds it, try again each time the
        store says it was released (`WatchesScopes`), else polling with a backoff."""
        holder = await self._acquire(store, scope, owner)
        if holder is None:  # the usual case: taken at once, nothing to watch or wait for
            self.heartbeat.hold_scope(store, scope, owner)
            return
        async with contextlib.AsyncExitStack() as stack:
            delay = _FIRST_POLL
            watching = False
            woken: asyncio.Event | None = None
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._busy(scope, holder)
                if not watching and isinstance(store, WatchesScopes):
                    # Watched from now on, then tried once more: a release in between is
                    # seen by that try, and any later one wakes us.
                    watching = True
                    woken = await stack.enter_async_context(store.watch_scope(scope))
                elif woken is not None:
                    # Tried again when the holder releases the scope, and at its renewal beat
                    # (a holder that died, or a lease that expired, sends no notice).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), min(left, self.heartbeat.ttl / 6))
                    woken.clear()
                else:
                    await asyncio.sleep(min(delay, left))
                    delay = min(delay * 2, _MAX_POLL)
                holder = await self._acquire(store, scope, owner)
                if holder is None:
                    self.heartbeat.hold_scope(store, scope, owner)
                    return

    async def _acquire(self, store: ScopeLeases, scope: str, owner: str) -> str | None:
        """One try at the scope's lease: None when taken, else the owner holding it."""
        try:
            holder = await store.acquire_scope(scope, owner, ttl=self.heartbeat.ttl)
        except BaseException:
            # Cancelled (or failed) after the server may have granted the lease: give
            # it back rather than leave the scope held until the lease expires.
            await _release(store, scope, owner)
            raise
        if holder is not None and holder_gone(holder):
            # Its process on this host is gone and will never renew the lease: take
            # the scope now rather than when the lease expires.
            holder = await store.acquire_scope(scope, owner, ttl=self.heartbeat.ttl, replace=holder)
        return holder

    def _busy(self, scope: str, holder: str) -> ScopeBusyError:
        return ScopeBusyError(
            f"memory scope {scope!r} stayed busy for {self.timeout:g} s (scope_lock_timeout): "
            f"episode {holder} holds it. Try again when it is done, or raise "
            "Runtime(scope_lock_timeout=...)",
            scope=scope,
            holder=holder,
        )


class ScopeHolding:
    """`ScopeLocks.hold(...)`: the block's hold on a scope, taken on entry (`ScopeHold`),
    given back on exit."""

    __slots__ = (
        "_hold",
        "_key",
        "_leases",
        "_lock",
        "_locks",
        "_queue",
        "_token",
        "run_id",
        "scope",
        "store",
    )

    def __init__(self, locks: ScopeLocks, store: MessageStore, scope: str, run_id: str) -> None:
        self._locks = locks
        self.store = store
        self.scope = scope
        self.run_id = run_id

    async def __aenter__(self) -> ScopeHold:
        locks, store, scope = self._locks, self.store, self.scope
        key = self._key = (id(store), scope)
        if key in _HELD.get():
            raise ScopeBusyError(
                f"memory scope {scope!r} is held by the run this episode was started from (an "
                "agent tool or workflow step running an episode on the scope it is already "
                "running on would wait for itself); give the inner episode a scope of its own",
                scope=scope,
            )
        owner = scope_owner(self.run_id)
        deadline = time.monotonic() + locks.timeout
        entry = locks._locks.get(key)
        if entry is None:
            entry = locks._locks[key] = (asyncio.Lock(), [])
        lock, queue = self._lock, self._queue = entry
        queue.append(owner)
        try:
            if len(queue) > 1:  # another episode of this process holds or waits for it
                try:
                    await asyncio.wait_for(lock.acquire(), locks.timeout)
                except TimeoutError:
                    raise locks._busy(scope, queue[0]) from None
            else:
                await lock.acquire()  # nobody else: taken at once, no timer task to start
        except BaseException:
            self._dequeue(owner)
            raise
        try:
            leases = self._leases = store if _has_leases(store) else None
            if leases is not None:
                await locks._lease(leases, scope, owner, deadline)
        except BaseException:
            lock.release()
            self._dequeue(owner)
            raise
        self._token = _HELD.set(_HELD.get() | {key})
        hold = self._hold = ScopeHold(scope, owner, locks.heartbeat, leases)
        return hold

    async def __aexit__(self, *exc: object) -> None:
        hold, leases = self._hold, self._leases
        try:
            _HELD.reset(self._token)
            if leases is not None and not hold.released:
                self._locks.heartbeat.drop_scope(leases, self.scope)
                await _release(leases, self.scope, hold.owner)
        finally:
            self._lock.release()
            self._dequeue(hold.owner)

    def _dequeue(self, owner: str) -> None:
        queue = self._queue
        queue.remove(owner)
        if not queue:
            self._locks._locks.pop(self._key, None)


async def _release(store: ScopeLeases, scope: str, owner: str) -> None:
    """Give the lease back even when the episode is being cancelled (the release is one short
    write; if it fails, the lease expires on its own)."""
    release = step(store.release_scope(scope, owner))  # no task when it never waits
    try:
        if release.done():
            release.result()
            return
        await asyncio.shield(release)
    except asyncio.CancelledError:
        await asyncio.wait([release])
        raise
    except Exception:
        logger.warning("could not release the lease of scope %r", scope, exc_info=True)


_LEASES_BY_TYPE: dict[type, bool] = {}


def _has_leases(store: object) -> TypeGuard[ScopeLeases]:
    """`isinstance(store, ScopeLeases)`, worked out once per store class (a Protocol check
    looks up each method every time, which a turn need not pay for)."""
    kind = type(store)
    known = _LEASES_BY_TYPE.get(kind)
    if known is None:
        known = isinstance(store, ScopeLeases)
        if not hasattr(kind, "__getattr__"):  # a delegating wrapper answers per instance
            _LEASES_BY_TYPE[kind] = known
    return known
