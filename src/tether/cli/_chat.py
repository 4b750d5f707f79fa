"""`tether chat AGENT [--scope S]`: an interactive conversation with an agent on a memory scope.

On a terminal it is a prompt with line editing and history (readline, kept in
`.tether/chat_history`), the answer streamed and rendered as Markdown by rich; with stdin or
stdout not a terminal it is plain text: each input line (or block) is a message, each answer is
written as it streams. Either way:

- a line ending in a backslash goes on on the next line; a line of three double quotes
  (``\"\"\"``) opens a block that the next such line closes (multi-line messages);
- Ctrl-C during an answer cancels that turn (the conversation keeps what was stored) and the
  chat goes on; Ctrl-C at the prompt clears the line; Ctrl-D (end of input) leaves;
- ``/new`` starts a new conversation, ``/scope`` says which one this is and ``/scope NAME``
  moves to another, ``/exit`` leaves, ``/help`` lists them; ``//text`` sends ``/text``.

The turns run on one event loop that lives as long as the chat (`asyncio.Runner`), so the
runtime's stores and model clients are opened once; the prompt is read between turns, with the
loop idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from ..errors import ConfigError
from ._agents import find_agent
from ._attach import attachment
from ._errors import CommandLineError, reports_errors, start_error
from ._interrupt import CtrlC
from ._models import check_model_option
from ._options import model_option, scope_option
from ._project import GlobalOptions, load_project, options_of, reach_stores
from ._render import EpisodeRenderer, clean, clean_lines, compact, emit_err

if TYPE_CHECKING:
    from ..approvals import Decision
    from ..events import HandoffEvent, MediaPart, PendingCall
    from ..lab import AgentRunResult, AgentStreamHandle, LabAgent, Runtime

__all__ = ["chat"]

HELP = """\
/new           start a new conversation
/scope         show this conversation's scope; /scope NAME moves to NAME
/summary       show the newest summary of older turns (a summarize history policy)
/attach PATH   send a file (image, PDF or text document, audio) with your next message
/exit          leave (so do Ctrl-D and /quit)
/help          this list
A line ending in \\ goes on; \"\"\" opens and closes a multi-line message.
Ctrl-C cancels the answer being written; at the prompt it clears the line."""

BLOCK = '"""'
HISTORY = Path(".tether") / "chat_history"


@reports_errors
def chat(
    ctx: typer.Context,
    agent_id: Annotated[
        str, typer.Argument(metavar="AGENT", help="The agent's id (see `tether agent list`).")
    ],
    scope: Annotated[
        str | None,
        scope_option("The conversation (memory scope) to continue or start. Omitted: a new one."),
    ] = None,
    model: Annotated[
        str | None,
        model_option(
            "Chat on another model (e.g. openai:gpt-4o-mini); the agent's model config still "
            "applies."
        ),
    ] = None,
) -> None:
    """Chat with agent AGENT: each message is an episode on one memory scope.

    On a terminal the answer streams as rendered Markdown; in a pipe, as plain text (each
    input line is a message). A line ending in a backslash continues; a line of three
    double quotes opens and closes a multi-line message. Ctrl-C cancels the answer being
    written, not the chat; Ctrl-D leaves. Commands: /new, /scope [NAME], /exit, /help.
    """
    run_chat(ctx, agent_id, scope, model)


def run_chat(ctx: typer.Context, agent_id: str, scope: str | None, model: str | None) -> None:
    options = options_of(ctx)
    if scope is not None and not scope.strip():
        raise CommandLineError("--scope is empty", hint="Give a scope name, or omit --scope.")
    check_model_option(model)
    registry = load_project(options)
    agent = find_agent(registry, agent_id)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    session = ChatSession(registry.runtime, agent, options, scope=scope, model=model)
    with asyncio.Runner() as runner, _restored_sigint():
        runner.run(session.open())
        try:
            if interactive:
                _interactive(runner, session)
            else:
                _piped(runner, session, sys.stdin)
        finally:
            runner.run(session.close())


