"""MCP servers as integration sources: `mcp_server(url=…)` and `mcp_stdio(command, …)`.

A source connects (handshake, `tools/list`, `resources/list`), checks what it got against the
caller's allowlist, cap and attach names, and hands the agent plain `Tool`s and `Resource`s. The
server's tools then run through the same loop as declared ones; nothing downstream knows the
difference.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypedDict, Unpack

import httpx

from .._json import dumps
from ..context import RunContext
from ..errors import (
    AbortedError,
    ConfigError,
    McpAuthError,
    McpCallError,
    McpConnectionError,
    ToolDefinitionError,
)
from ..integrations import MAX_INTEGRATIONS, SourceConnection
from ..resources import Resource, define_resource
from ..signals import AbortSignal
from ..tools import InputRequest, Tool, ToolResult, define_tool
from ._auth import ClientCredentials, OAuth
from ._client import Aborted, McpClient, VersionRefused, abortable
from ._content import content_parts
from ._elicitation import ElicitationFailed, ElicitationHandler, InputPending, check_answer
from ._headers import ParamHeader, param_headers, read_param_headers
from ._http import BorrowedTransport, HttpChannel
from ._protocol import (
    DEFAULT_MCP_TIMEOUT_MS,
    Channel,
    ChannelError,
    JsonObject,
    RpcError,
    ServerRequestHandler,
    content_text,
)
from ._stdio import StdioChannel

__all__ = [
    "DEFAULT_STARTUP_TIMEOUT_MS",
    "McpServerSource",
    "McpSource",
    "McpStdioSource",
    "ServerOptions",
    "SourceOptions",
    "StdioOptions",
    "mcp_server",
    "mcp_stdio",
]

logger = logging.getLogger("tether.mcp")

DEFAULT_STARTUP_TIMEOUT_MS = 30_000
"""How long a stdio child may take to start and answer `initialize`."""
_STDIO_PROBE_SECONDS = 10.0
"""How long a child may leave the `server/discover` probe unanswered before it is taken for a
server of the handshake era (some ignore requests that precede `initialize`)."""
_MAX_PAGES = 1000
"""A server that keeps handing out cursors past this is broken, not large."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]*$")


def _client_info() -> JsonObject:
    from importlib import metadata  # on first connect, not at import (it costs ~15 ms)

    try:
        version = metadata.version("tether")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        version = "0"
    return {"name": "tether", "version": version}


class SourceOptions(TypedDict, total=False):
    """The options both transports take (`mcp_server` documents each); every one optional."""

    prefix: str
    """Default ``""``."""
    tools: Sequence[str] | None
    """Default None: every tool the server lists."""
    max_tools: int
    """Default `MAX_INTEGRATIONS` (16)."""
    attach: Sequence[str]
    """Default none."""
    timeout_ms: int
    """Default `DEFAULT_MCP_TIMEOUT_MS` (60 s)."""
    on_elicitation: ElicitationHandler | None
    """Default None: the client declines."""
    elicitation: Literal["callback", "pause"]
    """Default ``"callback"``."""


class ServerOptions(SourceOptions, total=False):
    """The keywords of `mcp_server` (and `McpServerSource`): both transports' and HTTP's."""

    headers: Mapping[str, str] | None
    """Default none."""
    auth: OAuth | ClientCredentials | None
    """Default None: no authorization."""
    transport: httpx.AsyncBaseTransport | None
    """Default None: the network."""


class StdioOptions(SourceOptions, total=False):
    """The keywords of `mcp_stdio` (and `McpStdioSource`): both transports' and the child's."""

    env: Mapping[str, str] | None
    """Default None: this process's environment alone."""
    cwd: str | os.PathLike[str] | None
    """Default None: this process's working directory."""
    startup_timeout_ms: int
    """Default `DEFAULT_STARTUP_TIMEOUT_MS`."""


