"""Agents and workflows as tools, and an agent as a workflow: what `Runtime.tool_from_agent`,
`Runtime.tool_from_workflow` and `Runtime.workflow_from_agent` return."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import pydantic

from ..context import RunContext
from ..errors import ConfigError, WorkflowInputError
from ..tools import Tool, define_tool
from ..workflows import Workflow, WorkflowContext, current_run
from ._agent import LabAgent
from ._callers import tool_call
from ._output import jsonable

In = TypeVar("In")
Out = TypeVar("Out")


class WorkflowFactory(Protocol):
    """What makes the workflow of `workflow_from_agent` (a `Runtime`)."""

    def create_workflow(
        self, id: str, run: Callable[[In, WorkflowContext[In]], Awaitable[Out]]
    ) -> Workflow[In, Out]: ...


__all__ = [
    "ToolCallInfo",
    "WorkflowFactory",
    "tool_from_agent",
    "tool_from_workflow",
    "workflow_from_agent",
]

_TOOL_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")


class ToolCallInfo:
    """What `map_run` / `map_input` receive beside the tool's arguments."""

    __slots__ = ("ctx", "tool_ctx")

    def __init__(self, ctx: WorkflowContext[Any] | None, tool_ctx: RunContext) -> None:
        self.ctx = ctx
        """The workflow run the tool runs inside, or None outside any workflow."""
        self.tool_ctx = tool_ctx
        """The tool call's own context (`context`, `signal`, `services`, ...)."""


def tool_from_agent(
    agent: LabAgent[Any],
    *,
    description: str | None = None,
    name: str | None = None,
    input_schema: Any = None,
    map_run: Callable[[Any, ToolCallInfo], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
    | None = None,
) -> Tool:
    """A tool that runs one episode of `agent` and returns its output.

    Without `input_schema` the tool takes `{"user": str}` and each call is a new
    conversation. With one (a pydantic model or a JSON Schema dict), `map_run(args, info)`
    receives the validated arguments (a model instance for a pydantic schema) and returns
    the run options (`memory_scope`, `user`, `messages`, `tags`, ...). `info.ctx` is the
    enclosing workflow run, or None. The caller's run `context` is passed on unless
    `map_run` sets `context` itself; aborting the outer turn cancels the inner episode.
    """
    if not isinstance(agent, LabAgent):
        raise ConfigError(f"tool_from_agent needs a lab agent, got {agent!r:.80}")
    schema, model = _tool_schema(input_schema, default=_USER_SCHEMA)
    if input_schema is None and map_run is None:

        def default_map(args: Any, info: ToolCallInfo) -> Mapping[str, Any]:
            return {"user": args["user"]}

        map_run = default_map
    elif map_run is None:
        raise ConfigError(
            f"tool_from_agent({agent.id!r}): with an input_schema, pass map_run to turn "
            "the arguments into run options"
        )
    mapper = map_run

    async def execute(value: Any, ctx: RunContext) -> Any:
        args = model.model_validate(value) if model is not None else value
        options = mapper(args, ToolCallInfo(current_run(), ctx))
        if asyncio.iscoroutine(options) or isinstance(options, Awaitable):
            options = await options
        if not isinstance(options, Mapping):
            raise ConfigError(f"map_run of tool {tool_name!r} must return a dict of run options")
        options = dict(options)
        options.setdefault("context", ctx.context)
        with tool_call(ctx.tool_call_id):
            handle = agent.run(**options)
        remove = ctx.signal.add_callback(handle.cancel) if ctx.signal is not None else None
        try:
            result = await handle.result
        finally:
            if remove is not None:
                remove()
        return jsonable(result.output)

    tool_name = name or _tool_name(agent.id)
    return define_tool(
        name=tool_name,
        description=description or agent.description or f"Run one episode of the {agent.id} agent.",
        input_schema=schema,
        execute=execute,
    )


def tool_from_workflow(
    workflow: Workflow[Any, Any],
    *,
    description: str | None = None,
    name: str | None = None,
    input_schema: Any = None,
    map_input: Callable[[Any, ToolCallInfo], Any] | None = None,
) -> Tool:
    """A tool that runs `workflow` and returns its output. The tool's arguments are the
    run's input, or `map_input(args, info)` turns them into it. Called inside a workflow
    run, the run nests under it."""
    if not isinstance(workflow, Workflow):
        raise ConfigError(f"tool_from_workflow needs a workflow, got {workflow!r:.80}")
    schema, model = _tool_schema(input_schema, default={"type": "object"})

    async def execute(value: Any, ctx: RunContext) -> Any:
        args = model.model_validate(value) if model is not None else value
        if map_input is not None:
            run_input = map_input(args, ToolCallInfo(current_run(), ctx))
            if asyncio.iscoroutine(run_input):
                run_input = await run_input
        else:
            run_input = jsonable(args)
        with tool_call(ctx.tool_call_id):
            handle = workflow.run(run_input, signal=ctx.signal)
        return await handle.result

    return define_tool(
        name=name or _tool_name(workflow.id),
        description=description or f"Run the {workflow.id} workflow.",
        input_schema=schema,
        execute=execute,
    )


def workflow_from_agent(
    runtime: WorkflowFactory, agent: LabAgent[Any], *, id: str
) -> Workflow[str, Any]:
    """A workflow that takes a user message (a string), runs one episode of `agent` as a
    journaled step on a scope private to the run, and returns the agent's output."""
    if not isinstance(agent, LabAgent):
        raise ConfigError(f"workflow_from_agent needs a lab agent, got {agent!r:.80}")

    async def run(user: str, ctx: WorkflowContext[str]) -> Any:
        if not isinstance(user, str):
            raise WorkflowInputError(
                f"workflow {id!r} takes a user message (a string), got {type(user).__name__}"
            )

        async def episode() -> Any:
            handle = agent.run(memory_scope=ctx.run_local_scope(agent.id), user=user)
            return jsonable((await handle.result).output)

        # Step names may not hold '#' or '/'; agent ids may.
        return await ctx.step(quote(agent.id, safe=""), episode)

    return runtime.create_workflow(id, run)


_USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"user": {"type": "string", "description": "The message to send"}},
    "required": ["user"],
}


def _tool_schema(
    input_schema: Any, *, default: dict[str, Any]
) -> tuple[dict[str, Any], type[pydantic.BaseModel] | None]:
    if input_schema is None:
        return default, None
    if isinstance(input_schema, dict):
        return input_schema, None
    if isinstance(input_schema, type) and issubclass(input_schema, pydantic.BaseModel):
        schema = input_schema.model_json_schema()
        schema.pop("title", None)
        return schema, input_schema
    raise ConfigError(
        "input_schema must be a pydantic model class or a JSON Schema dict, "
        f"got {input_schema!r:.80}"
    )


def _tool_name(id: str) -> str:
    return _TOOL_NAME_BAD.sub("_", id)[:64] or "agent"