@dataclass(eq=False)
class ChatSession:
    """The conversation: its agent, its scope (None until a new one has its first turn), and
    the runtime the turns run on."""

    runtime: Runtime
    agent: LabAgent[Any]
    options: GlobalOptions
    _: KW_ONLY
    scope: str | None
    model: str | None
    attached: list[MediaPart] = field(default_factory=list)
    """Files `/attach` read, sent with the next message."""
    answering: str | None = None
    """The agent that answered last (None: the chat's own agent, so far)."""
    paused: AgentRunResult[Any] | None = None
    """The last turn, when it paused on calls that wait for the person's decisions."""

    async def open(self) -> None:
        await self.runtime.__aenter__()
        await reach_stores(self.runtime, self.options)

    async def close(self) -> None:
        await self.runtime.__aexit__(None, None, None)

    async def stored_messages(self) -> int:
        if self.scope is None:
            return 0
        return await self.runtime.message_store.length(self.scope)

    async def turn(
        self,
        text: str,
        show: Callable[[str], None],
        done: Callable[[], None],
        pause: Callable[[], None] | None = None,
    ) -> None:
        """One episode: `show` gets each text delta; Ctrl-C cancels it (and only it). `pause`
        is called before a line about a tool call or a guardrail is printed (a redrawn
        answer ends its drawing there, so what it said stays on the screen once). A turn
        that pauses on calls waiting for a decision leaves its result in `paused`."""
        try:
            handle: AgentStreamHandle[Any] = self.agent.stream(
                user=[text, *self.attached] if self.attached else text,
                memory_scope=self.scope,
                model=self.model,
            )
        except ConfigError as exc:  # a missing key, an unknown provider, a bad model
            raise start_error(exc, "chat again") from exc
        self.attached = []  # they went with this message
        if self.agent.handoffs and self.scope is not None:
            await self._say_holder()
        self.scope = handle.memory_scope
        await self._follow(handle, show, done, pause)

    async def resume(
        self,
        decisions: Mapping[str, Decision],
        show: Callable[[str], None],
        done: Callable[[], None],
        pause: Callable[[], None] | None = None,
    ) -> None:
        """Continue the paused turn with the person's decisions (as `turn` follows it)."""
        from ..errors import DecisionError, ResumeError

        paused, self.paused = self.paused, None
        if paused is None:
            return
        try:
            handle: AgentStreamHandle[Any] = await self.agent.resume_stream(
                paused.run_id, decisions, decided_by=_decider()
            )
        except DecisionError as exc:  # nothing was taken: an answer of the wrong shape
            emit_err(f"Error: {exc}; decide again.")
            self.paused = paused
            return
        except ResumeError as exc:  # decided elsewhere meanwhile
            emit_err(f"Error: the turn could not go on: {type(exc).__name__}: {exc}")
            return
        await self._follow(handle, show, done, pause)

    async def _follow(
        self,
        handle: AgentStreamHandle[Any],
        show: Callable[[str], None],
        done: Callable[[], None],
        pause: Callable[[], None] | None,
    ) -> None:
        from ..lab import AgentRunResult

        tools = EpisodeRenderer(stream_text=False, show_tools=True)
        outcome: AgentRunResult[Any] | BaseException

        def interrupt() -> None:
            tools.show_tools = False
            handle.cancel("cancelled (Ctrl-C)", keep_input=True)

        with CtrlC(interrupt) as ctrl_c:
            try:
                async for event in handle.full_stream:
                    if event["type"] == "text" and event["text"]:
                        show(event["text"])
                        continue
                    if pause is not None and event["type"] in ("tool_use", "guardrail", "handoff"):
                        pause()
                    if event["type"] == "handoff":
                        self._say_handoff(event)
                        continue
                    tools(event)
                outcome = await handle.result
            except asyncio.CancelledError:
                ctrl_c.cancelled()
                outcome = await _outcome(handle)
            except Exception as exc:
                outcome = exc
        # The turn is over: the next Ctrl-C is the prompt's again, not "exit at once".
        _default_sigint()
        done()
        if ctrl_c.fired:
            emit_err("(cancelled: your message stays in the conversation, marked cancelled)")
        elif isinstance(outcome, AgentRunResult):
            if outcome.paused:
                self.paused = outcome
                return
            if self.agent.output_schema is not None and outcome.output is not None:
                show(_as_json(outcome.output))
                done()
            if self.agent.history:
                await self._say_summarized(outcome.run_id)
        else:
            emit_err(f"Error: the turn failed: {type(outcome).__name__}: {outcome}")

    async def _say_holder(self) -> None:
        """Who answers this turn, when it is not who answered last: the agent holding the
        scope (a turn sent to the chat's agent goes to it)."""
        assert self.scope is not None
        try:
            held = await self.agent.held_by(self.scope)
        except Exception:  # saying who answers is a courtesy: the turn still runs
            return
        if held is not None and held != (self.answering or self.agent.id):
            self.answering = held
            emit_err(f"[{clean(held)} is answering]")

    def _say_handoff(self, event: HandoffEvent) -> None:
        """A handoff in the turn: who answers from here on."""
        self.answering = event["to_agent"]
        reason = f": {event['reason']}" if event.get("reason") else ""
        emit_err(
            clean(f"[{event['from_agent']} hands over to {event['to_agent']}{reason}]")
            + f"\n[{clean(event['to_agent'])} is answering]"
        )

    async def _say_summarized(self, run_id: str) -> None:
        """The marker of a turn that summarized older ones (its `agent_summarized` event)."""
        from ..run_events import AGENT_SUMMARIZED

        for event in await self.runtime.run_store.events(run_id):
            if event["type"] == AGENT_SUMMARIZED:
                covers = event["data"].get("covers") or ["?", "?"]
                emit_err(
                    f"(older turns, records {covers[0]}-{covers[1]}, were summarized here; "
                    "later turns are sent the summary instead: /summary shows it)"
                )

    async def newest_summary(self) -> str | None:
        """The text of the scope's newest summary record, or None: read backwards from the
        end a page at a time, to the first summary."""
        if self.scope is None:
            return None
        store = self.runtime.message_store
        end = await store.length(self.scope)
        while end > 0:
            start = max(end - 256, 0)
            for record in reversed(await store.load(self.scope, start=start, end=end)):
                if record.get("role") == "summary":
                    content: Any = record.get("content") or [{}]
                    return str(content[0].get("text", ""))
            end = start
        return None


