"""`POST /api/agents/{agent_id}/ag-ui`: the AG-UI protocol over one episode.

`RunAgentInput` in (validated with the `ag-ui-protocol` package's types), AG-UI events out as
SSE. The rules:

- `threadId` is the memory scope. The input carries the whole conversation as the client holds
  it; only the messages the scope does not hold yet are appended. Stored messages are named
  `tether-{i}` (`i` is the record's index in the scope, which never changes: scopes are append
  only; a tool record's results are `tether-{i}.{k}`), so an input message with such an id is
  held; a client that renamed the messages is matched by content on its leading messages.
- Text streams as `TEXT_MESSAGE_START/CONTENT/END`, the model's reasoning as `REASONING_*`,
  tool calls as `TOOL_CALL_START/ARGS/END` (and the backend's results as `TOOL_CALL_RESULT`); a
  text or reasoning message is always ended before a tool call starts.
- The input's `tools` are front-end tools, the client's to run (external tools): when the model
  calls one, the turn pauses before anything runs it (the episode's run is `paused`, its calls
  pending in the run store), the call goes out as its events, and the AG-UI run finishes with
  the call pending (`RUN_FINISHED`, outcome `success` with `pendingToolCallIds`). The client
  sends the result in its next run on the thread, as a tool message: when tool messages answer
  every call a paused run of the agent on that thread waits for, that run resumes with them
  (`result(content, is_error)` decisions, `decided_by` "ag-ui") and the same turn goes on.
- The run ends with `MESSAGES_SNAPSHOT` (the transcript as the client should now hold it),
  `STATE_SNAPSHOT` (the input's `state` with the session-memory writes of the turn applied) and
  `RUN_FINISHED`, or `RUN_ERROR`.

The input's `context` and `forwardedProps` reach tools as `ctx.context`
(``{"context": [...], "forwarded_props": ..., "state": ...}``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, ClassVar, cast

from .._extras import missing_extra

try:
    from ag_ui.core import (
        AssistantMessage,
        BaseEvent,
        CustomEvent,
        FunctionCall,
        MessagesSnapshotEvent,
        ReasoningEndEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        ReasoningStartEvent,
        RunAgentInput,
        RunErrorEvent,
        RunFinishedEvent,
        RunFinishedSuccessOutcome,
        RunStartedEvent,
        StateSnapshotEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCall,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
        ToolMessage,
        UserMessage,
    )
    from ag_ui.core import Message as AgUiMessage
except ImportError as exc:  # pragma: no cover - the lab extra brings it
    raise missing_extra("the AG-UI endpoint needs the ag-ui-protocol package", "lab") from exc
import pydantic
import pydantic_core
from starlette.requests import Request
from starlette.responses import Response

from ..approvals import Decision, result
from ..errors import ContentError
from ..events import AgentEvent
from ..lab import LabAgent, tool_provider
from ..media import MEDIA_TYPES, check_media_part
from ..session import Message, apply_memory_patch
from ..stores.message_store import StoredRecord
from ..stores.run_store import RunInfo, RunQuery
from ..tools import Tool, define_tool
from ..web import ApiError, client_id, json_body
from ._api import RunsApi
from ._sse import EventStream, sse_message

__all__ = ["AgUiApi", "snapshot_messages"]

_OUR_ID = re.compile(r"^tether-(\d+)(?:\.(\d+))?$")


class AgUiApi:
    """The AG-UI endpoint over the served agents."""

    def __init__(self, runs: RunsApi) -> None:
        self.runs = runs

    async def run(self, request: Request) -> Response:
        agent = self.runs.agent(request.path_params["agent_id"])
        body = await json_body(request)
        try:
            run_input = RunAgentInput.model_validate(body)
        except pydantic.ValidationError as exc:
            raise ApiError(
                400, "bad_request", f"the body is not an AG-UI RunAgentInput: {exc}"
            ) from None
        scope = client_id(run_input.thread_id, "threadId")
        stored = await self.runs.runtime.message_store.load(scope)
        fresh, new = new_messages(stored, run_input.messages)
        return EventStream(self._events(agent, run_input, stored, fresh, new))

    async def _paused_run(
        self, agent: LabAgent[Any], thread: str, fresh: list[Any]
    ) -> tuple[str, dict[str, Decision]] | None:
        """The paused run of `agent` on `thread` whose every pending call has its result among
        the input's new tool messages, and those results as decisions; None when there is none
        (the input then starts a turn of its own)."""
        answers = {m.tool_call_id: m for m in fresh if m.role == "tool"}
        if not answers:
            return None
        store = self.runs.runtime.run_store
        query = RunQuery(kind="agent", name=agent.id, status="paused", memory_scope=thread)
        page = await store.query_runs(query, limit=5)
        for info in page.runs:
            decisions = _answered(info, answers)
            if decisions is not None:
                return info.run_id, decisions
        return None

    async def _events(
        self,
        agent: LabAgent[Any],
        run_input: RunAgentInput,
        stored: list[StoredRecord],
        fresh: list[Any],
        new: list[Message],
    ) -> AsyncIterator[bytes]:
        thread, client_run = run_input.thread_id, run_input.run_id
        yield _sse(RunStartedEvent(thread_id=thread, run_id=client_run))
        state: dict[str, Any] = dict(run_input.state) if isinstance(run_input.state, dict) else {}
        if not new:
            # Nothing the scope does not hold: nothing to answer.
            held = snapshot_messages(stored)
            snapshot = relabel(held, held, run_input.messages, [], [], [])
            yield _sse(MessagesSnapshotEvent(messages=snapshot))
            yield _sse(StateSnapshotEvent(snapshot=state))
            yield _sse(RunFinishedEvent(thread_id=thread, run_id=client_run))
            return
        front = [
            _front_end_tool(t.name, t.description, t.parameters) for t in run_input.tools or []
        ]
        context = {
            "context": [c.model_dump(by_alias=True) for c in run_input.context or []],
            "forwarded_props": run_input.forwarded_props,
            "state": run_input.state,
        }
        tools = _with_tools(agent, front) if front else None
        try:
            paused = await self._paused_run(agent, thread, fresh)
            if paused is not None:
                # The results of the calls a paused run of this thread waits for: it goes on.
                run_id, decisions = paused
                handle = await agent.resume_stream(
                    run_id, decisions, decided_by="ag-ui", context=context, tools=tools
                )
            else:
                options: dict[str, Any] = {
                    "memory_scope": thread,
                    "messages": new,
                    "tags": ["ag-ui"],
                    "context": context,
                }
                if tools is not None:
                    options["tools"] = tools
                handle = agent.stream(**options)
        except Exception as exc:
            yield _sse(RunErrorEvent(message=str(exc), code=type(exc).__name__))
            return
        self.runs.track(handle.run_id, handle, handle.result)
        yield _sse(CustomEvent(name="tether.run", value={"run_id": handle.run_id}))
        out = _Translator(
            {t.name for t in front}, frozenset(paused[1]) if paused is not None else frozenset()
        )
        async for event in handle.full_stream:
            for message in out.translate(event):
                yield _sse(message)
            if event["type"] == "memory":
                apply_memory_patch(state, event["patch"])
        for message in out.close():
            yield _sse(message)
        await asyncio.wait([handle.result])
        if not out.pending:
            failure: BaseException | None = (
                asyncio.CancelledError("the run was cancelled")
                if handle.result.cancelled()
                else handle.result.exception()
            )
            if failure is not None:
                yield _sse(RunErrorEvent(message=str(failure), code=type(failure).__name__))
                return
        transcript = await self.runs.runtime.message_store.load(thread)
        snapshot = relabel(
            snapshot_messages(transcript),
            snapshot_messages(stored),
            run_input.messages,
            fresh,
            out.assistant_ids,
            out.tool_ids,
        )
        if out.pending:
            # The turn stopped at the client's tools: the client keeps what was not stored
            # (the call, and the new input when no step completed before it) and sends it back
            # with the results.
            if len(transcript) == len(stored):
                snapshot.extend(fresh)
            snapshot.append(out.pending_message())
        yield _sse(MessagesSnapshotEvent(messages=snapshot))
        yield _sse(StateSnapshotEvent(snapshot=state))
        outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=out.pending or None)
        yield _sse(RunFinishedEvent(thread_id=thread, run_id=client_run, outcome=outcome))


def _sse(event: BaseEvent) -> bytes:
    try:
        return sse_message(event.model_dump_json(by_alias=True), event=None)
    except (UnicodeEncodeError, pydantic_core.PydanticSerializationError):
        # A lone surrogate in a text: UTF-8 cannot carry it, JSON's escape can.
        return sse_message(event.model_dump(mode="json", by_alias=True), event=None)


# -- the turn's events as AG-UI events -------------------------------------------------------


class _Translator:
    """Harness events in, AG-UI events out, with the protocol's ordering kept."""

    def __init__(self, front_end: set[str], answered: frozenset[str] = frozenset()) -> None:
        self.front_end = front_end
        self.answered = answered
        """The calls whose results the client sent (a resumed run's): not streamed back."""
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        self.text = ""
        self.message_id = _new_id()
        """The assistant message of the current round (parent of its tool calls)."""
        self.open_calls: dict[str, str] = {}
        self.calls: list[tuple[str, str, Any]] = []
        """The current round's calls (id, name, input), for a pending snapshot."""
        self.round_text = ""
        self.pending: list[str] = []
        self.assistant_ids: list[str] = []
        """The ids the run's assistant messages streamed under, in order (the snapshot names
        the stored messages by them)."""
        self.tool_ids: list[str] = []
        """The ids its tool results streamed under, in order."""

    def _used(self) -> None:
        if not self.assistant_ids or self.assistant_ids[-1] != self.message_id:
            self.assistant_ids.append(self.message_id)

    def _end_text(self) -> list[BaseEvent]:
        out = self._end_reasoning()
        if self.text_id is None:
            return out
        out.append(TextMessageEndEvent(message_id=self.text_id))
        self.text_id = None
        return out

    def _end_reasoning(self) -> list[BaseEvent]:
        if self.reasoning_id is None:
            return []
        rid, self.reasoning_id = self.reasoning_id, None
        return [ReasoningMessageEndEvent(message_id=rid), ReasoningEndEvent(message_id=rid)]

    def _start_call(self, call_id: str, name: str) -> list[BaseEvent]:
        out = self._end_text()
        if call_id not in self.open_calls:
            self._used()
            self.open_calls[call_id] = name
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=name, parent_message_id=self.message_id
                )
            )
        return out

    def translate(self, agent_event: AgentEvent) -> list[BaseEvent]:
        event: dict[str, Any] = cast(dict[str, Any], agent_event)  # read by its kind below
        handler = self._HANDLERS.get(event["type"])
        return handler(self, event) if handler is not None else []

    def _thinking(self, event: dict[str, Any]) -> list[BaseEvent]:
        delta = event["text"]
        if not delta:
            return []
        out: list[BaseEvent] = []
        if self.reasoning_id is None:
            out.extend(self._end_text())
            self.reasoning_id = _new_id()
            out.append(ReasoningStartEvent(message_id=self.reasoning_id))
            out.append(ReasoningMessageStartEvent(message_id=self.reasoning_id, role="reasoning"))
        out.append(ReasoningMessageContentEvent(message_id=self.reasoning_id, delta=delta))
        return out

    def _text(self, event: dict[str, Any]) -> list[BaseEvent]:
        delta = event["text"]
        if not delta:
            return []
        out = self._end_reasoning()
        if self.text_id is None:
            self._used()
            self.text_id = self.message_id
            out.append(TextMessageStartEvent(message_id=self.text_id, role="assistant"))
        self.round_text += delta
        out.append(TextMessageContentEvent(message_id=self.text_id, delta=delta))
        return out

    def _tool_input_delta(self, event: dict[str, Any]) -> list[BaseEvent]:
        out = self._start_call(event["id"], event["name"])
        if event["partial"]:
            out.append(ToolCallArgsEvent(tool_call_id=event["id"], delta=event["partial"]))
        return out

    def _tool_use(self, event: dict[str, Any]) -> list[BaseEvent]:
        call_id, name = event["id"], event["name"]
        streamed = call_id in self.open_calls
        out = self._start_call(call_id, name)
        if not streamed:
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(event["input"])))
        out.append(ToolCallEndEvent(tool_call_id=call_id))
        self.open_calls.pop(call_id, None)
        self.calls.append((call_id, name, event["input"]))
        if name in self.front_end:
            self.pending.append(call_id)
        return out

    def _tool_result(self, event: dict[str, Any]) -> list[BaseEvent]:
        if event["id"] in self.pending or event["id"] in self.answered:
            return []
        output = event["output"]
        message_id = _new_id()
        self.tool_ids.append(message_id)
        return [
            ToolCallResultEvent(
                message_id=message_id,
                tool_call_id=event["id"],
                content=output if isinstance(output, str) else json.dumps(output),
                role="tool",
            )
        ]

    def _ended(self, event: dict[str, Any]) -> list[BaseEvent]:
        return self._end_text()

    def _progress(self, event: dict[str, Any]) -> list[BaseEvent]:
        if event["stage"] != "sent":
            return []
        # A new model request: a new assistant message.
        out = self._end_text()
        self.message_id = _new_id()
        self.calls = []
        self.round_text = ""
        return out

    _HANDLERS: ClassVar[dict[str, Callable[[_Translator, dict[str, Any]], list[BaseEvent]]]] = {
        "thinking": _thinking,
        "text": _text,
        "tool_input_delta": _tool_input_delta,
        "tool_use": _tool_use,
        "tool_result": _tool_result,
        "done": _ended,
        "error": _ended,
        "progress": _progress,
    }

    def close(self) -> list[BaseEvent]:
        """End whatever is open (a failed or stopped turn leaves nothing half-open)."""
        out = self._end_text()
        for call_id in list(self.open_calls):
            out.append(ToolCallEndEvent(tool_call_id=call_id))
        self.open_calls.clear()
        return out

    def pending_message(self) -> AssistantMessage:
        """The assistant message that called the client's tools (not stored: the client sends
        it back with the results)."""
        return AssistantMessage(
            id=self.message_id,
            content=self.round_text or None,
            tool_calls=[
                ToolCall(id=cid, function=FunctionCall(name=name, arguments=json.dumps(args)))
                for cid, name, args in self.calls
            ],
        )


