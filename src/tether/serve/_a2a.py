"""Every served agent as an A2A agent (the Agent2Agent protocol, 1.0, JSON-RPC binding).

| method | path                                        | what                               |
|--------|---------------------------------------------|------------------------------------|
| GET    | /a2a/{agent_id}/.well-known/agent-card.json | the agent's card                   |
| POST   | /a2a/{agent_id}                             | JSON-RPC: SendMessage,             |
|        |                                             | SendStreamingMessage (SSE),        |
|        |                                             | GetTask, CancelTask                |

`{base}/a2a/{agent_id}` is the agent's A2A URL: a client given it reads the card at the
specification's well-known path under it, and the card names the same URL as its JSON-RPC
interface. The rules:

- A task is one run (its id is the run id) and `contextId` is the memory scope: a message
  without one starts a new scope (its id comes back as the task's `contextId`), a message with
  one continues that conversation as a new task. The task's history is read from the run store
  (the run's committed user and assistant records), so `GetTask` answers from any worker.
- A message's parts become the turn's user message: text as text, a file (`raw` bytes or an
  http(s) `url`) of an image, document or audio type as a media part, `data` as a text part
  holding its JSON. A file of another type is `ContentTypeNotSupportedError` (-32005).
- The answer is the artifact `answer`: streamed as `TaskArtifactUpdateEvent`s (one per text
  delta, `append` after the first), then a `TaskStatusUpdateEvent` with the final state. A run
  that waits for a person (paused) or a signal is `input-required`; one whose process died is
  `failed`.
- `CancelTask` cancels the run (here, or in the worker that runs it through the run store's
  cancel requests); a run that already ended is `TaskNotCancelableError` (-32002).
- The access rules are the app's: the token gate, the Host allow-list and the body limit apply
  to these paths as to every other (the card declares the bearer scheme when a token is set).

Only the 1.0 method names are answered; a 0.3 name (`message/send` ...) or an `A2A-Version`
other than 1.x is `VersionNotSupportedError` (-32009) naming what to send instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._version import __version__
from ..a2a._skills import declared_skills
from ..a2a._wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_METHODS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSION,
    STATES,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    TERMINAL_STATES,
    UNSUPPORTED_OPERATION,
    VERSION_HEADER,
    VERSION_NOT_SUPPORTED,
    a2a_parts,
    rpc_error,
    rpc_result,
    tether_parts,
)
from ..errors import (
    A2AProtocolError,
    ContentError,
    DecisionError,
    RunNotPausedError,
    TetherError,
)
from ..lab import LabAgent
from ..media import MEDIA_TYPES
from ..run_events import AGENT_FAILED, AGENT_FINISHED, AGENT_MESSAGES_COMMITTED, AGENT_TEXT_DELTA
from ..stores.run_store import CancelRequests, RunInfo, StoredEvent
from ..tools import Tool
from ..web import STOPPING, ApiError, JSONResponse, client_id, json_body
from ._api import RunsApi
from ._decisions import decided_by_of, decisions_of
from ._feed import PAGE, RunEnd, _reader
from ._sse import EventStream, sse_message

__all__ = ["A2AApi", "agent_card"]

logger = logging.getLogger("tether.serve")

CANCEL_WAIT = 5.0
"""Seconds `CancelTask` waits for a run of this process to end before it answers."""

_INPUT_MODES = [
    "text/plain",
    "application/json",
    *sorted(t for types in MEDIA_TYPES.values() for t in types),
]


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _a2a_url(request: Request, agent_id: str) -> str:
    base = str(request.base_url).rstrip("/")
    return f"{base}/a2a/{agent_id}"


def agent_card(agent: LabAgent[Any], url: str, *, bearer: bool) -> dict[str, Any]:
    """The A2A card of `agent`, served at `url`: its skills are the declared ones
    (`tether.a2a.declare_skills`), else one per tool of a fixed tool list, else one for the
    agent itself."""
    skills = declared_skills(agent)
    if skills is None:
        tools = agent.tools
        if isinstance(tools, list) and tools:
            skills = [_tool_skill(t) for t in tools]
        else:
            skills = [
                {
                    "id": agent.id,
                    "name": agent.id,
                    "description": agent.description or f"Talk to agent {agent.id}.",
                    "tags": ["tether"],
                }
            ]
    card: dict[str, Any] = {
        "name": agent.id,
        "description": agent.description or f"The tether agent {agent.id}.",
        "version": __version__,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}
        ],
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": _INPUT_MODES,
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    }
    if bearer:
        card["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
        card["securityRequirements"] = [{"schemes": {"bearer": {"list": []}}}]
    return card


def _tool_skill(tool: Tool) -> dict[str, Any]:
    return {
        "id": tool.name,
        "name": tool.name,
        "description": tool.description or tool.name,
        "tags": ["tool"],
    }


def _timestamp(at: float | None) -> str | None:
    if at is None:
        return None
    stamp = dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class A2AApi:
    """The A2A endpoints over the served agents (the run API's runtime, registry and feed)."""

    def __init__(self, runs: RunsApi, *, bearer: bool = False) -> None:
        self.runs = runs
        self.bearer = bearer

    # -- the card ---------------------------------------------------------------------------

    async def card(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        agent = self.runs.agent(agent_id)
        return JSONResponse(agent_card(agent, _a2a_url(request, agent_id), bearer=self.bearer))

    # -- JSON-RPC ---------------------------------------------------------------------------

    async def rpc(self, request: Request) -> Response:
        agent = self.runs.agent(request.path_params["agent_id"])
        try:
            body: Any = await json_body(request)
        except ApiError as exc:
            if exc.status != 400:
                raise
            return JSONResponse(rpc_error(None, PARSE_ERROR, str(exc)))
        request_id = body.get("id") if isinstance(body, dict) else None
        try:
            method, params = self._envelope(request, body)
            if method == "SendStreamingMessage":
                return await self.stream_message(request, agent, request_id, params)
            if method == "SendMessage":
                result = await self.send_message(agent, params)
            elif method == "GetTask":
                result = await self.get_task(agent, params)
            else:
                result = await self.cancel_task(agent, params)
        except _RpcError as exc:
            return JSONResponse(rpc_error(request_id, exc.code, str(exc)))
        except A2AProtocolError as exc:
            return JSONResponse(rpc_error(request_id, exc.code or INVALID_PARAMS, str(exc)))
        except ContentError as exc:
            return JSONResponse(rpc_error(request_id, INVALID_PARAMS, str(exc)))
        except TetherError as exc:
            # The run could not start (a bad option, a store that failed): the caller's answer.
            message = f"{type(exc).__name__}: {exc}"
            return JSONResponse(rpc_error(request_id, INTERNAL_ERROR, message))
        return JSONResponse(rpc_result(request_id, result))

    def _envelope(self, request: Request, body: Any) -> tuple[str, dict[str, Any]]:
        if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
            raise _RpcError(INVALID_REQUEST, 'a JSON-RPC 2.0 request has "jsonrpc": "2.0"')
        method = body.get("method")
        if not isinstance(method, str):
            raise _RpcError(INVALID_REQUEST, "a JSON-RPC request names its method (a string)")
        version = request.headers.get(VERSION_HEADER, "").strip()
        if version and version.split(".")[0] != PROTOCOL_VERSION.split(".")[0]:
            raise _RpcError(
                VERSION_NOT_SUPPORTED,
                f"A2A version {version!r} is not served here: send {VERSION_HEADER}: "
                f"{PROTOCOL_VERSION}",
            )
        if method in LEGACY_METHODS:
            raise _RpcError(
                VERSION_NOT_SUPPORTED,
                f"{method!r} is an A2A 0.3 method; this server speaks A2A {PROTOCOL_VERSION}: "
                f"call {LEGACY_METHODS[method]!r} with {VERSION_HEADER}: {PROTOCOL_VERSION}",
            )
        if method not in ("SendMessage", "SendStreamingMessage", "GetTask", "CancelTask"):
            raise _RpcError(
                METHOD_NOT_FOUND,
                f"there is no method {method!r} here (served: SendMessage, "
                "SendStreamingMessage, GetTask, CancelTask)",
            )
        params = body.get("params")
        if not isinstance(params, dict):
            raise _RpcError(INVALID_PARAMS, f"{method} takes its params as an object")
        return method, params

    # -- sending ----------------------------------------------------------------------------

    async def _start(self, agent: LabAgent[Any], params: Mapping[str, Any]) -> Any:
        """Start the run a SendMessage asks for: its handle."""
        message = params.get("message")
        if not isinstance(message, dict):
            raise _RpcError(INVALID_PARAMS, "params.message must be a message object")
        if message.get("role") not in (None, "ROLE_USER", "user"):
            raise _RpcError(INVALID_PARAMS, "params.message.role must be ROLE_USER")
        parts = tether_parts(message.get("parts"))
        context_id = message.get("contextId") or None
        task_id = message.get("taskId") or None
        if task_id is not None:
            return await self._answer(agent, str(task_id), context_id, message.get("parts"))
        user: Any
        if all(p["type"] == "text" for p in parts) and len(parts) == 1:
            user = parts[0]["text"]
        else:
            user = parts
        options: dict[str, Any] = {"user": user, "tags": ["a2a"]}
        if context_id is not None:
            try:
                options["memory_scope"] = client_id(context_id, "contextId")
            except ApiError as exc:
                raise _RpcError(INVALID_PARAMS, exc.message) from None
        handle = agent.run(**options)
        self.runs.track(handle.run_id, handle, handle.result)
        await self.runs.started(handle.run_id, handle.result)
        return handle

    async def _answer(self, agent: LabAgent[Any], task_id: str, context_id: Any, parts: Any) -> Any:
        """A message naming a task. A paused run's task (input-required) is answered with a
        data part ``{"decisions": {call_id: {"action": …}, …}}`` (the body of ``POST
        /api/runs/{id}/decisions``), which resumes the run: its handle. Anything else is
        refused: the task's context is not the message's, the task is not waiting for input,
        or the message carries no decisions."""
        info = await self._run(agent, task_id)
        if context_id is not None and context_id != info.memory_scope:
            raise _RpcError(
                INVALID_PARAMS,
                f"task {task_id!r} belongs to context {info.memory_scope!r}, not {context_id!r}",
            )
        state = STATES.get(info.status, "TASK_STATE_WORKING")
        if info.status != "paused":
            raise _RpcError(
                UNSUPPORTED_OPERATION,
                f"task {task_id!r} is {state} and takes no further messages; send the message "
                f"without taskId (contextId {info.memory_scope!r}) to go on in the same "
                "conversation",
            )
        given = [
            p["data"]
            for p in (parts if isinstance(parts, list) else [])
            if isinstance(p, dict) and isinstance(p.get("data"), dict) and "decisions" in p["data"]
        ]
        if len(given) != 1:
            waits = ", ".join(f"{c['id']} ({c['name']}, {c['kind']})" for c in info.pending)
            raise _RpcError(
                INVALID_PARAMS,
                f"task {task_id!r} waits for decisions on {waits}: answer it with one data part "
                '{"decisions": {call_id: {"action": "approve" | "deny" | "result", ...}}}',
            )
        try:
            decisions = decisions_of(given[0]["decisions"])
            decided_by = decided_by_of(given[0].get("decided_by"))
        except ApiError as exc:
            raise _RpcError(INVALID_PARAMS, exc.message) from None
        try:
            handle = await agent.resume_stream(
                task_id, decisions, decided_by=decided_by if decided_by is not None else "a2a"
            )
        except (RunNotPausedError, DecisionError) as exc:
            raise _RpcError(INVALID_PARAMS, f"{type(exc).__name__}: {exc}") from None
        self.runs.track(task_id, handle, handle.result)
        return handle

    async def send_message(self, agent: LabAgent[Any], params: Mapping[str, Any]) -> Any:
        handle = await self._start(agent, params)
        configuration = params.get("configuration") or {}
        if not (isinstance(configuration, dict) and configuration.get("returnImmediately")):
            with contextlib.suppress(Exception):
                await asyncio.shield(handle.result)
        history = configuration.get("historyLength") if isinstance(configuration, dict) else None
        return {"task": await self.task(agent, handle.run_id, _history_length(history))}

    async def stream_message(
        self, request: Request, agent: LabAgent[Any], request_id: Any, params: Mapping[str, Any]
    ) -> Response:
        handle = await self._start(agent, params)
        first = await self.task(agent, handle.run_id, None, live=True)
        return EventStream(
            self._stream(request_id, handle.run_id, first),
            stopping=request.scope.get("state", {}).get(STOPPING),
        )

    async def _stream(
        self, request_id: Any, run_id: str, task: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        context_id = task["contextId"]
        head = {"taskId": run_id, "contextId": context_id}
        artifact = f"{run_id}-answer"
        yield sse_message(rpc_result(request_id, {"task": task}))
        streamed = False
        store = self.runs.runtime.run_store
        try:
            async for item in self.runs.feed.follow(run_id):
                if isinstance(item, RunEnd):
                    pending = None
                    if item.status == "paused":
                        paused = await store.get_run(run_id)
                        pending = paused.pending if paused is not None else None
                    status = self._status(
                        item.status, item.error, run_id, context_id, None, pending
                    )
                    if not streamed and item.status == "completed":
                        final = await self.task(None, run_id, 0)
                        for done in final.get("artifacts", []):
                            update = {**head, "artifact": done, "lastChunk": True}
                            yield sse_message(rpc_result(request_id, {"artifactUpdate": update}))
                    update = {**head, "status": status}
                    yield sse_message(rpc_result(request_id, {"statusUpdate": update}))
                    return
                chunks: list[bytes] = []
                for event in item:
                    kind = event.type if isinstance(event, StoredEvent) else event["type"]
                    if kind != AGENT_TEXT_DELTA:
                        continue
                    text = (await _event_data(store, run_id, event)).get("text")
                    if not text:
                        continue
                    piece = {
                        "artifactId": artifact,
                        "name": "answer",
                        "parts": [{"text": text}],
                    }
                    update = {**head, "artifact": piece, "append": streamed}
                    streamed = True
                    chunks.append(sse_message(rpc_result(request_id, {"artifactUpdate": update})))
                if chunks:
                    yield b"".join(chunks)
        except Exception as exc:
            logger.exception("the A2A stream of run %s failed", run_id)
            yield sse_message(
                rpc_error(request_id, INTERNAL_ERROR, f"the stream broke: {exc}"), event="error"
            )

    # -- reading tasks ----------------------------------------------------------------------

    async def _run(self, agent: LabAgent[Any] | None, task_id: Any) -> RunInfo:
        if not isinstance(task_id, str) or not task_id:
            raise _RpcError(INVALID_PARAMS, "a task id is a non-empty string")
        info = await self.runs.runtime.run_store.get_run(task_id)
        if info is None or info.kind != "agent" or (agent is not None and info.name != agent.id):
            raise _RpcError(TASK_NOT_FOUND, f"there is no task {task_id!r} of this agent")
        return info

    async def get_task(self, agent: LabAgent[Any], params: Mapping[str, Any]) -> Any:
        return await self.task(
            agent, params.get("id"), _history_length(params.get("historyLength"))
        )

    def _status(
        self,
        status: str,
        error: str | None,
        run_id: str,
        context_id: str | None,
        at: Any = None,
        pending: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        state = STATES.get(status, "TASK_STATE_WORKING")
        out: dict[str, Any] = {"state": state}
        stamp = _timestamp(at)
        if stamp is not None:
            out["timestamp"] = stamp
        if status == "paused" and pending:
            # What the task waits for: the calls, as a data part the client answers.
            waits = ", ".join(f"{c['name']} ({c['kind']})" for c in pending)
            out["message"] = {
                "messageId": f"{run_id}-status",
                "role": "ROLE_AGENT",
                "parts": [
                    {"text": f"waiting for a decision on {waits}"},
                    {"data": {"pending": pending}},
                ],
                "taskId": run_id,
                "contextId": context_id or "",
            }
        elif error and state != "TASK_STATE_COMPLETED":
            out["message"] = {
                "messageId": f"{run_id}-status",
                "role": "ROLE_AGENT",
                "parts": [{"text": error}],
                "taskId": run_id,
                "contextId": context_id or "",
            }
        return out

    async def task(
        self,
        agent: LabAgent[Any] | None,
        task_id: Any,
        history_length: int | None,
        *,
        live: bool = False,
    ) -> dict[str, Any]:
        """The task of run `task_id` as the run store holds it: status, the run's committed
        user and assistant records as history, the final answer as the `answer` artifact."""
        info = await self._run(agent, task_id)
        run_id, context_id = info.run_id, info.memory_scope or ""
        runtime = self.runs.runtime
        messages, start, finished = await self._records(run_id)
        resolver = runtime.blob_resolver(runtime.message_store)
        if resolver is not None and messages:
            messages = await resolver.resolve(messages)
        history: list[dict[str, Any]] = []
        last_answer: list[dict[str, Any]] = []
        for i, record in enumerate(messages):
            role = record.get("role")
            if role not in ("user", "assistant"):
                continue
            parts = a2a_parts(record.get("content") or [])
            if not parts:
                continue
            if role == "assistant":
                last_answer = parts
            history.append(
                {
                    "messageId": f"{run_id}-{start + i}",
                    "role": "ROLE_USER" if role == "user" else "ROLE_AGENT",
                    "parts": parts,
                    "contextId": context_id,
                    "taskId": run_id,
                }
            )
        status = "running" if live else info.status
        task: dict[str, Any] = {
            "id": run_id,
            "contextId": context_id,
            "status": self._status(
                status,
                info.error,
                run_id,
                context_id,
                info.ended_at or info.started_at,
                info.pending,
            ),
        }
        if status == "completed":
            answer = last_answer
            if not answer and finished is not None and finished.get("text"):
                answer = [{"text": finished["text"]}]
            if answer:
                task["artifacts"] = [
                    {"artifactId": f"{run_id}-answer", "name": "answer", "parts": answer}
                ]
        if history_length is not None:
            history = history[len(history) - history_length :] if history_length else []
        if history:
            task["history"] = history
        return task

    async def _records(self, run_id: str) -> tuple[list[Any], int, dict[str, Any] | None]:
        """The run's committed records (and the scope index of the first), and the data of its
        end event, read a page at a time; only those events are parsed."""
        store = self.runs.runtime.run_store
        read = _reader(store)
        messages: list[Any] = []
        start: int | None = None
        finished: dict[str, Any] | None = None
        after = 0
        while True:
            page = await read(run_id, after=after, limit=PAGE)
            for event in page:
                kind = event.type if isinstance(event, StoredEvent) else event["type"]
                if kind == AGENT_MESSAGES_COMMITTED:
                    data = await _event_data(store, run_id, event)
                    if start is None:
                        start = int(data.get("start", 0))
                    messages.extend(data.get("messages") or [])
                elif kind in (AGENT_FINISHED, AGENT_FAILED):
                    finished = await _event_data(store, run_id, event)
            if len(page) < PAGE:
                return messages, start or 0, finished
            last = page[-1]
            after = last.seq if isinstance(last, StoredEvent) else last["seq"]

    # -- cancelling -------------------------------------------------------------------------

    async def cancel_task(self, agent: LabAgent[Any], params: Mapping[str, Any]) -> Any:
        info = await self._run(agent, params.get("id"))
        run_id = info.run_id
        state = STATES.get(info.status, "TASK_STATE_WORKING")
        handle = self.runs.handles.get(run_id)
        if handle is not None:
            handle.cancel()
            await asyncio.wait([handle.result], timeout=CANCEL_WAIT)
        elif state in TERMINAL_STATES or info.status != "running":
            raise _RpcError(
                TASK_NOT_CANCELABLE, f"task {run_id!r} is {state} already: nothing to cancel"
            )
        else:
            store = self.runs.runtime.run_store
            if not isinstance(store, CancelRequests) or not await store.request_cancel(run_id):
                raise _RpcError(
                    TASK_NOT_CANCELABLE,
                    f"task {run_id!r} runs in another process that this run store cannot "
                    "reach, or it ended meanwhile",
                )
        return await self.task(agent, run_id, None)


def _history_length(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _RpcError(INVALID_PARAMS, "historyLength must be a non-negative integer")
    return value


async def _event_data(store: Any, run_id: str, event: Any) -> dict[str, Any]:
    """The `data` of a live or stored event (one stored in pieces is read whole, once)."""
    if not isinstance(event, StoredEvent):
        data: dict[str, Any] = event["data"]
        return data
    if event.data is not None:
        parsed: dict[str, Any] = json.loads(event.data)
        return parsed
    (whole,) = await store.events(run_id, after=event.seq - 1, limit=1)
    full: dict[str, Any] = whole["data"]
    return full
