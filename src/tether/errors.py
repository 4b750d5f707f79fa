"""Every exception tether raises, in one tree.

```
TetherError
├── ConfigError                  a caller mistake, found before anything ran
│   ├── ToolDefinitionError      a tool, resource or guardrail declared wrongly
│   ├── ContentError             an image, document or audio part that is malformed or
│   │                            unreadable, or that the provider cannot take (.provider)
│   ├── UnknownProviderError     a model string whose provider prefix we do not know
│   ├── MissingKeyError          a provider key that is not in the config or the environment
│   │   └── MissingCredentialsError  a cloud's credential chain found nothing (or failed): names
│   │                            the cloud, region and where it looked
│   ├── ModelSettingError        a model setting that is unknown, mistyped, or that the provider
│   │                            cannot honour (.key, .provider)
│   ├── RegistryError            tether.toml / [tool.tether] points at something that is not there
│   │   └── ConfigNotFoundError  there is no tether.toml / [tool.tether] at or above a directory
│   ├── DatasetError             a dataset or evaluators file does not load (.path, .line, .field)
│   └── ExperimentMismatchError  an experiment rerun whose dataset or target version changed
├── DataError                    data that is not what it claims to be
│   ├── NotJSONSafeError         a value that would not survive json.dumps -> json.loads unchanged
│   ├── SessionFormatError       a stored Session that does not parse
│   ├── ClientMessageError       a client message that cannot be framed as a turn
│   └── StoreCorruptError        a stored record that does not parse
│       └── BlobCorruptError     stored media bytes whose sha256 is not their key (.sha)
├── LLMError                     a provider call failed
│   ├── LLMHTTPError             the provider answered with an error status (.status, .body)
│   │   ├── AuthenticationError  401 / 403: the key is wrong or lacks access
│   │   ├── RateLimitError       429
│   │   └── ContextLengthError   the request is longer than the model's context
│   ├── LLMConnectionError       the provider could not be reached
│   │   └── ConnectDeadlineError no connection within connect_timeout (also a DeadlineError)
│   └── LLMStreamError           the stream broke, carried an error event, or ended early
│       └── DeadlineError        a deadline of one model call fired (.deadline, .seconds):
│                                connect, first_byte, idle or total
├── McpError
│   ├── McpConnectionError       an MCP source could not be connected (raised by connect/send)
│   │   └── McpAuthError         its authorization failed: discovery, registration, login, token
│   └── McpCallError             one MCP request failed (the model sees an is_error result)
├── A2AError                     a remote A2A agent could not be used (.url); a tool calling
│   │                            one turns it into an error result the model sees
│   ├── A2ACardError             its agent card is missing, not JSON, or not a usable card
│   ├── A2AConnectionError       its server could not be reached or answered an HTTP error (.status)
│   ├── A2AProtocolError         a JSON-RPC error answer, or a reply that is not A2A (.code)
│   └── A2ATaskError             the task ended failed, rejected or canceled, or stopped for
│                                input or auth (.task_id, .context_id, .state)
├── WorkflowError                a workflow could not run (unknown name, bad step)
│   ├── StepOutputError          a durable step returned something that is not JSON-safe
│   ├── WorkflowInputError       a run's input is not what the workflow takes (start anew)
│   ├── WorkflowRunBusyError     another live process runs that workflow run (.run_id, .holder)
│   ├── WorkflowWaitingError     the run stopped to wait for a signal (.run_id, .waiting_for):
│   │                            not a failure; `runtime.signal(...)` resumes it
│   ├── WorkflowWaitTimeoutError a `ctx.wait_for(..., timeout=)` ended without its signal
│   └── WorkflowSignalError      a signal refused: its value does not match the wait's schema
│       └── WorkflowNotWaitingError  the run does not wait for that name (.waiting_for)
├── StoreError                   a message / workflow / run / blob store failed
│   ├── BlobNotFoundError        a media reference names bytes the blob store does not hold (.sha)
│   └── LeaseLostError           a write refused: another holder took over the lease it was
│                                made under (.lease, .key, .holder); its writer stops
├── ToolError                    raised inside a tool: its message goes to the model as the
│   │                            call's error result (the turn goes on)
│   └── HandoffLimitError        a transfer past the turn's `max_handoffs` (.limit): the model
│                                sees it as the transfer call's error and answers itself
├── ResumeError                  a paused turn or run could not be resumed as asked
│   ├── DecisionError            a decision that does not fit the pending calls (.call_id)
│   ├── NotPausedError           the session or run waits for no decision
│   │   └── RunNotPausedError    a lab run that is not paused (another resumer won: .winner)
│   └── RunNotFoundError         resuming a lab run the run store does not have (.run_id)
├── AgentRunError                a lab episode failed
│   ├── NoObjectGeneratedError   structured output did not produce a valid object (.text)
│   ├── ScopeBusyError           its memory scope stayed held by another episode (.scope, .holder)
│   ├── ResumedRunFailedError    a paused episode a workflow waited for failed once resumed
│   │                            (.run_id, .error): raised where the workflow ran it
│   └── TemplateError            a system-prompt template could not render
└── AbortedError                 the turn was aborted through its signal (control, not a fault)
```
"""

