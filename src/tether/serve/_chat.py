"""The chat page: one per served agent, built on the run API (nothing of its own on the server).

`/chat` lists the agents; `/chat/{agent_id}` picks or starts a conversation (a memory scope),
sends a message (`POST /api/agents/{id}/runs`), follows the answer as it streams
(`EventSource` on `/api/runs/{run}/stream`, which reconnects with `Last-Event-ID` by itself)
with its tool calls and progress, and cancels it (`POST /api/runs/{run}/cancel`). The page is a
template and one script of this package: every model, tool or user text is put on the page as
text (`textContent`), never as markup, and the Content-Security-Policy allows only this
server's own script, stylesheets and connections.
"""

from __future__ import annotations

import time
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ..web import ApiError
from ..web.middleware import csrf_token
from ._api import RunsApi

__all__ = ["ChatPages"]


class ChatPages:
    """The chat pages over the served agents."""

    def __init__(self, runs: RunsApi) -> None:
        self.runs = runs
        self.env = jinja2.Environment(
            # The UI's templates second: the chat pages extend its base page.
            loader=jinja2.ChoiceLoader(
                [
                    jinja2.PackageLoader("tether.serve", "templates"),
                    jinja2.PackageLoader("tether.ui", "templates"),
                ]
            ),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(self, request: Request, name: str, context: dict[str, Any]) -> HTMLResponse:
        base = request.scope.get("root_path", "").rstrip("/")
        page = self.env.get_template(name).render(
            base=base,
            path=request.url.path,
            now=time.time(),
            csrf=csrf_token(request.scope),
            chat="/chat",
            registry_error=None,
            **context,
        )
        return HTMLResponse(page)

    async def index(self, request: Request) -> Response:
        agents = sorted(self.runs.agents().values(), key=lambda a: a.id)
        return self.render(request, "chat_index.html", {"agents": agents})

    async def chat(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        try:
            agent = self.runs.agent(agent_id)
        except ApiError as exc:
            response = self.render(request, "chat_missing.html", {"message": exc.message})
            response.status_code = 404
            return response
        scope = request.query_params.get("scope") or ""
        return self.render(request, "chat.html", {"agent": agent, "scope": scope})