async def _outcome(handle: AgentStreamHandle[Any]) -> AgentRunResult[Any] | BaseException:
    try:
        return await handle.result
    except BaseException as exc:
        return exc


def _as_json(value: Any) -> str:
    import pydantic_core

    return pydantic_core.to_json(value, indent=2).decode()


# -- the two front ends ----------------------------------------------------------------------


def _piped(runner: asyncio.Runner, session: ChatSession, stream: TextIO) -> None:
    """Plain text: every message read from `stream`, every answer written as it streams."""
    out = sys.stdout

    def show(text: str) -> None:
        out.write(clean_lines(text) if out.isatty() else text)
        out.flush()

    def done() -> None:
        out.write("\n")
        out.flush()

    def read(prompt: str) -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line = stream.readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")

    for message in _messages(iter(stream.readline, "")):
        action = _command(runner, session, message)
        if action == "exit":
            return
        if action is None:
            runner.run(session.turn(_unescaped(message), show, done))
            _decide_while_paused(runner, session, read, show, done)


def _interactive(runner: asyncio.Runner, session: ChatSession) -> None:
    """A prompt with history, and the answer rendered as Markdown as it streams."""
    from rich.console import Console

    console = Console(highlight=False)
    _load_history()
    count = runner.run(session.stored_messages())
    where = f"scope {session.scope} ({count} messages stored)" if session.scope else "a new scope"
    emit_err(
        f"Chatting with {session.agent.id} on {clean(where)}. /help for commands, Ctrl-D leaves."
    )
    while True:
        try:
            message = _read_message(lambda: input("you> "), lambda: input("...  "))
        except KeyboardInterrupt:
            sys.stdout.write("\n")
            continue
        except EOFError:
            sys.stdout.write("\n")
            break
        if message is None:
            continue
        action = _command(runner, session, message)
        if action == "exit":
            break
        if action == "done":
            continue
        message = _unescaped(message)
        answer = _MarkdownAnswer(console)
        try:
            with _no_echo():
                runner.run(session.turn(message, answer.show, answer.done, answer.done))
            _decide_while_paused(runner, session, input, answer.show, answer.done)
        finally:
            answer.done()
    _save_history()