from __future__ import annotations

from typing import Any, Literal


class TetherError(Exception):
    """Base class of every error tether raises."""


class ConfigError(TetherError):
    """A caller mistake, found before anything ran."""


class ContentError(ConfigError):
    """A media part (image, document, audio) is malformed or unreadable, or the provider cannot
    take it; raised before anything is sent or stored."""

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        part_type: str | None = None,
        media_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        """The provider that cannot take the part (None: the part itself is wrong)."""
        self.part_type = part_type
        self.media_type = media_type


class ToolDefinitionError(ConfigError):
    """A tool, resource or guardrail was declared wrongly."""


class UnknownProviderError(ConfigError):
    """A model string named a provider tether has no adapter for."""


class MissingKeyError(ConfigError):
    """A provider needs a key that is neither in the config nor in the environment."""

    def __init__(self, provider: str, env_var: str) -> None:
        stored = "openai" if provider == "openai-responses" else provider
        super().__init__(
            f"no API key for {provider}: set {env_var} in the environment, store one with "
            f"`tether keys set {stored}`, or pass model={{'model': ..., 'api_key': ...}}"
        )
        self.provider = provider
        self.env_var = env_var


class MissingCredentialsError(MissingKeyError):
    """A cloud provider's credential chain (AWS, Google, Azure) found no credentials or failed;
    the message names the cloud, the region or project, and the variables to set."""

    def __init__(self, provider: str, message: str) -> None:
        ConfigError.__init__(self, message)
        self.provider = provider
        self.env_var = ""


class ModelSettingError(ConfigError):
    """A model setting is unknown, has the wrong type, or cannot be honoured by the provider.

    `key` names the setting (``reasoning.budget_tokens`` for a nested one); `provider` is the
    provider that cannot honour it, None when the setting itself is wrong.
    """

    def __init__(self, message: str, *, key: str, provider: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.provider = provider


class RegistryError(ConfigError):
    """The project registry points at a module, attribute or id that is not there."""


class ConfigNotFoundError(RegistryError):
    """No `tether.toml` (or `[tool.tether]` in `pyproject.toml`) at or above a directory."""


class DatasetError(ConfigError):
    """An experiment's dataset (or evaluators file) does not load.

    The message names the file, the line and the field; they are also attributes.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        where = path or "<dataset>"
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")
        self.path = path
        """The file (None for cases given as a Python list)."""
        self.line = line
        """1-based line of the case or field, when known."""
        self.field = field
        """The field that is wrong (``input``, ``evaluators[0].pattern``, ...)."""


class ExperimentMismatchError(ConfigError):
    """A rerun of an experiment whose dataset (by content hash) or target version differs
    from the stored one. Name a new experiment, or restart this one."""

    def __init__(self, message: str, *, experiment: str, differences: dict[str, Any]) -> None:
        super().__init__(message)
        self.experiment = experiment
        self.differences = differences
        """`{what: {"stored": ..., "now": ...}}` for each thing that changed."""


class DataError(TetherError):
    """Data that is not what it claims to be."""


class NotJSONSafeError(DataError, TypeError):
    """A value would not survive a JSON round trip unchanged.

    `path` names where, e.g. ``memory.when``.
    """

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what} is not JSON-safe")
        self.path = path
        self.what = what


class SessionFormatError(DataError, ValueError):
    """A serialized Session does not have the Session shape."""


class ClientMessageError(DataError, ValueError):
    """A client message cannot be framed as a turn."""


class StoreCorruptError(DataError):
    """A stored record does not parse; nothing was changed."""


class BlobCorruptError(StoreCorruptError):
    """Bytes read from a blob store do not hash to the sha256 they are stored under."""

    def __init__(self, sha: str, detail: str) -> None:
        super().__init__(f"blob {sha}: {detail}; the stored copy is damaged (restore the database)")
        self.sha = sha
        """The sha256 (hex) the bytes were asked for by."""


class LLMError(TetherError):
    """A provider call failed."""

    def __init__(self, message: str, *, provider: str | None = None, retryable: bool = False):
        super().__init__(message)
        self.provider = provider
        self.retryable = retryable


class LLMHTTPError(LLMError):
    """The provider answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: Any = None,
        provider: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, retryable=retryable)
        self.status = status
        self.body = body
        self.retry_after = retry_after
        """Seconds the server asked us to wait before trying again, when it said."""