class McpSource:
    """What both transports share: the connect sequence and the mapping to tools/resources."""

    transport: ClassVar[str]

    def __init__(self, options: SourceOptions) -> None:
        prefix = options.get("prefix", "")
        tools = options.get("tools")
        max_tools = options.get("max_tools", MAX_INTEGRATIONS)
        attach = options.get("attach", ())
        timeout_ms = options.get("timeout_ms", DEFAULT_MCP_TIMEOUT_MS)
        on_elicitation = options.get("on_elicitation")
        elicitation = options.get("elicitation", "callback")
        if elicitation not in ("callback", "pause"):
            raise ConfigError(f"elicitation= is 'callback' or 'pause', got {elicitation!r}")
        self.elicitation = elicitation
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise ConfigError(f"prefix={prefix!r} may hold only letters, digits, '_' and '-'")
        if isinstance(tools, str) or (
            tools is not None and not all(isinstance(t, str) for t in tools)
        ):
            raise ConfigError("tools= is a list of tool names (the names the server lists)")
        if isinstance(attach, str) or not all(isinstance(a, str) for a in attach):
            raise ConfigError("attach= is a list of resource names or URIs")
        if not isinstance(max_tools, int) or max_tools < 1:
            raise ConfigError(f"max_tools must be a positive integer, got {max_tools!r}")
        if not isinstance(timeout_ms, int | float) or timeout_ms < 0:
            raise ConfigError(f"timeout_ms must be >= 0 (0 disables it), got {timeout_ms!r}")
        if on_elicitation is not None and not callable(on_elicitation):
            raise ConfigError("on_elicitation= is an async function (request) -> {'action': ...}")
        self.on_elicitation = on_elicitation
        self.prefix = prefix
        self.allow = None if tools is None else list(tools)
        self.max_tools = max_tools
        self.attach = list(attach)
        self.timeout_ms = timeout_ms
        self.handshake_timeout_ms = timeout_ms

    @property
    def label(self) -> str:
        """How errors and traces name this source."""
        raise NotImplementedError

    def _report_base(self) -> JsonObject:
        raise NotImplementedError

    def _transport(
        self,
    ) -> tuple[Callable[[ServerRequestHandler], Channel], Callable[[], Awaitable[None]] | None]:
        """A channel factory for this connection (one channel per session, given what answers
        the server's own requests) and the cleanup of whatever the factory shares."""
        raise NotImplementedError

    _probe_timeout: float | None = None

    # -- connecting --------------------------------------------------------------------------

    async def connect(self, signal: AbortSignal | None = None) -> SourceConnection:
        """Handshake, list, and build the tools and resources. Raises `McpConnectionError`
        (or `AbortedError` when `signal` fires) and leaves nothing open when it does."""
        if signal is not None and signal.aborted:
            raise AbortedError(signal.reason)
        make_channel, cleanup = self._transport()
        client = McpClient(
            make_channel,
            timeout=self.timeout_ms / 1000 if self.timeout_ms else None,
            timeout_ms=int(self.timeout_ms),
            handshake_timeout=self.handshake_timeout_ms / 1000
            if self.handshake_timeout_ms
            else None,
            handshake_timeout_ms=int(self.handshake_timeout_ms),
            client_info=_client_info(),
            label=self.label,
            on_elicitation=self.on_elicitation,
            probe_timeout=self._probe_timeout,
            on_close=cleanup,
            pause_elicitation=self.elicitation == "pause",
        )
        try:
            # The signal cancels the handshake but does not stay attached to the connection.
            return await abortable(self._connect(client), signal)
        except Aborted:
            await client.aclose()
            raise AbortedError(signal.reason if signal is not None else None) from None
        except BaseException:
            await client.aclose()
            raise

    def _fail(self, what: str, exc: BaseException, ms: int | None = None) -> McpConnectionError:
        if isinstance(exc, TimeoutError):
            why = f"no answer within {self.timeout_ms if ms is None else ms} ms"
        elif isinstance(exc, RpcError):
            why = f"the server answered {exc}"
        else:
            why = str(exc)
        return McpConnectionError(f"MCP server {self.label}: {what} failed: {why}")

    async def _connect(self, client: McpClient) -> SourceConnection:
        try:
            await client.open()
        except VersionRefused as exc:
            raise McpConnectionError(f"MCP server {self.label}: {exc}") from exc
        except McpAuthError as exc:
            raise McpAuthError(f"MCP server {self.label}: {exc}") from exc
        except (ChannelError, RpcError, TimeoutError) as exc:
            raise self._fail(client.stage, exc, self.handshake_timeout_ms) from exc
        caps = client.capabilities
        listed = await self._list(client, "tools/list", "tools") if "tools" in caps else []
        resources = (
            await self._list(client, "resources/list", "resources") if "resources" in caps else []
        )
        notes: list[tuple[str, JsonObject]] = []
        tools = self._tools(client, listed, notes)
        attach, resource_tools, resource_report = self._resources(client, resources)
        report: JsonObject = {
            **self._report_base(),
            "server_info": client.server_info,
            "protocol_version": client.protocol_version,
            "tools": [t.name for t in tools + resource_tools],
            "resources": resource_report,
            "validation": "remote",
        }
        if client.instructions is not None:
            report["instructions"] = client.instructions  # data for the app, never prompt
        notes += [
            ("check:off", {"tool": t.name, "reason": f"no local input check: {t.unchecked}"})
            for t in tools
            if t.unchecked is not None
        ]
        return SourceConnection(
            report=report,
            tools=tools + resource_tools,
            attach=attach,
            close=client.aclose,
            notes=notes,
        )

    async def _list(self, client: McpClient, method: str, key: str) -> list[JsonObject]:
        items: list[JsonObject] = []
        cursor: Any = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            try:
                page = await client.request(method, {"cursor": cursor} if cursor else None)
            except McpAuthError as exc:
                raise McpAuthError(f"MCP server {self.label}: {exc}") from exc
            except (ChannelError, RpcError, TimeoutError) as exc:
                raise self._fail(method, exc) from exc
            batch = page.get(key)
            if not isinstance(batch, list):
                raise McpConnectionError(
                    f"MCP server {self.label}: {method} answered without a {key!r} list"
                )
            items.extend(item for item in batch if isinstance(item, dict))
            cursor = page.get("nextCursor")
            if not cursor:
                return items
            if not isinstance(cursor, str):
                raise McpConnectionError(
                    f"MCP server {self.label}: {method} answered a nextCursor that is not a "
                    f"string: {cursor!r}"
                )
            if cursor in seen:  # a loop, which would otherwise page forever
                raise McpConnectionError(
                    f"MCP server {self.label}: {method} repeats its cursor {cursor!r}"
                )
            seen.add(cursor)
        raise McpConnectionError(
            f"MCP server {self.label}: {method} was still paginating after {_MAX_PAGES} pages"
        )

    # -- tools -------------------------------------------------------------------------------

    def _tools(
        self, client: McpClient, listed: list[JsonObject], notes: list[tuple[str, JsonObject]]
    ) -> list[Tool]:
        named = [t for t in listed if isinstance(t.get("name"), str)]
        headers: dict[str, list[ParamHeader]] = {}
        rejected: dict[str, str] = {}
        if self.transport == "http":
            # A tool whose x-mcp-header annotations break the rules is left out, and the
            # others kept (SEP-2243); stdio has no headers to mirror into.
            for spec in named:
                found, problem = read_param_headers(spec.get("inputSchema"))
                if problem is None:
                    headers[spec["name"]] = found
                else:
                    rejected[spec["name"]] = problem
            for name, problem in rejected.items():
                logger.warning("MCP server %s: tool %s left out: %s", self.label, name, problem)
                notes.append(("tool:rejected", {"tool": name, "reason": problem}))
            named = [t for t in named if t["name"] not in rejected]
        if self.allow is not None:
            names = {t["name"] for t in named}
            missing = [n for n in self.allow if n not in names]
            if missing:
                why = "; ".join(f"{n}: {rejected[n]}" for n in missing if n in rejected)
                raise McpConnectionError(
                    f"MCP server {self.label}: tools= names {missing!r}, which the server does "
                    f"not list (it lists {sorted(names)!r})"
                    + (f"; the server lists invalid definitions of some ({why})" if why else "")
                )
            keep = set(self.allow)
            named = [t for t in named if t["name"] in keep]
        if len(named) > self.max_tools:
            raise McpConnectionError(
                f"MCP server {self.label} lists {len(named)} tools, more than max_tools="
                f"{self.max_tools}; choose the ones the agent needs with tools=[...] or raise "
                "max_tools"
            )
        return [self._tool(client, t, headers.get(t["name"], [])) for t in named]

    def _tool(self, client: McpClient, spec: JsonObject, mirrored: list[ParamHeader]) -> Tool:
        remote = spec["name"]
        name = self.prefix + remote
        schema = spec.get("inputSchema")
        description = spec.get("description")
        what = f"MCP tool {remote} on {self.label}"

        async def send(params: JsonObject, ctx: RunContext) -> ToolResult:
            value = params.get("arguments")
            try:
                extra = param_headers(mirrored, value) if mirrored else None
            except ValueError as exc:
                return ToolResult(f"Invalid input for tool {name}: {exc}", is_error=True)
            try:
                result = await client.call(
                    "tools/call",
                    params,
                    what=what,
                    signal=ctx.signal,
                    tracer=ctx.tracer,
                    headers=extra,
                    progress=ctx.progress,
                )
            except McpCallError as exc:
                return ToolResult(str(exc), is_error=True)
            except InputPending as pending:
                return self._paused(what, pending)
            text, media = content_parts(result.get("content"))
            if not text and not media and "structuredContent" in result:
                text = dumps(result["structuredContent"])
            if result.get("isError") is True:
                return ToolResult(str(McpCallError(f"{what} reported an error: {text}")), True)
            return ToolResult(text, parts=media or None)

        async def execute(value: Any, ctx: RunContext) -> ToolResult:
            return await send({"name": remote, "arguments": value}, ctx)

        async def resume_input(
            state: dict[str, Any], answer: dict[str, Any], ctx: RunContext
        ) -> ToolResult:
            params = state.get("params") if isinstance(state, dict) else None
            asked = state.get("elicitation") if isinstance(state, dict) else None
            if not isinstance(params, dict) or params.get("name") != remote:
                return ToolResult(
                    f"{what} cannot go on: the paused call's state is not one of this tool's",
                    is_error=True,
                )
            schema = asked.get("requestedSchema") if isinstance(asked, dict) else None
            try:
                reply = check_answer(answer, schema if isinstance(schema, dict) else {})
            except ElicitationFailed as exc:
                return ToolResult(f"{what} cannot go on: {exc}", is_error=True)
            again: JsonObject = {**params, "inputResponses": {state["key"]: reply}}
            if "requestState" in state:
                again["requestState"] = state["requestState"]
            return await send(again, ctx)

        try:
            # The server's schema passes verbatim and the server is the authoritative validator
            # (validation="remote"); the boundary still checks required properties and types,
            # and answers a failure without sending the call.
            tool = define_tool(
                name=name,
                description=description if isinstance(description, str) else "",
                input_schema=schema if isinstance(schema, dict) else {"type": "object"},
                execute=execute,
                validation="remote",
            )
        except ToolDefinitionError as exc:
            raise McpConnectionError(
                f"MCP server {self.label} lists tool {remote!r}, which cannot be offered to a "
                f"model as {name!r} ({exc}); leave it out with tools=[...]"
            ) from exc
        if self.elicitation == "pause":
            tool.resume_input = resume_input
        return tool

    def _paused(self, what: str, pending: InputPending) -> ToolResult:
        """The result of a call that stopped to ask a person: its input request, and what the
        model reads where the turn cannot pause for it."""
        asked = pending.request
        request = InputRequest(
            message=asked.message, schema=asked.schema, source=self.label, state=pending.state
        )
        return ToolResult(
            f"{what} asks for input ({asked.message!r}) and waits for a person's answer; "
            "resume the call with it (or give the source on_elicitation= to answer at once)",
            is_error=True,
            input_request=request,
        )

    # -- resources ---------------------------------------------------------------------------

    def _resources(
        self, client: McpClient, listed: list[JsonObject]
    ) -> tuple[list[Resource], list[Tool], list[JsonObject]]:
        wanted = set(self.attach)
        matched: set[str] = set()
        attach: list[Resource] = []
        tools: list[Tool] = []
        report: list[JsonObject] = []
        for spec in listed:
            uri = spec.get("uri")
            if not isinstance(uri, str):
                continue
            given = spec.get("name")
            name: str = given if isinstance(given, str) and given else uri
            description = spec.get("description")
            description = description if isinstance(description, str) else ""
            read = self._reader(client, uri, f"MCP resource {name} on {self.label}")
            hits = {k for k in (name, uri) if k in wanted}
            if hits:
                matched |= hits
                attach.append(
                    define_resource(name=name, mode="attach", get=read, description=description)
                )
                report.append({"name": name, "uri": uri, "mode": "attach"})
                continue
            tool_name = f"{self.prefix}read_{_UNSAFE.sub('_', name)}"

            async def execute(value: Any, ctx: RunContext, read: Any = read) -> ToolResult:
                try:
                    return ToolResult(await read(value, ctx))
                except McpCallError as exc:
                    return ToolResult(str(exc), is_error=True)

            try:
                tools.append(
                    define_tool(
                        name=tool_name,
                        description=description or f"Read the {name} resource ({uri}).",
                        input_schema={"type": "object", "properties": {}},
                        execute=execute,
                        validation="remote",
                    )
                )
            except ToolDefinitionError as exc:
                raise McpConnectionError(
                    f"MCP server {self.label} lists resource {name!r}, which cannot become the "
                    f"tool {tool_name!r} ({exc})"
                ) from exc
            report.append({"name": name, "uri": uri, "mode": "tool", "tool": tool_name})
        missing = sorted(wanted - matched)
        if missing:
            raise McpConnectionError(
                f"MCP server {self.label}: attach= names {missing!r}, which the server does not "
                "list as resources (by name or URI)"
            )
        return attach, tools, report

    def _reader(
        self, client: McpClient, uri: str, what: str
    ) -> Callable[[Any, RunContext], Awaitable[str]]:
        async def read(value: Any, ctx: RunContext) -> str:
            result = await client.call(
                "resources/read",
                {"uri": uri},
                what=f"reading {what}",
                signal=ctx.signal,
                tracer=ctx.tracer,
            )
            return content_text(result.get("contents"))

        return read


