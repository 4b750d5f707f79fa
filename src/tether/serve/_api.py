"""The endpoints that start and steer runs.

| method | path                                   | what                                          |
|--------|----------------------------------------|-----------------------------------------------|
| POST   | /api/agents/{agent_id}/runs            | start an episode → 202 {run_id, scope}        |
| POST   | /api/workflows/{workflow_id}/runs      | start or resume a workflow run → 202 {run_id} |
| GET    | /api/runs/{run_id}/stream              | the run's events as SSE, resumable            |
| POST   | /api/runs/{run_id}/cancel              | cancel a running run → 202                    |
| POST   | /api/runs/{run_id}/signals/{name}      | signal a waiting workflow run → 202 {run_id}  |
| POST   | /api/runs/{run_id}/decisions           | resume a paused agent run → 202 {run_id}      |
| POST   | /api/scopes/{scope}/client-messages    | a client message → the turn it starts         |

A run started here runs in this process, independent of the client that asked for it: the answer
comes once the run is stored (an agent run: before its first step) or its first event is (a
workflow run), so its stream can be read from any worker at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol
from urllib.parse import quote, unquote

from starlette.requests import Request
from starlette.responses import Response

from ..client_messages import frame_client_message, should_run_turn
from ..errors import ClientMessageError, StoreError, TetherError
from ..lab import LabAgent, Registry, Runtime, StartGate
from ..stores.run_store import CancelRequests
from ..web import (
    STOPPING,
    ApiError,
    JSONResponse,
    client_id,
    error_response,
    json_body,
    last_event_id,
)
from ..workflows import Workflow, WorkflowHandle
from ._decisions import decided_by_of, decisions_of
from ._feed import RunEnd, RunFeed
from ._frames import event_messages
from ._media import form_body, user_input
from ._sse import EventStream, sse_message

__all__ = ["RunsApi"]

logger = logging.getLogger("tether.serve")

START_WAIT = 10.0
"""Seconds a start request waits for the run's first stored event before answering anyway."""


HOLD_MAX = 1.0
"""Seconds the episodes of answered starts wait at most while more starts keep coming."""


class _Held:
    """The gates of runs whose starts were answered, let go together once two turns of the
    event loop went by with no new start (a request read in one turn is answered in the next),
    or `HOLD_MAX` after the first of them: a burst of starts is answered first, and its
    episodes' first steps (which, on SQLite, never wait) run after, not between the answers.
    A lone start's episode goes on two turns of the loop after its answer."""

    __slots__ = ("_count", "_gates", "_quiet", "_since")

    def __init__(self) -> None:
        self._gates: list[StartGate] = []
        self._count = 0
        """How many gates the last look found."""
        self._quiet = 0
        """Turns of the loop in a row without a new gate."""
        self._since = 0.0

    def add(self, gate: StartGate) -> None:
        self._gates.append(gate)
        if len(self._gates) == 1:
            loop = asyncio.get_running_loop()
            self._since, self._count, self._quiet = loop.time(), 1, 0
            loop.call_soon(self._look, loop)

    def _look(self, loop: asyncio.AbstractEventLoop) -> None:
        count = len(self._gates)
        self._quiet = self._quiet + 1 if count == self._count else 0
        self._count = count
        if self._quiet < 2 and loop.time() - self._since < HOLD_MAX:
            loop.call_soon(self._look, loop)
            return
        gates, self._gates = self._gates, []
        for gate in gates:
            gate.release()


class _Source(Protocol):
    @property
    def registry(self) -> Registry | None: ...


class _Fixed:
    __slots__ = ("registry",)

    def __init__(self, registry: Registry | None) -> None:
        self.registry = registry