class AuthenticationError(LLMHTTPError):
    """401/403: the key is wrong, expired or lacks access to the model."""


class RateLimitError(LLMHTTPError):
    """429 from the provider."""


class ContextLengthError(LLMHTTPError):
    """The request does not fit the model's context window. `tokens` and `limit` are the
    provider's numbers (the request's input tokens and the most it takes) when it said them."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: Any = None,
        provider: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        tokens: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(
            message,
            status=status,
            body=body,
            provider=provider,
            retryable=retryable,
            retry_after=retry_after,
        )
        self.tokens = tokens
        """The request's input tokens, as the provider counted them (None: not said)."""
        self.limit = limit
        """The most input tokens the model takes, as the provider said (None: not said)."""


class LLMConnectionError(LLMError):
    """The provider could not be reached."""


class LLMStreamError(LLMError):
    """The stream carried an error event, broke, or ended before it finished."""


Deadline = Literal["connect", "first_byte", "idle", "total"]


class DeadlineError(LLMStreamError):
    """A deadline of one model call fired; the message names it and its value.

    `deadline` is ``connect`` (no connection within ``connect_timeout``), ``first_byte`` (no
    answer within ``first_byte_timeout`` of sending the request), ``idle`` (no content within
    ``idle_timeout``; keep-alives do not count) or ``total`` (the call, retries included, took
    longer than ``total_timeout``); `seconds` is the deadline's value. A silent first byte or
    an idle stream is `retryable` (the model config's ``stream_retries`` decide whether the
    step is rerun); the connect and total deadlines are not.
    """

    def __init__(
        self,
        message: str,
        *,
        deadline: Deadline,
        seconds: float,
        provider: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message, provider=provider, retryable=retryable)
        self.deadline: Deadline = deadline
        self.seconds = seconds


class ConnectDeadlineError(DeadlineError, LLMConnectionError):
    """No connection within ``connect_timeout`` (after the request retries): the provider
    could not be reached, so it is an `LLMConnectionError` too."""


class McpError(TetherError):
    """Base of MCP-client failures."""


class McpConnectionError(McpError):
    """An MCP source could not be connected; the turn cannot proceed without it."""


class McpAuthError(McpConnectionError):
    """An MCP server's authorization failed: its metadata could not be discovered or was not
    trustworthy, the client could not be registered, the login was refused or abandoned, or the
    token endpoint said no. The message names the step and what to do; it never holds a
    secret."""


class McpCallError(McpError):
    """One MCP request (tools/call, resources/read) failed."""


class A2AError(TetherError):
    """A remote A2A agent could not be used. `url` is the agent's (its card's base URL)."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class A2ACardError(A2AError):
    """The agent card at `url` is missing, not JSON, or not a card tether can use (no JSON-RPC
    interface of protocol 1.0)."""


class A2AConnectionError(A2AError):
    """The agent's server could not be reached, or answered with an HTTP error (`status`)."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status = status