class McpServerSource(McpSource):
    """An MCP server over streamable HTTP."""

    transport = "http"

    def __init__(self, url: str, **options: Unpack[ServerOptions]) -> None:
        super().__init__(options)
        auth = options.get("auth")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"mcp_server(url=...) needs an http:// or https:// URL, got {url!r}")
        if auth is not None and not isinstance(auth, OAuth | ClientCredentials):
            raise ConfigError(
                "mcp_server(auth=...) takes tether.mcp.OAuth(...) or ClientCredentials(...); "
                "for a fixed token pass headers={'authorization': 'Bearer ...'}"
            )
        self.url = url
        self.headers = dict(options.get("headers") or {})
        self.auth = auth
        self._http_transport = options.get("transport")

    @property
    def label(self) -> str:
        return self.url

    def _report_base(self) -> JsonObject:
        report: JsonObject = {"url": self.url, "transport": "http"}
        if self.auth is not None:
            report["auth"] = self.auth.kind
        return report

    def _transport(
        self,
    ) -> tuple[Callable[[ServerRequestHandler], Channel], Callable[[], Awaitable[None]] | None]:
        borrowed = None if self._http_transport is None else BorrowedTransport(self._http_transport)
        auth = None
        if self.auth is not None:
            from ._oauth import make_auth  # the OAuth flows load only for a source that uses them

            auth = make_auth(self.auth, self.url, borrowed)
        # httpx's own timeouts are off: timeout_ms (asyncio) covers the whole round trip,
        # including the wait on an SSE body, and 0 must mean no clock at all.
        http = httpx.AsyncClient(transport=borrowed, timeout=httpx.Timeout(None), auth=auth)

        async def cleanup() -> None:
            await http.aclose()
            if auth is not None:
                await auth.aclose()

        def channel(on_request: ServerRequestHandler) -> Channel:
            return HttpChannel(
                http, self.url, self.headers, on_request, authorized=auth is not None
            )

        return channel, cleanup

    def __repr__(self) -> str:
        return f"mcp_server(url={self.url!r})"


