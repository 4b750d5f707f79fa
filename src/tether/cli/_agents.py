"""`tether agent list` and `tether agent run ID --input TEXT [--attach PATH] [--scope S] [...]`."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import ConfigError, NoObjectGeneratedError, RegistryError
from ._attach import user_content
from ._errors import (
    CommandLineError,
    Interrupted,
    RunFailedError,
    read_stdin,
    reports_errors,
    start_error,
)
from ._interrupt import CtrlC
from ._models import check_model_option
from ._options import model_option, scope_option
from ._project import GlobalOptions, load_project, options_of, reach_stores, run_async
from ._render import (
    EpisodeRenderer,
    clean,
    compact,
    emit,
    emit_err,
    emit_json,
    format_usage,
    json_error_excerpt,
    key_values,
    table,
)

if TYPE_CHECKING:
    from ..lab import AgentRunResult, AgentStreamHandle, LabAgent, Registry, Runtime
    from ..media import UserContent

__all__ = ["agent_app"]

agent_app = typer.Typer(
    name="agent",
    help="List the project's agents, and run one episode of an agent.",
    no_args_is_help=True,
)

TOOL_CONTEXT_MARK = "(tool-context)"
"""Marks, in `tether agent list`, the agents whose tools come from a ToolProvider."""


def find_agent(registry: Registry, agent_id: str) -> LabAgent[Any]:
    """The registry's agent `agent_id`, or a CommandLineError listing the known ones."""
    try:
        return registry.agent(agent_id)
    except RegistryError as exc:
        raise CommandLineError(
            str(exc), kind="RegistryError", hint="`tether agent list` shows every agent."
        ) from None