class RunsApi:
    """The run endpoints over one runtime (and the registry that lists what is served)."""

    def __init__(self, runtime: Runtime, registry: Registry | None, feed: RunFeed) -> None:
        self.runtime = runtime
        self.source: _Source = _Fixed(registry)
        """Where the registry comes from (the pages' `RegistrySource` when the app watches the
        project's files)."""
        self.feed = feed
        self.handles: dict[str, Any] = {}
        """Runs executing in this process, by run id: their handles (to cancel them)."""
        self.held = _Held()
        """The episodes of answered starts, until they go on."""

    # -- what is served ----------------------------------------------------------------------

    @property
    def registry(self) -> Registry | None:
        return self.source.registry

    def agents(self) -> Mapping[str, LabAgent[Any]]:
        registry = self.registry
        return registry.agents if registry is not None else self.runtime.agents

    def workflows(self) -> Mapping[str, Workflow[Any, Any]]:
        registry = self.registry
        return registry.workflows if registry is not None else self.runtime.workflows

    def agent(self, agent_id: str) -> LabAgent[Any]:
        agent = self.agents().get(agent_id)
        if agent is None:
            known = ", ".join(sorted(self.agents())) or "none"
            raise ApiError(404, "not_found", f"there is no agent {agent_id!r} (served: {known})")
        return agent

    def workflow(self, workflow_id: str) -> Workflow[Any, Any]:
        workflow = self.workflows().get(workflow_id)
        if workflow is None:
            known = ", ".join(sorted(self.workflows())) or "none"
            raise ApiError(
                404, "not_found", f"there is no workflow {workflow_id!r} (served: {known})"
            )
        return workflow

    # -- starting runs -----------------------------------------------------------------------

    def track(self, run_id: str, handle: Any, task: asyncio.Task[Any]) -> None:
        """Keep a run started in this process until its task ends."""
        self.handles[run_id] = handle
        self.feed.running_here(run_id)

        def ended(done: asyncio.Task[Any]) -> None:
            self.handles.pop(run_id, None)
            error = None if done.cancelled() else done.exception()
            # Reported on the run's stream and in the run store; a store that failed (a full
            # disk) may not hold the run's end, so this process's streams are told here.
            failure = (
                RunEnd("failed", f"{type(error).__name__}: {error}")
                if isinstance(error, StoreError)
                else None
            )
            self.feed.ended_here(run_id, failure)

        task.add_done_callback(ended)

    async def started(
        self, run_id: str, task: asyncio.Task[Any], gate: StartGate | None = None
    ) -> None:
        """Wait for the run to be stored (`gate`: its episode waits there), else for its first
        stored event; or for its end.

        Raises:
            The run's own error, when it failed before storing anything (a busy workflow run,
            a bad resume): the caller answers with it instead of a run id nobody can stream.
        """
        if gate is not None:
            if not gate.stored.done():  # on SQLite it is: the run's first steps never wait
                await asyncio.wait(
                    [gate.stored, task], timeout=START_WAIT, return_when="FIRST_COMPLETED"
                )
            if gate.stored.done():
                return
        else:
            first = self.feed.first_event(run_id)
            try:
                await asyncio.wait([first, task], timeout=START_WAIT, return_when="FIRST_COMPLETED")
            finally:
                self.feed.forget_first(run_id)
            if first.done() and not first.cancelled() and first.result() is not None:
                return
        if task.done() and not task.cancelled():
            # It ended before storing an event: a resume of a run another worker holds, a run
            # that cannot resume. (A completed run resumed ends with no event and no error.)
            error = task.exception()
            if error is not None:
                raise error

    async def start_agent_run(self, request: Request) -> Response:
        agent = self.agent(request.path_params["agent_id"])
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        body = await (form_body(request) if kind == "multipart/form-data" else json_body(request))
        _only(body, {"input", "scope", "context", "tags"})
        options: dict[str, Any] = {**_input_options(body.get("input")), "tags": _tags(body)}
        scope = body.get("scope")
        if scope is not None:
            options["memory_scope"] = client_id(scope, "scope")
        if body.get("context") is not None:
            options["context"] = body["context"]
        return await self.run_agent(agent, options)

    async def run_agent(self, agent: LabAgent[Any], options: dict[str, Any]) -> Response:
        # Answered once the run is stored, before its episode's first step: on SQLite those
        # steps never wait, so a burst of starts would each wait for every episode started
        # before it. The episode goes on once the answer is out (`_Held`).
        gate = StartGate()
        try:
            handle = agent.run_held(gate, **options)
            self.track(handle.run_id, handle, handle.result)
            await self.started(handle.run_id, handle.result, gate)
        finally:
            self.held.add(gate)
        return JSONResponse(
            {
                "run_id": handle.run_id,
                "scope": handle.memory_scope,
                "stream": stream_link(handle.run_id),
            },
            status_code=202,
        )

    async def start_workflow_run(self, request: Request) -> Response:
        workflow = self.workflow(request.path_params["workflow_id"])
        body = await json_body(request)
        _only(body, {"input", "run_id"})
        run_id = body.get("run_id")
        if run_id is not None:
            run_id = client_id(run_id, "run_id")
            await self._check_workflow_run_id(workflow, run_id)
        if "input" not in body:
            if run_id is None:
                raise ApiError(
                    400, "bad_request", f"workflow {workflow.id!r} needs an input to start a run"
                )
            if await self.runtime.workflow_store.get_run(run_id) is None:
                raise ApiError(
                    404,
                    "not_found",
                    f"there is no stored run {run_id!r} to resume; pass an input to start a "
                    "new run under that id",
                )
        # From the check to the handle's tracking nothing awaits: of two starts of one run id
        # in this process, the second sees the first (and gets 409).
        if run_id is not None and run_id in self.handles:
            raise ApiError(
                409,
                "WorkflowRunBusyError",
                f"run {run_id!r} is running here already: follow it at {stream_link(run_id)}",
            )
        # A run another worker holds is a 409 naming it, not a wait in the request.
        if "input" not in body:
            handle: WorkflowHandle[Any] = workflow.run(workflow_run_id=run_id, wait=False)
        else:
            handle = workflow.run(body["input"], workflow_run_id=run_id, wait=False)
        self.track(handle.workflow_run_id, handle, handle.result)
        await self.started(handle.workflow_run_id, handle.result)
        return JSONResponse(
            {
                "run_id": handle.workflow_run_id,
                "stream": stream_link(handle.workflow_run_id),
            },
            status_code=202,
        )

    async def _check_workflow_run_id(self, workflow: Workflow[Any, Any], run_id: str) -> None:
        """One run id, one kind: a client-chosen id already used by another run (an agent run,
        another workflow's run) is a 409 naming that run, never an overwrite."""
        info = await self.runtime.run_store.get_run(run_id)
        if info is not None and (info.kind != "workflow" or info.name != workflow.id):
            raise ApiError(
                409,
                "run_id_taken",
                f"run id {run_id!r} is taken by a {info.kind} run of {info.name!r}; choose "
                "another run_id (or leave it out for a new one)",
            )
        stored = await self.runtime.workflow_store.get_run(run_id)
        if stored is not None and stored.workflow_id != workflow.id:
            raise ApiError(
                409,
                "run_id_taken",
                f"run id {run_id!r} is taken by a run of workflow {stored.workflow_id!r}; "
                "choose another run_id",
            )

    # -- following and steering runs ---------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        run_id = _run_id(request, "/stream")
        after = last_event_id(request)
        store = self.runtime.run_store
        if await store.get_run(run_id) is None:
            if run_id not in self.handles:
                raise ApiError(404, "not_found", f"there is no run {run_id!r}")
            # Started here a moment ago: its record is being written.
            await self.started(run_id, self.handles[run_id].result)
            if await store.get_run(run_id) is None:
                raise ApiError(404, "not_found", f"there is no run {run_id!r}")
        return EventStream(
            self._messages(run_id, after),
            stopping=request.scope.get("state", {}).get(STOPPING),
            farewell=sse_message(
                {
                    "run_id": run_id,
                    "message": "this server is stopping; reconnect (to it or another worker) "
                    "with Last-Event-ID to go on",
                },
                event="server_stopping",
            ),
        )

    async def _messages(self, run_id: str, after: int) -> AsyncIterator[bytes]:
        try:
            async for item in self.feed.follow(run_id, after=after):
                if isinstance(item, RunEnd):
                    yield sse_message(item.to_json(run_id), event="run_ended")
                    return
                async for message in event_messages(self.runtime.run_store, run_id, item):
                    yield message
        except Exception as exc:
            # The client reconnects with Last-Event-ID and gets what it missed.
            logger.exception("the stream of run %s failed", run_id)
            kind = type(exc).__name__ if isinstance(exc, TetherError) else "internal_error"
            yield sse_message(
                {"error": {"type": kind, "message": f"the stream broke: {exc}"}}, event="error"
            )

    async def cancel(self, request: Request) -> Response:
        run_id = _run_id(request, "/cancel")
        handle = self.handles.get(run_id)
        if handle is not None:
            handle.cancel()
            return JSONResponse({"run_id": run_id, "cancelling": True}, status_code=202)
        info = await self.runtime.run_store.get_run(run_id)
        if info is None:
            raise ApiError(404, "not_found", f"there is no run {run_id!r}")
        if info.status != "running":
            raise ApiError(409, "run_ended", f"run {run_id!r} is not running (it is {info.status})")
        store = self.runtime.run_store
        if not isinstance(store, CancelRequests):
            raise ApiError(
                409,
                "not_here",
                f"run {run_id!r} runs in another process and this run store cannot carry a "
                "cancel request to it",
            )
        # The worker that executes the run finds the request on its next sweep.
        if not await store.request_cancel(run_id):
            raise ApiError(409, "run_ended", f"run {run_id!r} is not running any more")
        return JSONResponse({"run_id": run_id, "cancelling": True}, status_code=202)

    async def signal(self, request: Request) -> Response:
        """`{"value": …}` answers the run's `ctx.wait_for(name)`; the run resumes here, and its
        stream (the root run's) goes on."""
        run_id, name = _signal_path(request)
        body = await json_body(request)
        _only(body, {"value"})
        if "value" not in body:
            raise ApiError(
                400, "bad_request", 'the body must be {"value": ...}: the signal\'s value'
            )
        store = self.runtime.workflow_store
        record = await store.get_run(run_id)
        if record is None:
            raise ApiError(404, "not_found", f"there is no workflow run {run_id!r}")
        root_id = record.root_run_id or run_id
        root = record if root_id == run_id else await store.get_run(root_id)
        if root is None:
            raise ApiError(404, "not_found", f"the root of workflow run {run_id!r} is not stored")
        workflow = self.workflow(root.workflow_id)
        if root_id in self.handles:
            raise ApiError(
                409,
                "WorkflowRunBusyError",
                f"run {root_id!r} is running here already: follow it at {stream_link(root_id)}",
            )
        # Refused (409 naming what it waits for, 400 for a value the schema refuses) before
        # anything is stored; once stored, the run is this worker's.
        handle = await workflow.signal(run_id, name, body["value"])
        self.track(handle.workflow_run_id, handle, handle.result)
        await self.started(handle.workflow_run_id, handle.result)
        return JSONResponse(
            {
                "run_id": handle.workflow_run_id,
                "signal": name,
                "stream": stream_link(handle.workflow_run_id),
            },
            status_code=202,
        )

    async def decide(self, request: Request) -> Response:
        """`{"decisions": {call_id: {"action": ...}}, "decided_by"?: str}` decides the calls a
        paused agent run waits for (`tether serve`'s `_decisions`); the run resumes here, and
        its stream goes on (`Last-Event-ID`)."""
        run_id = _run_id(request, "/decisions")
        body = await json_body(request)
        _only(body, {"decisions", "decided_by"})
        decisions = decisions_of(body.get("decisions"))
        decided_by = decided_by_of(body.get("decided_by"))
        info = await self.runtime.run_store.get_run(run_id)
        if info is None:
            raise ApiError(404, "not_found", f"there is no run {run_id!r}")
        if info.kind != "agent":
            raise ApiError(
                409,
                "RunNotPausedError",
                f"run {run_id!r} is a {info.kind} run, not an agent run: a waiting workflow run "
                "takes a signal (POST /api/runs/{run_id}/signals/{name})",
            )
        # Refused (409 naming who resumed it first, 422 for a decision that does not fit the
        # pending calls) before anything is stored; once taken, the run is this worker's.
        handle = await self.agent(info.name).resume_stream(run_id, decisions, decided_by=decided_by)
        self.track(run_id, handle, handle.result)
        return JSONResponse(
            {"run_id": run_id, "decided": sorted(decisions), "stream": stream_link(run_id)},
            status_code=202,
        )

    # -- client messages ---------------------------------------------------------------------

    async def client_message(self, request: Request) -> Response:
        scope = client_id(_path_tail(request, "/client-messages", "/api/scopes/"), "scope")
        body = await json_body(request)
        if "kind" in body:
            message: Any = body
            agent_id = None
        else:
            _only(body, {"message", "agent", "context", "tags"})
            message = body.get("message")
            agent_id = body.get("agent")
            if not isinstance(message, dict):
                raise ApiError(400, "bad_request", "message must be a client message object")
        try:
            runs = should_run_turn(message)
            text = frame_client_message(message) if runs else None
        except ClientMessageError as exc:
            raise ApiError(400, "ClientMessageError", str(exc)) from None
        if text is None:
            # dataModelUpdate and ack: the caller applied it already; no turn, no model call.
            return JSONResponse({"run_id": None, "scope": scope, "applied": True})
        if agent_id is None:
            agent_id = await self._scope_agent(scope)
        if not isinstance(agent_id, str):
            raise ApiError(400, "bad_request", "agent must be an agent id")
        agent = self.agent(agent_id)
        options: dict[str, Any] = {"memory_scope": scope, "user": text, "tags": _tags(body)}
        if body.get("context") is not None:
            options["context"] = body["context"]
        return await self.run_agent(agent, options)

    async def _scope_agent(self, scope: str) -> str:
        """The agent whose prompt the scope pinned (a client message continues its turn)."""
        first = await self.runtime.message_store.load(scope, start=0, end=1)
        if first and first[0].get("role") == "system":
            agent_id = first[0].get("agent_id")
            if isinstance(agent_id, str):
                return agent_id
        raise ApiError(
            400,
            "bad_request",
            f"memory scope {scope!r} has no pinned agent: name the agent with "
            '{"agent": ID, "message": {...}}',
        )