class McpStdioSource(McpSource):
    """An MCP server run as a child process speaking JSON-RPC on stdio."""

    transport = "stdio"
    _probe_timeout = _STDIO_PROBE_SECONDS

    def __init__(
        self, command: str, args: Sequence[str] = (), **options: Unpack[StdioOptions]
    ) -> None:
        super().__init__(options)
        startup_timeout_ms = options.get("startup_timeout_ms", DEFAULT_STARTUP_TIMEOUT_MS)
        if not isinstance(startup_timeout_ms, int | float) or startup_timeout_ms < 0:
            raise ConfigError(
                f"startup_timeout_ms must be >= 0 (0 disables it), got {startup_timeout_ms!r}"
            )
        self.handshake_timeout_ms = startup_timeout_ms
        if not isinstance(command, str) or not command:
            raise ConfigError("mcp_stdio(command, ...) needs the program to run")
        if isinstance(args, str):
            raise ConfigError("mcp_stdio(args=...) is a list of arguments, not one string")
        self.command = command
        self.args = [str(a) for a in args]
        env = options.get("env")
        self.env = dict(env) if env is not None else None
        self.cwd = options.get("cwd")

    @property
    def label(self) -> str:
        return " ".join([self.command, *self.args])

    def _report_base(self) -> JsonObject:
        return {"command": [self.command, *self.args], "transport": "stdio"}

    def _transport(
        self,
    ) -> tuple[Callable[[ServerRequestHandler], Channel], Callable[[], Awaitable[None]] | None]:
        def channel(on_request: ServerRequestHandler) -> Channel:
            return StdioChannel(self.command, self.args, self.env, self.cwd, on_request)

        return channel, None

    def __repr__(self) -> str:
        return f"mcp_stdio({self.command!r}, {self.args!r})"