def _new_id() -> str:
    return f"msg-{uuid.uuid4().hex}"


# -- front-end tools -------------------------------------------------------------------------


def _front_end_tool(name: str, description: str, parameters: Any) -> Tool:
    """A tool the client runs: an external tool, whose call pauses the turn (the client gets
    the call, and sends its result in its next run)."""
    schema = parameters if isinstance(parameters, dict) else {"type": "object"}
    return define_tool(name=name, description=description, input_schema=schema, external=True)


def _answered(info: RunInfo, answers: dict[str, Any]) -> dict[str, Decision] | None:
    """The decisions for a paused run's calls when the client's tool messages answer each."""
    pending = info.pending
    if not pending or any(p["id"] not in answers for p in pending):
        return None
    return {
        p["id"]: result(
            _text(answers[p["id"]].content), is_error=answers[p["id"]].error is not None
        )
        for p in pending
    }


def _with_tools(agent: LabAgent[Any], front: list[Tool]) -> Any:
    """The agent's tools and the client's, as a run's `tools=`."""
    own = agent.tools
    if own is None:
        return front
    if isinstance(own, list):
        return [*own, *front]
    provider = own

    async def get_tools(context: Any) -> list[Tool]:
        tools: Any = provider.get_tools(context)
        if inspect.isawaitable(tools):
            tools = await tools
        return [*tools, *front]

    return tool_provider(get_tools)