# -- request helpers -------------------------------------------------------------------------


def _only(body: Mapping[str, Any], keys: set[str]) -> None:
    unknown = sorted(set(body) - keys)
    if unknown:
        raise ApiError(
            400, "bad_request", f"unknown field(s) {unknown}; the fields are {sorted(keys)}"
        )


def _input_options(value: Any) -> dict[str, Any]:
    """A run's `input`: a string is the user message; an object holds `user` (a string, or a
    list of strings, text parts and media parts: `tether.serve._media`) and/or `messages`
    (the lab's turn input)."""
    if isinstance(value, str):
        return {"user": value}
    if isinstance(value, dict):
        _only(value, {"user", "messages"})
        options: dict[str, Any] = {}
        if value.get("user") is not None:
            options["user"] = user_input(value["user"])
        if value.get("messages") is not None:
            options["messages"] = value["messages"]
        if options:
            return options
    raise ApiError(
        400,
        "bad_request",
        'input must be the user message (a string) or {"user": str, "messages": [...]}',
    )


def _tags(body: Mapping[str, Any]) -> list[str]:
    tags = body.get("tags")
    if tags is None:
        return []
    if not isinstance(tags, list):
        raise ApiError(400, "bad_request", "tags must be a list of strings")
    return [client_id(t, "a tag", separators=True) for t in tags]