@contextlib.contextmanager
def _no_echo() -> Iterator[None]:
    """The terminal echoes no keys while an answer streams: the `^C` a Ctrl-C echoes (or a key
    typed meanwhile) would land after the answer's last line, which fills the terminal's width,
    wrap to a new line, and leave the redrawn answer on the screen twice."""
    try:
        import termios
    except ImportError:  # not POSIX
        yield
        return
    fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    if fd is None:
        yield
        return
    before = termios.tcgetattr(fd)
    quiet = [*before]
    quiet[3] &= ~(termios.ECHO | termios.ECHOCTL)
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, before)


class _MarkdownAnswer:
    """An answer drawn as Markdown while it streams (rich's Live redraws it in place), at most
    ten times a second: parsing the whole answer on every delta would cost quadratic time."""

    INTERVAL = 0.1

    def __init__(self, console: Any) -> None:
        from rich.live import Live

        self._live = Live(console=console, auto_refresh=False, transient=False)
        self._parts: list[str] = []
        self._drawn = 0.0

    def show(self, text: str) -> None:
        if not self._parts:
            self._live.start()
        self._parts.append(text)
        now = time.monotonic()
        if now - self._drawn >= self.INTERVAL:
            self._draw()
            self._drawn = now

    def done(self) -> None:
        if self._parts:
            self._draw()
            self._live.stop()
        self._parts = []
        self._drawn = 0.0

    def _draw(self) -> None:
        from rich.markdown import Markdown

        self._live.update(Markdown(clean_lines("".join(self._parts))), refresh=True)


# -- decisions on a paused turn ----------------------------------------------------------------


def _decide_while_paused(
    runner: asyncio.Runner,
    session: ChatSession,
    read: Callable[[str], str],
    show: Callable[[str], None],
    done: Callable[[], None],
) -> None:
    """Ask about each call the turn waits for, and go on with the answers, until the turn
    ends (it may pause again). Ctrl-C or the end of input at a question leaves the run paused."""
    while session.paused is not None:
        paused = session.paused
        try:
            decisions = {call["id"]: _ask(call, read) for call in paused.pending}
        except (EOFError, KeyboardInterrupt):
            session.paused = None
            emit_err(
                f"\n(run {paused.run_id} stays paused, waiting for decisions on "
                f"{', '.join(c['id'] for c in paused.pending)})"
            )
            return
        runner.run(session.resume(decisions, show, done, done))


def _ask(call: PendingCall, read: Callable[[str], str]) -> Decision:
    """The person's decision on one pending call: y approves, e edits the input (JSON), an
    external call (or one asking for input) takes a result; anything else denies."""
    from ..approvals import approve, deny

    if "reason" in call:
        emit_err(f"({compact(call['reason'])})")
    what = f"{clean(call['name'])} {compact(call['input'])}"
    if call["kind"] == "input":  # a tool asks the person for a value (an MCP elicitation)
        emit_err(f"{clean(call['name'])} asks: {clean(call.get('message', ''))}")
        properties = call.get("schema", {}).get("properties")
        names = properties if isinstance(properties, dict) else {}
        fields = ", ".join(clean(str(k)) for k in names)
        # Text that is not JSON is refused on resume, naming what is asked for.
        return _answer(read(f"answer {{{fields}}} (a JSON object; empty declines)> "), "declined")
    if call["kind"] != "approval":
        return _answer(read(f"result of {what} (JSON or text; empty denies)> "), "denied")
    answer = read(f"allow {what}? [y/N/e(dit)] ").strip().lower()
    if answer in ("y", "yes"):
        return approve()
    if answer not in ("e", "edit"):
        return deny("denied in tether chat")
    while True:
        edited = read("input JSON> ")
        try:
            return approve(input=json.loads(edited))
        except json.JSONDecodeError as exc:
            emit_err(f"That is not JSON ({exc.msg}); type the input again.")


def _answer(answer: str, refusal: str) -> Decision:
    """A typed result: its JSON value, else its text; empty: a denial (`refusal` in tether chat)."""
    from ..approvals import deny, result

    if not answer.strip():
        return deny(f"{refusal} in tether chat")
    try:
        return result(json.loads(answer))
    except json.JSONDecodeError:
        return result(answer)