# -- messages --------------------------------------------------------------------------------


def snapshot_messages(stored: Sequence[StoredRecord]) -> list[Any]:
    """A scope's records as AG-UI messages, named `tether-{i}` by record index."""
    out: list[Any] = []
    for i, stored_record in enumerate(stored):
        record: dict[str, Any] = cast(dict[str, Any], stored_record)  # read by role below
        role = record.get("role")
        content: list[Any] = list(record.get("content") or [])
        if role == "user":
            text = "".join(p.get("text", "") for p in content if p.get("type") == "text")
            out.append(UserMessage(id=f"tether-{i}", content=text))
        elif role == "assistant":
            text = "".join(p.get("text", "") for p in content if p.get("type") == "text")
            calls = [
                ToolCall(
                    id=p["id"],
                    function=FunctionCall(name=p["name"], arguments=_arguments(p.get("input"))),
                )
                for p in content
                if p.get("type") == "tool_call"
            ]
            out.append(
                AssistantMessage(id=f"tether-{i}", content=text or None, tool_calls=calls or None)
            )
        elif role == "tool":
            for k, part in enumerate(p for p in content if p.get("type") == "tool_result"):
                output = part.get("output")
                text = output if isinstance(output, str) else json.dumps(output)
                out.append(
                    ToolMessage(
                        id=f"tether-{i}.{k}",
                        tool_call_id=part["id"],
                        content=text,
                        error=text if part.get("is_error") else None,
                    )
                )
    return out


