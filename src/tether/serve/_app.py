"""`create_app(runtime)`: the inspection UI and the run API as one ASGI app.

The read-only pages and their JSON API are `tether.ui`'s, mounted as they are; this app adds the
endpoints that start and steer runs (`_api.py`), the AG-UI endpoint (`_agui.py`), the A2A
agents (`_a2a.py`) and the chat page. Around all of it, the access checks of
`tether.web.GuardedApp` (security headers, the Host allow-list, CORS for the configured origins
only, the body limit, the token gate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..lab import Registry, Runtime
from ..lab._recorder import pricing_loaded
from ..ui import create_app as create_ui_app
from ..web import STOPPING, Access, GuardedApp
from ..web.middleware import BODY_TIMEOUT, DEFAULT_MAX_BODY
from ._a2a import A2AApi
from ._agui import AgUiApi
from ._api import RunsApi, handle_errors
from ._chat import ChatPages
from ._feed import RunFeed
from ._sweeper import SWEEP_EVERY, TAKEOVER_EVERY, Sweeper

__all__ = ["SHUTDOWN_GRACE", "create_app"]

logger = logging.getLogger("tether.serve")

SHUTDOWN_GRACE = 0.5
"""Seconds a stopping server lets the runs it executes finish before it cancels them."""

Endpoint = Callable[[Request], Awaitable[Response]]


def _guarded(call: Endpoint) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return await handle_errors(call, request)

    return endpoint


def create_app(
    runtime: Runtime,
    registry: Registry | None = None,
    *,
    allowed_hosts: Iterable[str] | None = None,
    token: str | None = None,
    cors_origins: Sequence[str] = (),
    max_body: int = DEFAULT_MAX_BODY,
    body_timeout: float = BODY_TIMEOUT,
    poll: float = 0.25,
    shutdown_grace: float = SHUTDOWN_GRACE,
    sweep_every: float = SWEEP_EVERY,
    takeover_every: float | None = TAKEOVER_EVERY,
    watch_registry: bool = False,
) -> Starlette:
    """The HTTP API and the inspection UI over `runtime`, as one ASGI app.

    Args:
        runtime: Whose agents, workflows and stores are served. It stays the caller's: the app
            never closes it.
        registry: The project's registry (`tether.lab.load_registry()`): the agents and
            workflows it lists are the ones served. Without one, every agent and workflow the
            runtime created.
        allowed_hosts: The `Host` names the app answers (others get 400: DNS rebinding).
            Default: the loopback names; `tether.ui.allowed_hosts(bind_host)` computes the set
            for a server; `["*"]` turns the check off (behind a proxy that checks it).
        token: When set, every request must carry it (`Authorization: Bearer`) or the cookie
            a browser gets for it at `/login`.
        cors_origins: Origins (``https://app.example.com``) whose pages may call the API from
            a browser. None by default: no cross-origin access at all.
        max_body: The largest request body accepted, in bytes (413 above).
        body_timeout: Seconds a client has to send a request body (408 after).
        poll: Seconds between two reads of the run store by a stream that follows a run
            executing in another process.
        shutdown_grace: Seconds the app lets its runs finish when the server stops, before it
            cancels them.
        sweep_every: Seconds between two looks for what other workers left to this one (cancel
            requests for its runs).
        takeover_every: Seconds between two looks for durable workflow runs whose worker died
            (read back as interrupted) to resume here; None never takes one over.
        watch_registry: Reload a registry loaded from a config file when the project's files
            change (`tether ui`), for the pages and for what the API serves alike.
    """
    if not isinstance(runtime, Runtime):
        raise TypeError(f"create_app needs a tether.lab.Runtime, got {runtime!r:.80}")
    if registry is not None and not isinstance(registry, Registry):
        raise TypeError(f"registry must be a tether.lab.Registry, got {registry!r:.80}")
    # A stream of a run whose worker died waits for a takeover: a sweep may find it only
    # takeover_every after it read back interrupted (two of them, and a second to spare).
    takeover_wait = 2 * takeover_every + 1 if takeover_every else 0.0
    feed = RunFeed(runtime, poll=poll, takeover_wait=takeover_wait)
    api = RunsApi(runtime, registry, feed)
    # What the runtime resumes by itself (a workflow whose paused run was decided, a run its
    # approval sweep expired) is this worker's like any run it started: cancellable, followed.
    runtime.on_resumed = api.track
    agui = AgUiApi(api)
    a2a = A2AApi(api, bearer=token is not None)
    chat = ChatPages(api)
    sweeper = Sweeper(api, every=sweep_every, takeover_every=takeover_every)
    # The pages answer every host and need no token here: this app checks both, once, outside.
    pages = create_ui_app(
        runtime, registry, allowed_hosts=["*"], watch_registry=watch_registry, chat_path="/chat"
    )
    # One registry for the pages and the API: reloaded (when watched) for both at once.
    api.source = pages.state.registry_source

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        # Open the stores now: a bad store URL fails the server's start, not the first request.
        _ = runtime.message_store, runtime.run_store, runtime.workflow_store
        # The price data loads now, in a thread, rather than beside the first runs served
        # (the first model call would start it: most of a second holding the interpreter).
        pricing_loaded()
        feed.open()
        sweeper.start()
        try:
            # Set by the server's protocol when it begins to stop: open streams end at once.
            yield {STOPPING: asyncio.Event()}
        finally:
            await sweeper.aclose()
            await _stop_runs(api, shutdown_grace)
            feed.close()
            if getattr(app.state, "owns_runtime", False):
                # A `tether serve --workers N` worker built this runtime; it closes it.
                await runtime.aclose()

    routes: list[BaseRoute] = [
        Route(
            "/api/agents/{agent_id:path}/runs",
            _guarded(api.start_agent_run),
            methods=["POST"],
        ),
        Route("/api/agents/{agent_id:path}/ag-ui", _guarded(agui.run), methods=["POST"]),
        # The card first: the JSON-RPC route's path would match the card's too.
        Route(
            "/a2a/{agent_id:path}/.well-known/agent-card.json",
            _guarded(a2a.card),
            methods=["GET"],
        ),
        Route("/a2a/{agent_id:path}", _guarded(a2a.rpc), methods=["POST"]),
        Route(
            "/api/workflows/{workflow_id:path}/runs",
            _guarded(api.start_workflow_run),
            methods=["POST"],
        ),
        Route("/api/runs/{run_id:path}/stream", _guarded(api.stream), methods=["GET"]),
        Route("/api/runs/{run_id:path}/cancel", _guarded(api.cancel), methods=["POST"]),
        Route("/api/runs/{run_id:path}/signals/{name}", _guarded(api.signal), methods=["POST"]),
        Route("/api/runs/{run_id:path}/decisions", _guarded(api.decide), methods=["POST"]),
        Route(
            "/api/scopes/{scope:path}/client-messages",
            _guarded(api.client_message),
            methods=["POST"],
        ),
        Route("/chat", chat.index, methods=["GET"]),
        Route("/chat/{agent_id:path}", chat.chat, methods=["GET"]),
        Mount("/chat-static", StaticFiles(packages=[("tether.serve", "static")])),
        Mount("/", app=pages),
    ]
    app = GuardedApp(
        Access.of(allowed_hosts, token, cors_origins, max_body, body_timeout),
        routes=routes,
        lifespan=lifespan,
    )
    app.state.api = api
    app.state.feed = feed
    return app


async def _stop_runs(api: RunsApi, grace: float) -> None:
    """Let the runs of this process finish for `grace` seconds, then cancel them (each is
    recorded as cancelled; a workflow run can be resumed)."""
    pending = [h.result for h in api.handles.values() if not h.result.done()]
    if not pending:
        return
    _, late = await asyncio.wait(pending, timeout=grace)
    for handle in list(api.handles.values()):
        if not handle.result.done():
            handle.cancel()
    if late:
        await asyncio.wait(late, timeout=grace)
