"""The inspection web app: server-rendered pages over a runtime's stores, and a JSON API.

Every page is rendered by one Jinja2 environment with autoescape on, so whatever a model, a
tool or a store hands us is text on the page. Links are built from percent-encoded ids. The
security headers (`tether.web.middleware.SecurityHeaders`) add a Content-Security-Policy that
allows only this app's own script and stylesheet, as a second wall behind the escaping.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import ConfigError, StoreCorruptError, StoreError
from ..lab import Registry, Runtime
from ..run_events import (
    AGENT_MESSAGES_COMMITTED,
    MODEL_CALL_FAILED,
    MODEL_CALL_FINISHED,
    MODEL_CALL_STARTED,
)
from ..stores.run_store import RunInfo, RunQuery
from ..stores.workflow_store import READ_STATUSES
from ..web import (
    Access,
    ApiError,
    GuardedApp,
    JSONResponse,
    api_error,
    count_param,
    seq_param,
)
from ..web.middleware import csrf_token
from ._blobs import serve_blob
from ._experiments import experiment_routes
from ._markdown import render_markdown
from ._reload import RegistrySource
from ._views import (
    EVENTS_PER_POLL,
    PAGE_SIZE,
    Catalog,
    ConversationView,
    RunFilters,
    Unreadable,
    agent_detail_json,
    agent_json,
    build_conversation,
    build_run,
    list_scopes,
    page_runs,
    prompt_for,
    run_json,
    scope_json,
    search_scopes,
    timeline,
    totals_json,
    workflow_json,
    workflow_stats,
)

__all__ = ["create_app"]

Endpoint = Callable[[Request], Awaitable[Response]]


# -- formatting helpers (Jinja filters and globals) ------------------------------------------


def _when(ts: float | None) -> str:
    if ts is None or not math.isfinite(ts) or ts <= 0:
        return "—"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(ts: float | None) -> str:
    if ts is None or not math.isfinite(ts) or ts <= 0:
        return ""
    return datetime.fromtimestamp(ts, UTC).isoformat()


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes} m {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} m"


def _pretty(value: Any) -> str:
    """A JSON value as indented text (a plain string stays as it is)."""
    if isinstance(value, jinja2.Undefined):
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tether.ui", "templates"),
        # On for every template, whatever its file name: nothing is rendered unescaped.
        autoescape=True,
        # Stored event data may lack a field (an older writer, another process): a missing one
        # renders as nothing instead of failing the page.
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["iso"] = _iso
    env.filters["seconds"] = _seconds
    env.filters["pretty"] = _pretty
    env.filters["q"] = _segment
    env.filters["usd"] = _usd
    env.filters["markdown"] = render_markdown
    return env


def _usd(value: Any) -> str:
    """US dollars, or "—" when the cost is not known (never a guess)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "—"
    if value == 0 or value >= 0.01:
        return f"${value:.2f}" if value >= 1 else f"${value:.4f}"
    return f"${value:.6f}"


def _segment(value: Any) -> str:
    """An id as the last segment of a link's path, percent-encoded (`/` too). An id that is a
    dot segment (`.`, `..`) cannot be one: clients resolve it away, even encoded, before asking.
    Those go in the query instead (`/runs/?id=..`), which `_path_id` reads."""
    text = str(value)
    if text in (".", ".."):
        return "?id=" + quote(text, safe="")
    return quote(text, safe="")


def _path_id(request: Request, name: str) -> str:
    """The id a link built with `_segment` names: the path parameter, else `?id=`."""
    value: str = request.path_params[name]
    return value or request.query_params.get("id", "")


# -- the app ---------------------------------------------------------------------------------