def _decider() -> str | None:
    """Who decides in this chat (recorded with each decision): the login name, if known."""
    try:
        return f"{getpass.getuser()} (tether chat)"
    except (OSError, KeyError):
        return None


def _read_message(first: Callable[[], str], more: Callable[[], str]) -> str | None:
    """One message from the prompt: continuation lines and blocks joined; None when empty."""
    lines = list(_messages(_prompted(first, more), interactive=True))
    return lines[0] if lines else None


def _prompted(first: Callable[[], str], more: Callable[[], str]) -> Iterator[str]:
    yield first() + "\n"
    while True:
        yield more() + "\n"


def _messages(lines: Iterator[str], *, interactive: bool = False) -> Iterator[str]:
    """Messages from input lines: a trailing backslash joins the next line, a `\"\"\"` line
    opens and closes a block; empty messages are skipped. Interactive: stop after one message
    (or after one empty line, which yields nothing)."""
    pending: list[str] = []
    in_block = False
    for raw in lines:
        line = raw.rstrip("\r\n")
        if in_block:
            if line.strip() != BLOCK:
                pending.append(line)
                continue
            in_block = False  # the block's closing line ends the message
        elif not pending and line.strip() == BLOCK:
            in_block = True
            continue
        elif line.endswith("\\"):
            pending.append(line[:-1])
            continue
        else:
            pending.append(line)
        text = "\n".join(pending)
        pending = []
        if text.strip():
            yield text
        if interactive:
            return
    text = "\n".join(pending)
    if text.strip():
        yield text


def _command(runner: asyncio.Runner, session: ChatSession, message: str) -> str | None:
    """Handle a slash command: "exit" to leave, "done" when handled, None for a message to
    send (``//x`` is the message ``/x``)."""
    stripped = message.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    name, _, arg = stripped.partition(" ")
    arg = arg.strip()
    if name in ("/exit", "/quit"):
        return "exit"
    if name == "/help":
        emit_err(HELP)
    elif name == "/new":
        session.scope = None
        emit_err("A new conversation: its scope is named when its first answer is stored.")
    elif name == "/scope":
        if arg:
            session.scope = arg
            count = runner.run(session.stored_messages())
            emit_err(f"Now on scope {clean(arg)} ({count} messages stored).")
        elif session.scope is None:
            emit_err("A new conversation: no scope yet (it is named with the first answer).")
        else:
            emit_err(f"scope {clean(session.scope)}")
    elif name == "/attach":
        _attach(session, arg)
    elif name == "/summary":
        text = runner.run(session.newest_summary())
        emit_err(
            "No older turns of this conversation were summarized."
            if text is None
            else f"The newest summary of older turns:\n{clean_lines(text)}"
        )
    else:
        emit_err(f"Unknown command {clean(name)}; /help lists them (//text sends /text).")
    return "done"


def _attach(session: ChatSession, path: str) -> None:
    if not path:
        emit_err("/attach needs a path: /attach photo.jpg")
        return
    try:
        part = attachment(path)
    except CommandLineError as exc:
        emit_err(f"{exc.message}. {exc.hint or ''}".rstrip())
        return
    session.attached.append(part)
    size = len(part.get("data", "")) * 3 // 4
    emit_err(
        f"Attached {clean(path)} ({part['media_type']}, about {size:,} bytes): it goes with "
        f"your next message ({len(session.attached)} attached)."
    )


def _unescaped(message: str) -> str:
    stripped = message.lstrip()
    return stripped[1:] if stripped.startswith("//") else message


# -- Ctrl-C and history ------------------------------------------------------------------------


def _default_sigint() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def _restored_sigint() -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        yield
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def _load_history() -> None:
    try:
        import readline
    except ImportError:  # pragma: no cover - no readline (Windows): no line editing history
        return
    with contextlib.suppress(OSError):
        readline.read_history_file(HISTORY)


def _save_history() -> None:
    try:
        import readline
    except ImportError:  # pragma: no cover
        return
    with contextlib.suppress(OSError):
        HISTORY.parent.mkdir(exist_ok=True)
        readline.set_history_length(1000)
        readline.write_history_file(HISTORY)