def stream_link(run_id: str) -> str:
    """Where a run's stream is read (the id percent-encoded: `/`, `?`, `#` and `%` too)."""
    return f"/api/runs/{quote(run_id, safe='')}/stream"


def _path_tail(request: Request, suffix: str, prefix: str) -> str:
    """The id between `prefix` and `suffix` in the request's raw path (percent-decoded once),
    so that an id holding `/` (sent as %2F) is read whole."""
    raw = request.scope.get("raw_path")
    root = request.scope.get("root_path", "")
    path = raw.decode("latin-1").split("?", 1)[0] if raw else request.url.path
    if root and path.startswith(root):
        path = path[len(root) :]
    if path.startswith(prefix) and path.endswith(suffix):
        return unquote(path[len(prefix) : len(path) - len(suffix)])
    value = request.path_params.get("scope") or request.path_params.get("run_id") or ""
    return str(value)


def _signal_path(request: Request) -> tuple[str, str]:
    """The run id and the signal name of `/api/runs/{run_id}/signals/{name}` (the id may hold
    an encoded `/`; the name may not)."""
    raw = request.scope.get("raw_path")
    root = request.scope.get("root_path", "")
    path = raw.decode("latin-1").split("?", 1)[0] if raw else request.url.path
    if root and path.startswith(root):
        path = path[len(root) :]
    head, sep, name = path.removeprefix("/api/runs/").rpartition("/signals/")
    if not sep or not head or not name:
        raise ApiError(404, "not_found", "POST /api/runs/{run_id}/signals/{name}")
    return unquote(head), unquote(name)


def _run_id(request: Request, suffix: str) -> str:
    return _path_tail(request, suffix, "/api/runs/")


async def handle_errors(call: Any, request: Request) -> Response:
    try:
        response: Response = await call(request)
    except Exception as exc:
        if not isinstance(exc, ApiError | TetherError):
            logger.exception("%s %s failed", request.method, request.url.path)
        return error_response(exc)
    return response