def relabel(
    snapshot: list[Any],
    held: list[Any],
    given: Sequence[AgUiMessage],
    fresh: Sequence[Any],
    assistant_ids: Sequence[str],
    tool_ids: Sequence[str],
) -> list[Any]:
    """`snapshot` (a scope's messages after a run) under the ids the client knows them by:
    what it held and what it sent keep the client's own ids (matched by content, in order),
    and what the run made keeps the ids it streamed under, so a client that merges the
    snapshot by id (as `@ag-ui/client` does) neither duplicates nor reorders a message."""
    relevant = [m for m in given if m.role in ("user", "assistant", "tool")]
    out: list[Any] = []
    for k, message in enumerate(snapshot[: len(held)]):
        if k < len(relevant) and _key(relevant[k]) == _key(message):
            message = message.model_copy(update={"id": relevant[k].id})
        out.append(message)
    sent = list(fresh)
    made_assistant, made_tool = iter(assistant_ids), iter(tool_ids)
    for message in snapshot[len(held) :]:
        new_id = None
        if sent and sent[0].role == message.role and _key(sent[0]) == _key(message):
            new_id = sent.pop(0).id
        elif message.role == "assistant":
            new_id = next(made_assistant, None)
        elif message.role == "tool":
            new_id = next(made_tool, None)
        out.append(message if new_id is None else message.model_copy(update={"id": new_id}))
    return out


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _key(message: Any) -> tuple[Any, ...]:
    """What identifies a message by content (for clients that renamed our messages)."""
    role = message.role
    if role == "user":
        # Text only: a stored user message comes back in a snapshot as its text.
        content = message.content
        if isinstance(content, str):
            return ("user", content)
        return ("user", "".join(p.text for p in content or () if getattr(p, "type", "") == "text"))
    if role == "assistant":
        calls = tuple(c.id for c in message.tool_calls or ())
        return ("assistant", message.content or "", calls)
    if role == "tool":
        return ("tool", message.tool_call_id)
    return (role,)


