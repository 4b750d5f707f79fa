"""An A2A agent built with the official a2a-sdk (1.x), served on loopback by uvicorn: what
tether's A2A client is tested against. `python sdk_server.py PORT [TOKEN]`.

The agent answers by a rule on the message's text:

- ``fail …``: the task fails, saying why;
- ``ask …``: the task stops, input-required, asking which city;
- ``picture``: an artifact holding a PNG and a caption;
- anything else: ``echo N: TEXT``, streamed in two chunks, where N counts the messages the
  context has seen (so a test sees the remote context carry on).
"""

from __future__ import annotations

import base64
import sys
from collections import Counter

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
SEEN: Counter[str] = Counter()


class Rules(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        await updater.start_work()
        if text.startswith("fail"):
            await updater.failed(new_text_message("cannot do that"))
            return
        if text.startswith("ask"):
            await updater.requires_input(new_text_message("which city?"))
            return
        if text.startswith("picture"):
            parts = [pb.Part(text="a dot"), pb.Part(raw=PNG, media_type="image/png")]
            await updater.add_artifact(parts, name="picture")
            await updater.complete()
            return
        SEEN[task.context_id] += 1
        await updater.add_artifact([pb.Part(text="echo ")], artifact_id="a", name="answer")
        rest = f"{SEEN[task.context_id]}: {text}"
        await updater.add_artifact([pb.Part(text=rest)], artifact_id="a", append=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def app(port: int, token: str | None) -> Starlette:
    url = f"http://127.0.0.1:{port}/"
    card = pb.AgentCard(
        name="Echo Agent",
        description="Echoes what it is told, counting the messages of the context.",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "image/png"],
        skills=[
            pb.AgentSkill(id="echo", name="Echo", description="Says it back.", tags=["echo"]),
            pb.AgentSkill(id="draw", name="Draw", description="Draws a dot.", tags=["image"]),
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=Rules(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]

    class Gate(BaseHTTPMiddleware):
        async def dispatch(self, request, call_next):  # type: ignore[no-untyped-def]
            if token and request.headers.get("authorization") != f"Bearer {token}":
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            return await call_next(request)

    return Starlette(routes=routes, middleware=[Middleware(Gate)])


if __name__ == "__main__":
    port = int(sys.argv[1])
    token = sys.argv[2] if len(sys.argv) > 2 else None
    uvicorn.run(app(port, token), host="127.0.0.1", port=port, log_level="warning")