class A2AProtocolError(A2AError):
    """A JSON-RPC error answer (`code`: -32001 task not found, -32602 invalid params ...), or
    a reply that is not what the A2A specification says it is (`code` None)."""

    def __init__(self, message: str, *, url: str | None = None, code: int | None = None) -> None:
        super().__init__(message, url=url)
        self.code = code


class A2ATaskError(A2AError):
    """The remote task did not complete: it ended failed, rejected or canceled, or stopped
    to ask for input or authentication (`state`, as ``"failed"``, ``"input-required"`` ...)."""

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        state: str = "failed",
    ) -> None:
        super().__init__(message, url=url)
        self.task_id = task_id
        self.context_id = context_id
        self.state = state


class WorkflowError(TetherError):
    """A workflow could not run."""


class WorkflowInputError(WorkflowError):
    """A run's input is not what the workflow takes: resuming the run with the same input
    would fail the same way, so start a new run with the right input instead."""


class WorkflowRunBusyError(WorkflowError):
    """Another process (or another task of this one) holds the workflow run's lease: it is
    running the run now, so this one may not. `holder` names it; `expires_at` is when its lease
    ends (Unix time) if it stops renewing it — a holder that died releases the run then."""

    def __init__(
        self, message: str, *, run_id: str, holder: str | None, expires_at: float | None
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.holder = holder
        self.expires_at = expires_at


class WorkflowWaitingError(WorkflowError):
    """The run waits for a signal (`ctx.wait_for(name)`): it is stored as `waiting`, its
    process holds nothing of it any more, and `runtime.signal(run_id, name, value)` (or
    `Workflow.signal`) resumes it — in any process. Not a failure: what a run's handle raises
    when the run stopped to wait. `run_id` is the root run's id, `waiting_for` the signal's
    name, `waiter_run_id` the (nested) run that waits, `deadline` when the wait times out
    (Unix time; None: never)."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        waiting_for: str,
        waiter_run_id: str,
        deadline: float | None,
        paused_run_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.waiting_for = waiting_for
        self.waiter_run_id = waiter_run_id
        self.deadline = deadline
        self.paused_run_id = paused_run_id
        """The paused agent run the workflow waits for (an episode inside it paused on calls
        that need a decision; `runtime.resume(paused_run_id, decisions)` resumes both), or
        None for a wait for a signal."""


class WorkflowWaitTimeoutError(WorkflowError):
    """A `ctx.wait_for(name, timeout=...)` ended without its signal: raised in the workflow at
    the wait (catch it there to go on without the value). The timeout is journaled, so a resume
    of the run meets the same error at the same point."""

    def __init__(self, message: str, *, name: str, deadline: float) -> None:
        super().__init__(message)
        self.name = name
        self.deadline = deadline


class WorkflowSignalError(WorkflowError):
    """A signal was refused: its value does not match the schema the wait declared (`path`
    names where; nothing was stored), or the run is not waiting for it
    (`WorkflowNotWaitingError`)."""

    def __init__(self, message: str, *, run_id: str, name: str, path: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.name = name
        self.path = path


class WorkflowNotWaitingError(WorkflowSignalError):
    """A signal to a run that is not waiting for that name: `status` is how the run stands,
    `waiting_for` the name it does wait for (None: it waits for none). Nothing was stored."""

    def __init__(
        self, message: str, *, run_id: str, name: str, status: str, waiting_for: str | None
    ) -> None:
        super().__init__(message, run_id=run_id, name=name)
        self.status = status
        self.waiting_for = waiting_for


class StepOutputError(WorkflowError, NotJSONSafeError):
    """A durable step returned a value that cannot be journaled."""

    def __init__(self, step: str, path: str, what: str) -> None:
        NotJSONSafeError.__init__(self, path, what)
        self.args = (
            f"step {step!r} returned a value that cannot be journaled: {path}: "
            f"{what} is not JSON-safe",
        )
        self.step = step


class StoreError(TetherError):
    """A store operation failed."""


class BlobNotFoundError(StoreError):
    """A `{"blob": sha}` media reference names bytes the blob store does not hold."""

    def __init__(self, sha: str) -> None:
        super().__init__(
            f"blob {sha} is not in the blob store: the reference comes from another store, or "
            "its bytes were removed; send the media again as data"
        )
        self.sha = sha
        """The sha256 (hex) asked for."""


class LeaseLostError(StoreError):
    """A write made under a lease was refused: another holder took the lease over (this one
    stalled past it, and the other found it expired). Nothing of the write is stored; the
    episode or run that made it stops with this error and writes nothing more.

    `lease` says what was held (`"memory scope"`, `"run"`, `"workflow run"`), `key` which one
    (the scope or the run id), `holder` who holds it now when that is known."""

    def __init__(self, lease: str, key: str, holder: str | None = None) -> None:
        now = f"{holder} holds it now" if holder else "another holder took it over"
        super().__init__(
            f"the lease of {lease} {key!r} was lost: {now} (this process did not renew it for "
            "longer than it lasts); nothing more of this writer is stored"
        )
        self.lease = lease
        self.key = key
        self.holder = holder


class ToolError(TetherError):
    """Raise inside a tool to return exactly this message to the model as an error result.

    The loop turns it into the call's `is_error` result; the turn goes on (the model can react).
    """


class HandoffLimitError(ToolError):
    """A transfer call past the turn's bound on handoffs (`max_handoffs`, `limit`): the model
    reads it as the call's error result, and the agent holding the turn answers itself."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class ResumeError(TetherError):
    """A paused turn or lab run could not be resumed with the decisions given."""


class DecisionError(ResumeError, ValueError):
    """A decision that does not fit what the session waits for: a pending call left without one,
    an id that is not pending (unknown, or already decided), a decision of the wrong kind, or an
    edited input the tool's schema refuses. `call_id` names the call."""

    def __init__(self, message: str, *, call_id: str) -> None:
        super().__init__(message)
        self.call_id = call_id


class NotPausedError(ResumeError):
    """The session (or run) waits for no decision: there is nothing to resume."""


class RunNotPausedError(NotPausedError):
    """A lab run that is not paused: it never paused, or another resumer decided it first.
    `status` is the run's status now; `winner` names who decided it (`decided_by`), when
    known."""

    def __init__(
        self, message: str, *, run_id: str, status: str | None = None, winner: str | None = None
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status
        self.winner = winner


class RunNotFoundError(ResumeError, LookupError):
    """Resuming a lab run the run store does not have: `run_id` names it."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class AgentRunError(TetherError):
    """A lab episode failed."""


class NoObjectGeneratedError(AgentRunError):
    """Structured output produced no object matching the schema; `text` is what the model said."""

    def __init__(self, message: str, *, text: str) -> None:
        super().__init__(message)
        self.text = text


class ScopeBusyError(AgentRunError):
    """An episode could not take its memory scope: another episode held it for longer than
    `scope_lock_timeout`, or the episode was started from inside a run that already holds the
    scope (an agent tool running an episode on its own scope would wait for itself). `holder`
    names the holder when it is known."""

    def __init__(self, message: str, *, scope: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope
        self.holder = holder


class ResumedRunFailedError(AgentRunError):
    """A lab episode inside a workflow run paused, the workflow waited for it, and the run
    failed (or was cancelled) after it was resumed: what the workflow meets where it ran the
    episode, on every replay. `run_id` is the episode's run, `error` its stored error
    (`"Type: message"`; `tether runs show RUN_ID` has its traceback)."""

    def __init__(self, message: str, *, run_id: str, error: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.error = error


class TemplateError(AgentRunError, ConfigError):
    """A system-prompt template could not render (names the template and the variable)."""

    def __init__(
        self, message: str, *, template: str | None = None, variable: str | None = None
    ) -> None:
        super().__init__(message)
        self.template = template
        """The template's name (its path as given, or `<string>`)."""
        self.variable = variable
        """The variable (or input field) that was missing or wrong, when there is one."""


class AbortedError(TetherError):
    """The turn was aborted through its signal."""

    def __init__(self, reason: object = None) -> None:
        super().__init__("the turn was aborted" + (f": {reason}" if reason is not None else ""))
        self.reason = reason


__all__ = sorted(
    name
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, TetherError)
)
"""Every class above (the tree the module docstring draws), so the list cannot drift from it."""