_KINDS = {media: kind for kind, types in MEDIA_TYPES.items() for media in types}
_MEDIA_CONTENT = {"image": "image", "document": "document", "audio": "audio"}


def user_parts(content: Any) -> list[Any]:
    """A user message's AG-UI content as tether parts: text as text parts; `image` /
    `document` / `audio` content (a `data` source: base64 with its `mimeType`, or a `url`
    source; the protocol's successor of `binary` content) as media parts, checked.

    Raises:
        ApiError: 400 for content tether cannot send (video, a file source it never received,
            an unknown or contradicted media type, data that is not base64).
    """
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[Any] = []
    for i, part in enumerate(content or ()):
        kind = getattr(part, "type", None)
        where = f"user content[{i}]"
        if kind == "text":
            out.append({"type": "text", "text": part.text})
            continue
        if kind in _MEDIA_CONTENT:
            source = part.source
            media_type = source.mime_type or ""
            data = source.value if source.type == "data" else None
            url = source.value if source.type == "url" else None
            name = None
            if data is None and url is None:
                raise ApiError(
                    400,
                    "bad_request",
                    f"{where}: a {source.type!r} source is not one tether can read: send the "
                    "bytes as a data source or an http(s) url",
                )
        else:
            raise ApiError(400, "bad_request", f"{where}: {kind!r} content is not supported")
        media_type = (media_type or "").split(";")[0].strip().lower()
        media = _KINDS.get(media_type)
        if media is None:
            raise ApiError(
                400,
                "bad_request",
                f"{where}: {media_type or 'no'} media type is not one tether sends",
            )
        item: dict[str, Any] = {"type": media, "media_type": media_type}
        if data is not None:
            item["data"] = data
        else:
            item["url"] = url
        if name:
            item["name"] = name
        try:
            out.append(check_media_part(item, where))
        except ContentError as exc:
            raise ApiError(400, "bad_request", str(exc)) from None
    if not out:
        out.append({"type": "text", "text": ""})
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content or ():
        if getattr(part, "type", None) != "text":
            raise ApiError(
                400,
                "bad_request",
                "only text parts are supported in user and tool messages, got a "
                f"{getattr(part, 'type', '?')!r} part",
            )
        parts.append(part.text)
    return "".join(parts)