class _Pages:
    """The route handlers, sharing the runtime, the catalog and the template environment."""

    def __init__(
        self, runtime: Runtime, registry: Registry | None, *, watch: bool, chat: str | None
    ) -> None:
        self.chat = chat
        """Where a chat page per agent is served (`tether serve`), or None."""
        self.runtime = runtime
        self.source = RegistrySource(registry, watch=watch)
        self.env = _environment()

    @property
    def catalog(self) -> Catalog:
        # Rebuilt per request: a registry or runtime may gain agents after the app was made,
        # and a registry loaded from a project reloads when the project's files change.
        return Catalog.of(self.runtime, self.source.registry)

    # -- rendering ---------------------------------------------------------------------------

    def render(
        self, request: Request, name: str, context: dict[str, Any], status: int = 200
    ) -> HTMLResponse:
        base = request.scope.get("root_path", "").rstrip("/")
        html = self.env.get_template(name).render(
            base=base,
            now=time.time(),
            path=request.url.path,
            registry_error=self.source.error,
            chat=self.chat,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def error_page(self, request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return self.render(request, "error.html", {"title": title, "message": message}, status)

    # -- pages -------------------------------------------------------------------------------

    async def runs(self, request: Request) -> Response:
        filters = _run_filters(request)
        cursor = request.query_params.get("cursor") or None
        catalog = self.catalog
        try:
            rows, next_cursor = await page_runs(catalog, filters, cursor=cursor)
        except Unreadable as exc:
            return self.error_page(request, 500, "Runs cannot be read", str(exc))
        except ConfigError as exc:
            raise HTTPException(400, str(exc)) from None
        params = {k: v for k, v in request.query_params.items() if k != "cursor" and v}
        return self.render(
            request,
            "runs.html",
            {
                "rows": rows,
                "filters": filters,
                "form": dict(request.query_params),
                "names": sorted({*catalog.agents, *catalog.workflows}),
                "statuses": READ_STATUSES,
                "next_url": (
                    "?" + urlencode({**params, "cursor": next_cursor}) if next_cursor else None
                ),
                "first_url": ("?" + urlencode(params)) if cursor else None,
                "show_all": filters.show_all,
                "all_url": "?" + urlencode({**params, "all": "1"}),
                "registered_url": "?" + urlencode({k: v for k, v in params.items() if k != "all"}),
            },
        )

    async def run(self, request: Request) -> Response:
        run_id = _path_id(request, "run_id")
        try:
            view = await build_run(self.catalog, run_id)
        except Unreadable as exc:
            return self.error_page(request, 500, f"Run {run_id} cannot be read", str(exc))
        if view is None:
            raise HTTPException(404, f"There is no run {run_id!r}.")
        return self.render(
            request,
            "run.html",
            {
                "view": view,
                "run": view.info,
                "resume": _resume(view.info),
                "show_storage": request.query_params.get("storage") == "1",
                "open_call": request.query_params.get("call"),
                # Decided from the page where the app is tether serve's (the one with chat
                # pages), whose POST /api/runs/{id}/decisions takes them; behind a token the
                # page is a logged-in session's, and its POST carries the session's CSRF token.
                "can_decide": self.chat is not None,
                "csrf": csrf_token(request.scope),
            },
        )

    async def _scope_rows(
        self, request: Request
    ) -> tuple[list[Any], int, bool, str | None, str | None]:
        """The conversations list's rows: by text (cursor pages) or by recency (numbered)."""
        title = (request.query_params.get("title") or "").strip() or None
        q = (request.query_params.get("q") or "").strip() or None
        page = _page(request)
        if q is not None:
            cursor = request.query_params.get("cursor") or None
            try:
                rows, next_cursor = await search_scopes(self.catalog, q, title=title, cursor=cursor)
            except ConfigError as exc:
                raise HTTPException(400, str(exc)) from None
            return rows, page, False, next_cursor, q
        rows, more = await list_scopes(self.catalog, page=page, title=title)
        return rows, page, more, None, None

    async def conversations(self, request: Request) -> Response:
        try:
            rows, page, more, next_cursor, q = await self._scope_rows(request)
        except Unreadable as exc:
            return self.error_page(request, 500, "Conversations cannot be read", str(exc))
        params = {k: v for k, v in request.query_params.items() if k not in ("cursor", "page")}
        return self.render(
            request,
            "conversations.html",
            {
                "rows": rows,
                "page": page,
                "more": more,
                "form": dict(request.query_params),
                "searching": bool(q) or bool(params.get("title")),
                "extra": "".join(f"&{urlencode({k: v})}" for k, v in params.items() if v),
                "next_url": (
                    "?" + urlencode({**params, "cursor": next_cursor}) if next_cursor else None
                ),
            },
        )

    async def _conversation(
        self, request: Request, scope: str, agent_id: str | None
    ) -> ConversationView | None:
        """The page's and the API's view of a conversation, at the page the query names."""
        return await build_conversation(
            self.catalog,
            scope,
            agent_id or None,
            before=count_param(request, "before"),
            skip=count_param(request, "skip") or 0,
        )

    async def blob(self, request: Request) -> Response:
        """Media bytes the conversation, run and request views show (`tether.ui._blobs`)."""
        return await serve_blob(request, getattr(self.runtime.message_store, "blobs", None))

    async def conversation(self, request: Request) -> Response:
        scope = _path_id(request, "scope")
        agent_id = request.query_params.get("agent") or None
        try:
            view = await self._conversation(request, scope, agent_id)
        except Unreadable as exc:
            return self.error_page(request, 500, f"Conversation {scope} cannot be read", str(exc))
        if view is None:
            raise HTTPException(404, f"There is no conversation {scope!r}.")
        return self.render(request, "conversation.html", {"view": view, "request_agent": agent_id})

    async def agents(self, request: Request) -> Response:
        catalog = self.catalog
        agents = [agent_json(catalog, a) for _, a in sorted(catalog.agents.items())]
        totals: dict[str, Any] = {}
        for a in agents:
            # Tokens and cost of each agent's runs (None: the store cannot say).
            try:
                query = RunQuery(kind="agent", name=a["id"])
                totals[a["id"]] = await self.runtime.run_store.run_totals(query)
            except (StoreCorruptError, StoreError):
                totals[a["id"]] = None
        return self.render(request, "agents.html", {"agents": agents, "totals": totals})

    async def agent(self, request: Request) -> Response:
        agent_id = _path_id(request, "agent_id")
        catalog = self.catalog
        agent = catalog.agents.get(agent_id)
        if agent is None:
            raise HTTPException(404, f"There is no registered agent {agent_id!r}.")
        integrations = await agent.inspect_integrations()
        try:
            totals = await self.runtime.run_store.run_totals(RunQuery(kind="agent", name=agent_id))
        except (StoreCorruptError, StoreError):
            totals = None
        return self.render(
            request,
            "agent.html",
            {
                "a": agent_detail_json(catalog, agent, integrations),
                "prompt": prompt_for(catalog, None, agent_id),
                "totals": totals,
            },
        )

    async def workflows(self, request: Request) -> Response:
        catalog = self.catalog
        workflows = [workflow_json(catalog, w) for _, w in sorted(catalog.workflows.items())]
        return self.render(request, "workflows.html", {"workflows": workflows})

    async def workflow(self, request: Request) -> Response:
        workflow_id = _path_id(request, "workflow_id")
        catalog = self.catalog
        workflow = catalog.workflows.get(workflow_id) or self.runtime.workflows.get(workflow_id)
        if workflow is None:
            raise HTTPException(404, f"There is no workflow {workflow_id!r}.")
        try:
            stats = await workflow_stats(self.runtime, workflow_id)
        except Unreadable as exc:
            return self.error_page(request, 500, f"Workflow {workflow_id} cannot be read", str(exc))
        return self.render(
            request,
            "workflow.html",
            {"w": workflow_json(catalog, workflow), "stats": stats},
        )

    async def api_workflow(self, request: Request) -> Response:
        workflow_id = _path_id(request, "workflow_id")
        catalog = self.catalog
        workflow = catalog.workflows.get(workflow_id) or self.runtime.workflows.get(workflow_id)
        if workflow is None:
            return api_error(404, "not_found", f"there is no workflow {workflow_id!r}")
        try:
            stats = await workflow_stats(self.runtime, workflow_id)
        except Unreadable as exc:
            return api_error(500, "unreadable", str(exc))
        return JSONResponse(
            {"workflow": workflow_json(catalog, workflow), **stats.to_json(time.time())}
        )

    # -- JSON API ----------------------------------------------------------------------------

    async def api_runs(self, request: Request) -> Response:
        filters = _run_filters(request)
        cursor = request.query_params.get("cursor") or None
        limit = _limit(request)
        try:
            rows, next_cursor = await page_runs(self.catalog, filters, cursor=cursor, limit=limit)
        except Unreadable as exc:
            return api_error(500, "unreadable", str(exc))
        except ConfigError as exc:
            return api_error(400, "bad_request", str(exc))
        now = time.time()
        return JSONResponse(
            {
                "runs": [
                    run_json(r.info, now, traceback=False) for r in rows if r.info is not None
                ],
                "errors": [r.error for r in rows if r.error is not None],
                "next_cursor": next_cursor,
            }
        )

    async def api_run(self, request: Request) -> Response:
        run_id = _path_id(request, "run_id")
        try:
            view = await build_run(self.catalog, run_id)
        except Unreadable as exc:
            return api_error(500, "unreadable", str(exc))
        if view is None:
            return api_error(404, "not_found", f"there is no run {run_id!r}")
        return JSONResponse(
            {
                "run": run_json(view.info, time.time()),
                "last_seq": view.last_seq,
                "workflow": view.workflow,
                "tree": view.tree.to_json() if view.tree is not None else None,
                "timeline": view.timeline.to_json() if view.timeline is not None else None,
                "errors": [
                    *view.errors,
                    *([view.events_error] if view.events_error else []),
                ],
            }
        )

    async def api_events(self, request: Request) -> Response:
        run_id = _path_id(request, "run_id")
        after = seq_param(request, "after")
        html = request.query_params.get("html") == "1"
        # With html=1, the page's trailing text item (from event `open` on) is rendered again
        # whole (a Markdown text reads right only as a whole), and so is the model call it
        # draws as running (event `running`) once the call has ended.
        opened = seq_param(request, "open") if html else 0
        running = seq_param(request, "running") if html else 0
        again_from = [s for s in (opened, running) if 0 < s <= after]
        base = min(again_from) - 1 if again_from else after
        store = self.runtime.run_store
        try:
            # Status first, then events: a run is marked finished only after its events are
            # written, so a finished status here means the events below are complete.
            info = await store.get_run(run_id)
            if info is None:
                return api_error(404, "not_found", f"there is no run {run_id!r}")
            # Only what this answer can carry: the items drawn again, then one poll's worth.
            events = await store.events(
                run_id, after=base, limit=after - base + EVENTS_PER_POLL + 1
            )
        except (StoreCorruptError, StoreError) as exc:
            return api_error(500, "unreadable", f"{type(exc).__name__}: {exc}")
        again = [e for e in events if e["seq"] <= after]
        new = [e for e in events if e["seq"] > after]
        more = len(new) > EVENTS_PER_POLL
        new = new[:EVENTS_PER_POLL]
        body: dict[str, Any] = {
            "run_id": run_id,
            "status": info.status,
            "error": info.error,
            "events": new,
            "last_seq": new[-1]["seq"] if new else after,
            "done": info.status != "running" and not more,
        }
        if html:
            body["html"] = self.event_fragments(
                request,
                info,
                [*again, *new],
                after,
                {opened, running},
                storage=request.query_params.get("storage") == "1",
            )
        return JSONResponse(body)

    def event_fragments(
        self,
        request: Request,
        info: RunInfo,
        events: list[Any],
        after: int,
        redraw: set[int],
        *,
        storage: bool,
    ) -> list[dict[str, Any]]:
        """The new events as the run page draws them (one `<li>` per item, by the page's own
        macro: Markdown rendered, everything escaped), each with the seq it starts at; and the
        page's items that start at a seq in `redraw` (the text item being extended, a model
        call that has ended since), drawn again to replace the page's."""
        calls = {
            e["data"].get("call"): {**e["data"], "failed": e["type"] == MODEL_CALL_FAILED}
            for e in events
            if e["type"] in (MODEL_CALL_FINISHED, MODEL_CALL_FAILED)
        }
        base = request.scope.get("root_path", "").rstrip("/")
        macros = self.env.get_template("_macros.html").make_module({"base": base})
        event = macros.event  # type: ignore[attr-defined]  # a macro of the template
        out: list[dict[str, Any]] = []
        for item in timeline(events):
            if item["last_seq"] <= after:
                if item["seq"] not in redraw:
                    continue  # drawn by an earlier answer
                if item["kind"] == MODEL_CALL_STARTED and item["data"].get("call") not in calls:
                    continue  # still running: drawn as it is
            if item["kind"] == AGENT_MESSAGES_COMMITTED and not storage:
                continue
            out.append({"seq": item["seq"], "html": str(event(item, info.started_at, calls))})
        return out

    async def api_scopes(self, request: Request) -> Response:
        try:
            rows, page, more, next_cursor, q = await self._scope_rows(request)
        except Unreadable as exc:
            return api_error(500, "unreadable", str(exc))
        body: dict[str, Any] = {
            "scopes": [{**scope_json(r.info), "agent_id": r.agent_id} for r in rows]
        }
        if q is not None:
            body["next_cursor"] = next_cursor
        else:
            body["page"] = page
            body["next_page"] = page + 1 if more else None
        return JSONResponse(body)

    async def api_scope(self, request: Request) -> Response:
        scope = _path_id(request, "scope")
        try:
            view = await self._conversation(request, scope, request.query_params.get("agent"))
        except Unreadable as exc:
            return api_error(500, "unreadable", str(exc))
        if view is None:
            return api_error(404, "not_found", f"there is no conversation {scope!r}")
        now = time.time()
        return JSONResponse(
            {
                "scope": scope,
                "info": scope_json(view.info) if view.info is not None else None,
                "system_prompt": view.prompt.to_json(),
                "turns": [t.to_json(now) for t in view.turns],
                "totals": totals_json(view.totals),
                "end": view.end,
                "older_before": view.older,
                "older_skip": view.skip,
                "errors": [
                    *view.errors,
                    *([view.records_error] if view.records_error else []),
                ],
            }
        )

    # -- errors ------------------------------------------------------------------------------

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if request.url.path.startswith(f"{request.scope.get('root_path', '')}/api/"):
            kind = _API_ERROR_TYPES.get(exc.status_code, "http_error")
            return api_error(exc.status_code, kind, exc.detail)
        title = "Not found" if exc.status_code == 404 else f"Error {exc.status_code}"
        message = (
            exc.detail
            if exc.status_code != 404 or exc.detail != "Not Found"
            else (f"Nothing lives at {request.url.path}.")
        )
        return self.error_page(request, exc.status_code, title, message)

    async def api_error(self, request: Request, exc: Exception) -> Response:
        # A request helper's refusal (a bad event number ...): JSON under /api/, else a page.
        assert isinstance(exc, ApiError)
        if request.url.path.startswith(f"{request.scope.get('root_path', '')}/api/"):
            return api_error(exc.status, exc.kind, exc.message)
        return self.error_page(request, exc.status, f"Error {exc.status}", exc.message)

    async def server_error(self, request: Request, exc: Exception) -> Response:
        # The exception (and whatever data is in its message) goes to the server's log only.
        if request.url.path.startswith(f"{request.scope.get('root_path', '')}/api/"):
            return api_error(500, "internal_error", "the server failed; its log says why")
        return self.error_page(
            request, 500, "Internal error", "The server failed on this page; its log says why."
        )


_MAX_LIMIT = 200
"""The most runs one `/api/runs` answer carries."""


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "")
    if not raw:
        return PAGE_SIZE
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= _MAX_LIMIT:
        raise HTTPException(400, f"limit must be an integer from 1 to {_MAX_LIMIT}, got {raw!r}")
    return value


def _time(request: Request, name: str) -> float | None:
    """`since` / `until`: a date (`2026-12-01`, a whole UTC day: `until` takes in that day),
    an ISO date and time (UTC unless it says otherwise), or Unix seconds."""
    raw = (request.query_params.get(name) or "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        if len(raw) == 10:
            day = datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
            return day.timestamp() + (86_400 if name == "until" else 0)
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise HTTPException(
            400,
            f"{name} must be a date (2026-12-01), a date and time (2026-12-01T09:30) or Unix "
            f"seconds, got {raw!r}",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _run_filters(request: Request) -> RunFilters:
    params = request.query_params
    status = params.get("status") or None
    if status is not None and status not in READ_STATUSES:
        raise HTTPException(
            400, f"status must be one of {', '.join(READ_STATUSES)}, got {status!r}"
        )

    def text(name: str) -> str | None:
        value = (params.get(name) or "").strip()
        return value or None

    where = RunQuery(
        status=status,
        name=text("agent"),
        tag=text("tag"),
        q=text("q"),
        since=_time(request, "since"),
        until=_time(request, "until"),
    )
    return RunFilters(where, show_all=params.get("all") == "1")


def _page(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    try:
        page = int(raw)
    except ValueError:
        raise HTTPException(400, f"page must be a positive integer, got {raw!r}") from None
    if page < 1:
        raise HTTPException(400, f"page must be a positive integer, got {raw!r}")
    return page


_API_ERROR_TYPES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}


def create_app(
    runtime: Runtime,
    registry: Registry | None = None,
    *,
    allowed_hosts: Iterable[str] | None = None,
    token: str | None = None,
    watch_registry: bool = True,
    chat_path: str | None = None,
) -> Starlette:
    """The inspection UI over `runtime`'s stores, as an ASGI app.

    Args:
        runtime: Whose message, run and workflow stores to show. It stays the caller's: the
            app never closes it.
        registry: The project's registry (`tether.lab.load_registry()`); it decides which
            agents, workflows, runs and conversations are listed. Without one, every agent and
            workflow the runtime created is listed, except title workflows.
        allowed_hosts: The `Host` names the app answers (others get 400: DNS rebinding).
            Default: the loopback names. `tether.ui.allowed_hosts(bind_host)` computes the set
            for a server; `["*"]` turns the check off (behind a proxy that checks it).
        token: When set, every request must carry it (`Authorization: Bearer`) or the cookie
            a browser gets for it at `/login`.
        watch_registry: Reload a registry loaded from a config file when the project's files
            change (see `tether.ui._reload`).
        chat_path: Where the app this one is mounted in serves a chat page per agent
            (`tether serve`: ``"/chat"``): the pages link to it. None: no chat links.
    """
    if not isinstance(runtime, Runtime):
        raise TypeError(f"create_app needs a tether.lab.Runtime, got {runtime!r:.80}")
    if registry is not None and not isinstance(registry, Registry):
        raise TypeError(f"registry must be a tether.lab.Registry, got {registry!r:.80}")
    pages = _Pages(runtime, registry, watch=watch_registry, chat=chat_path)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Open the stores now, so a bad store URL fails the server's start instead of the
        # first page. They are the runtime's to close.
        runtime.message_store  # noqa: B018
        runtime.run_store  # noqa: B018
        runtime.workflow_store  # noqa: B018
        yield

    routes = [
        Route("/", _redirect("/runs"), methods=["GET"]),
        Route("/runs", pages.runs, methods=["GET"]),
        Route("/runs/{run_id:path}", pages.run, methods=["GET"]),
        Route("/conversations", pages.conversations, methods=["GET"]),
        Route("/conversations/{scope:path}", pages.conversation, methods=["GET"]),
        Route("/agents", pages.agents, methods=["GET"]),
        Route("/agents/{agent_id:path}", pages.agent, methods=["GET"]),
        Route("/workflows", pages.workflows, methods=["GET"]),
        Route("/workflows/{workflow_id:path}", pages.workflow, methods=["GET"]),
        Route("/api/workflows/{workflow_id:path}", pages.api_workflow, methods=["GET"]),
        Route("/api/runs", pages.api_runs, methods=["GET"]),
        Route("/api/runs/{run_id:path}", pages.api_run, methods=["GET"]),
        # Not /api/runs/{id}/events: routes match the decoded path, where run "x/events"
        # (sent as x%2Fevents) would read as the events of run "x".
        Route("/api/events/{run_id:path}", pages.api_events, methods=["GET"]),
        Route("/api/scopes", pages.api_scopes, methods=["GET"]),
        Route("/api/scopes/{scope:path}", pages.api_scope, methods=["GET"]),
        Route("/blobs/{sha}", pages.blob, methods=["GET"]),
        *experiment_routes(pages),
        Mount("/static", StaticFiles(packages=[("tether.ui", "static")]), name="static"),
    ]
    app = GuardedApp(
        Access.of(allowed_hosts, token),
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: pages.http_error,
            ApiError: pages.api_error,
            Exception: pages.server_error,
        },
    )
    # What an app that mounts this one reads the (reloaded) registry from: `tether.serve`'s API.
    app.state.registry_source = pages.source
    return app


def _redirect(to: str) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        base = request.scope.get("root_path", "").rstrip("/")
        query = request.url.query
        target = f"{base}{to}" + (f"?{urlencode(dict(request.query_params))}" if query else "")
        return RedirectResponse(target, status_code=307)

    return endpoint


def _resume(info: RunInfo) -> str | None:
    """The command that resumes an interrupted root workflow run (its process died)."""
    if info.status != "interrupted" or info.kind != "workflow" or info.workflow_run_id:
        return None
    return f"tether workflow run {info.name} --run-id {info.run_id}"