def parse_tool_context(agent: LabAgent[Any], text: str | None) -> Any:
    """The `--tool-context` JSON as a value (None when not given).

    Raises:
        CommandLineError: the agent takes no tool context, or the text is not JSON (with the
            position of the error).
    """
    if text is None:
        return None
    if not agent.uses_tool_provider:
        raise CommandLineError(
            f"agent {agent.id!r} takes no --tool-context: its tools are not a ToolProvider",
            hint=f"Drop -c/--tool-context. Agents that take one are marked {TOOL_CONTEXT_MARK} "
            "in `tether agent list`.",
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandLineError(
            f"--tool-context is not valid JSON: {exc.msg} "
            f"(line {exc.lineno}, column {exc.colno})\n{json_error_excerpt(text, exc)}",
            hint='Pass a JSON value, quoted for your shell, e.g. -c \'{"root": "/tmp/work"}\'.',
        ) from None


def read_user_message(text: str, given_as: str = "--input") -> str:
    """The user message given as PROMPT or `--input` (`given_as`); `-` reads it from stdin.

    Raises:
        CommandLineError: the message is empty, or stdin is not UTF-8.
    """
    message = read_stdin() if text == "-" else text
    if not message.strip():
        source = "stdin" if text == "-" else given_as
        raise CommandLineError(
            f"{source} is empty: there is no user message to send",
            hint="Pass the message with --input TEXT (or --input - to read it from stdin).",
        )
    return message


# -- list ------------------------------------------------------------------------------------


@agent_app.command("list")
@reports_errors
def list_agents(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the agents as JSON.")] = False,
) -> None:
    """List the project's agents: id, model and description.

    Agents whose tools come from a ToolProvider are marked (tool-context): they take
    `-c/--tool-context JSON` in `tether agent run`.
    """
    registry = load_project(options_of(ctx))
    agents = [registry.agents[k] for k in sorted(registry.agents)]
    entries = [
        {
            "id": a.id,
            "model": a.model_label,
            "tool_context": a.uses_tool_provider,
            "structured_output": a.output_schema is not None,
            "description": a.description,
        }
        for a in agents
    ]
    if as_json:
        emit_json(entries)
        return
    if not entries:
        emit_err(f"No agents in {registry.config_path}: list them under agents = [...].")
        return
    rows = [
        (
            clean(str(e["id"])) + (f" {TOOL_CONTEXT_MARK}" if e["tool_context"] else ""),
            clean(str(e["model"])),
            clean(str(e["description"])),
        )
        for e in entries
    ]
    emit(table(("ID", "MODEL", "DESCRIPTION"), rows))


# -- run -------------------------------------------------------------------------------------


TITLE_WAIT = 10.0
"""Seconds `agent run` waits, after the answer, for the conversation's title by default."""


@agent_app.command("run")
@reports_errors
def run_agent(
    ctx: typer.Context,
    agent_id: Annotated[
        str, typer.Argument(metavar="ID", help="The agent's id (see `tether agent list`).")
    ],
    prompt: Annotated[
        str | None,
        typer.Argument(
            metavar="PROMPT",
            help="The user message (or give it with --input). '-' reads it from stdin.",
            show_default=False,
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            metavar="TEXT",
            help="The user message, instead of PROMPT. '-' reads it from stdin.",
        ),
    ] = None,
    scope: Annotated[
        str | None,
        scope_option(
            "The conversation (memory scope) to continue or start. Omitted: a new "
            "conversation with a generated scope, printed at the end."
        ),
    ] = None,
    model: Annotated[
        str | None,
        model_option(
            "Run this episode on another model (e.g. openai:gpt-4o-mini); the agent's model "
            "config (base URL, timeouts, ...) still applies."
        ),
    ] = None,
    attach: Annotated[
        list[str] | None,
        typer.Option(
            "--attach",
            "-a",
            metavar="PATH",
            help="Send a file with the message: an image, a PDF or text document, or audio "
            "(the kind is read from the file). Repeat for several.",
        ),
    ] = None,
    tool_context: Annotated[
        str | None,
        typer.Option(
            "--tool-context",
            "-c",
            metavar="JSON",
            help="JSON handed to the agent's ToolProvider (agents marked (tool-context) in "
            "`tether agent list`). Omitted: the provider gets None.",
        ),
    ] = None,
    title_wait: Annotated[
        float,
        typer.Option(
            "--title-wait",
            metavar="SECONDS",
            min=0,
            help="After the answer, wait at most this long for the conversation's title "
            "(agents with a title workflow, on a new conversation); 0 does not wait. Ctrl-C "
            "meanwhile gives up only the title.",
        ),
    ] = TITLE_WAIT,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object at the end (text, output, scope, turns, usage, run "
            'id) instead of streaming; a failure is {"error": {type, message, exit_code}}.',
        ),
    ] = False,
) -> None:
    """Run one episode of agent ID with a user message: PROMPT, or --input TEXT.

    The answer streams to stdout as it arrives; tool calls and guardrail decisions are shown
    on stderr, then the memory scope, turns, usage and run id, as soon as the turn is
    stored. An agent with structured output prints its output as JSON. Ctrl-C cancels the
    episode (exit 130); the steps it completed stay stored, so the conversation can go on
    with --scope. Once the answer is out, Ctrl-C only gives up waiting for the title.
    """
    options = options_of(ctx)
    if scope is not None and not scope.strip():
        raise CommandLineError(
            "--scope is empty", hint="Give a scope name, or omit --scope for a new conversation."
        )
    if prompt is not None and user is not None:
        raise CommandLineError(
            "give the user message once: as PROMPT or with --input, not both",
            hint=f'e.g. `tether agent run {agent_id} "Hello"`.',
        )
    if prompt is None and user is None:
        raise CommandLineError(
            "there is no user message: give PROMPT or --input TEXT",
            hint=f'e.g. `tether agent run {agent_id} "Hello"` (or --input - to read stdin).',
        )
    check_model_option(model)
    registry = load_project(options)
    agent = find_agent(registry, agent_id)
    context = parse_tool_context(agent, tool_context)
    if prompt is not None:
        message = read_user_message(prompt, "PROMPT")
    else:
        message = read_user_message(user or "", "--input")
    content = user_content(message, attach)
    run_async(
        _episode(
            registry.runtime,
            agent,
            options,
            user=content,
            scope=scope,
            model=model,
            tool_context=context,
            title_wait=title_wait,
            as_json=as_json,
        )
    )


async def _follow(handle: AgentStreamHandle[Any], render: EpisodeRenderer) -> AgentRunResult[Any]:
    async for event in handle.full_stream:
        render(event)
    return await handle.result


async def _outcome(handle: AgentStreamHandle[Any]) -> AgentRunResult[Any] | BaseException:
    """How the episode ended, once it has."""
    try:
        return await handle.result
    except BaseException as exc:  # the episode's own failure or cancellation, reported as data
        return exc