def new_messages(
    stored: list[StoredRecord], given: Sequence[AgUiMessage]
) -> tuple[list[Any], list[Message]]:
    """The messages of an AG-UI input the scope does not hold yet: as the client sent them,
    and as tether messages (system and developer messages dropped: the system prompt is the
    agent's; a call without its result in the input dropped: it would dangle)."""
    fresh = _unheld(stored, given)
    names = _call_names(stored)
    answered = {m.tool_call_id for m in fresh if m.role == "tool"}
    out: list[dict[str, Any]] = []
    for message in fresh:
        if message.role == "user":
            out.append({"role": "user", "content": user_parts(message.content)})
        elif message.role == "assistant":
            parts: list[Any] = []
            if message.content:
                parts.append({"type": "text", "text": message.content})
            for call in message.tool_calls or ():
                if call.id not in answered:
                    continue  # a call without a result would leave the transcript dangling
                names[call.id] = call.function.name
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.id,
                        "name": call.function.name,
                        "input": _parse_arguments(call.function.arguments),
                    }
                )
            if parts:
                out.append({"role": "assistant", "content": parts})
        elif message.role == "tool":
            name = names.get(message.tool_call_id)
            if name is None:
                continue  # the result of a call nobody made
            result = {
                "type": "tool_result",
                "id": message.tool_call_id,
                "name": name,
                "output": _text(message.content),
                "is_error": message.error is not None,
            }
            if out and out[-1]["role"] == "tool":
                out[-1]["content"].append(result)
            else:
                out.append({"role": "tool", "content": [result]})
    # The lab checks each message's shape again when the run starts.
    return fresh, cast(list[Message], out)


def _unheld(stored: list[StoredRecord], given: Sequence[AgUiMessage]) -> list[Any]:
    """The user, assistant and tool messages of `given` the scope does not hold yet: the
    leading ones that match the stored transcript (by id or, under the client's own ids, by
    content), and any other under one of our `tether-N` ids."""
    relevant = [m for m in given if m.role in ("user", "assistant", "tool")]
    known = snapshot_messages(stored) if stored else []
    k = 0
    while (
        k < len(relevant)
        and k < len(known)
        and (relevant[k].id == known[k].id or _key(relevant[k]) == _key(known[k]))
    ):
        k += 1
    fresh = []
    for message in relevant[k:]:
        match = _OUR_ID.match(message.id)
        if match and int(match.group(1)) < len(stored):
            continue
        fresh.append(message)
    return fresh


def _call_names(stored: list[StoredRecord]) -> dict[str, str]:
    """Tool name by call id for the calls in the stored transcript."""
    names: dict[str, str] = {}
    for stored_record in stored:
        for part in cast(dict[str, Any], stored_record).get("content") or []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                names[part["id"]] = part["name"]
    return names


def _parse_arguments(raw: str) -> Any:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        raise ApiError(
            400, "bad_request", f"a tool call's arguments are not JSON: {raw[:200]!r}"
        ) from None
    return value