def mcp_server(url: str, **options: Unpack[ServerOptions]) -> McpServerSource:
    """An MCP server over streamable HTTP, as an integration source.

    It speaks the stateless revision (2026-07-28) to a server that does and falls back to the
    `initialize` handshake (2025-11-25 and earlier) for one that does not.

    Args:
        url: The server's MCP endpoint.
        headers: Sent with every request (a fixed token, say).
        auth: `OAuth(...)` to log in through the server's authorization server (the MCP
            authorization spec: discovery, registration, PKCE, refresh, step-up), or
            `ClientCredentials(...)` for a machine-to-machine client.
        prefix: Prepended to every tool name the server contributes.
        tools: Allowlist of the server's tool names; None takes everything it lists.
        max_tools: Connecting fails, naming the count, when more tools are listed (after the
            allowlist) than this.
        attach: Resource names or URIs to inline in the prompt every turn; every other resource
            becomes a `read_<name>` tool.
        timeout_ms: Per round trip, including the wait for an SSE answer; 0 disables it.
        on_elicitation: `async (Elicitation) -> {"action", "content"}`, asked when the server
            wants input from the user mid-call; omitted fields get the schema's defaults.
            Without it the client declines.
        transport: An httpx transport to send through instead of the network (tests use
            `tether.testing.create_test_mcp_server()`); it stays the caller's to close.
        elicitation: "pause": a 2026-07-28 server's form elicitation needs no live handler —
            the call's result carries an `InputRequest` (the schema asked for, and the state
            to go on with, JSON-safe) and `tool.resume_input(state, answer, ctx)` goes on with
            the person's answer later, in any process. A server of the handshake era still
            goes to `on_elicitation` (or is declined). "callback" (the default): as before.
    """
    return McpServerSource(url, **options)


def mcp_stdio(
    command: str, args: Sequence[str] = (), **options: Unpack[StdioOptions]
) -> McpStdioSource:
    """An MCP server run as a child process (newline-delimited JSON-RPC on its stdin/stdout).

    Each session is one child; closing the session ends it (stdin closed, then SIGTERM, then
    SIGKILL). `env` is added to this process's environment. `startup_timeout_ms` bounds the
    handshake instead of `timeout_ms`, since it includes the child starting (a cold `npx` or
    `uvx` can take seconds); 0 disables it. The child is probed with `server/discover` first
    and spoken to in the stateless revision if it answers; a server of the handshake era gets
    `initialize`. The other options are those of `mcp_server`.
    """
    return McpStdioSource(command, args, **options)