async def _episode(
    runtime: Runtime,
    agent: LabAgent[Any],
    options: GlobalOptions,
    *,
    user: UserContent,
    scope: str | None,
    model: str | None,
    tool_context: Any,
    title_wait: float,
    as_json: bool,
    go_on: str | None = None,
) -> None:
    """One episode, streamed and reported. `go_on` is the command that continues the
    conversation after Ctrl-C, with ``{scope}`` for its scope (default: `tether agent run`)."""
    from ..lab import AgentRunResult

    async with runtime:
        await reach_stores(runtime, options)
        try:
            handle = agent.stream(
                user=user, memory_scope=scope, model=model, tool_provider_context=tool_context
            )
        except ConfigError as exc:
            # Found before anything ran: a missing key, an unknown provider, a bad model.
            raise start_error(exc, "run it again") from exc
        structured = agent.output_schema is not None
        render = EpisodeRenderer(stream_text=not (as_json or structured), show_tools=not as_json)
        outcome: AgentRunResult[Any] | BaseException

        def interrupt() -> None:
            # What the cancelled tool calls report is noise once the user pressed Ctrl-C.
            render.show_tools = False
            handle.cancel("interrupted (Ctrl-C)")

        with CtrlC(interrupt) as ctrl_c:
            try:
                outcome = await _follow(handle, render)
            except asyncio.CancelledError:
                ctrl_c.cancelled()
                outcome = await _outcome(handle)
            except Exception as exc:
                outcome = exc
        render.end_line()
        if isinstance(outcome, AgentRunResult):
            # The turn is stored: say so now, then give the title a short grace.
            _report_result(agent, outcome, structured=structured, as_json=as_json)
            if await _await_title(runtime, title_wait) and not as_json:
                store = agent.memory_store or runtime.message_store
                title = await store.get_title(outcome.memory_scope)
                if title is not None:
                    emit_err(key_values([("title", title)]))
            return
    # The runtime is closed: every event of the episode is stored by now.
    run = f"tether runs show {handle.run_id}"
    again = go_on or f"tether agent run {agent.id} --scope {{scope}} --input ..."
    if ctrl_c.fired:
        raise Interrupted(
            f"interrupted: the episode of agent {agent.id!r} was cancelled",
            hint=f"The steps it completed are stored on scope {handle.memory_scope}; go on with "
            f"`{again.format(scope=handle.memory_scope)}`. Its record: `{run}`.",
        )
    detail = ""
    if isinstance(outcome, NoObjectGeneratedError):
        detail = f"\nThe model's text: {compact(outcome.text)}"
    raise RunFailedError(
        f"the episode of agent {agent.id!r} failed: {outcome}{detail}",
        kind=type(outcome).__name__,
        hint=f"Its events: `{run}`.",
    )


async def _await_title(runtime: Runtime, wait: float) -> bool:
    """Wait up to `wait` seconds for the title workflow the episode started; Ctrl-C, or the
    time running out, gives it up (the title stays absent; the turn is done: exit 0). True
    when a title workflow ran to its end."""
    background = runtime.background
    if not len(background):
        return False
    waiting = asyncio.ensure_future(runtime.wait_idle())

    def give_up() -> None:
        waiting.cancel()

    with CtrlC(give_up) as ctrl_c:
        try:
            await asyncio.wait_for(waiting, wait)
            return True
        except TimeoutError:
            reason = f"not done after {wait:g} s"
        except asyncio.CancelledError:
            if not ctrl_c.fired:
                ctrl_c.cancelled()  # asyncio.run cancelled this task: the fallback path
            reason = "interrupted"
    await background.cancel_all()
    emit_err(f"title  given up ({reason})")
    return False


def _report_result(
    agent: LabAgent[Any], result: AgentRunResult[Any], *, structured: bool, as_json: bool
) -> None:
    if as_json:
        emit_json(
            {
                "agent": agent.id,
                "run_id": result.run_id,
                "memory_scope": result.memory_scope,
                "text": result.text,
                "output": result.output,
                "turns": result.turns,
                "usage": dict(result.usage),
                "stop_reason": result.stop_reason,
            }
        )
        return
    if structured:
        emit_json(result.output)
    emit_err(
        key_values(
            [
                ("scope", result.memory_scope),
                ("turns", str(result.turns)),
                ("usage", format_usage(result.usage)),
                ("run", result.run_id),
            ]
        )
    )
