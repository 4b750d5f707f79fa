"""A lab world for the UI tests: real episodes and workflow runs on scripted models, with hostile
text in every place a model, a tool or a caller can put it, and a parser that finds anything on
a page that would execute."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

from tether import define_tool
from tether.errors import LLMError
from tether.lab import ConversationTitleInput, ConversationTitleOutput, LabAgent, Registry, Runtime
from tether.testing import script_client
from tether.ui import create_app
from tether.workflows import Workflow, WorkflowContext

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
"""What a model or tool might return to attack the page."""
ESCAPED = "&lt;script&gt;window.__pwned=1&lt;/script&gt;"
"""How the script part of HOSTILE reads once escaped (also inside JSON, which leaves it as is)."""


class TitleOut(pydantic.BaseModel):
    title: str


@dataclass
class World:
    runtime: Runtime
    registry: Registry
    first: str
    """researcher's first episode on "notes": a tool call (hostile output), then text."""
    second: str
    """researcher's follow-up on "notes"."""
    failed: str
    """researcher on "broken": the model fails before anything is stored."""
    review: str
    """The registered "review" workflow run: a step with an episode, a nested workflow."""
    title_run: str
    """The (unregistered) title workflow run that named "notes"."""
    writer_scope: str


def registry_of(runtime: Runtime, agents: list[str], workflows: list[str]) -> Registry:
    return Registry(
        runtime,
        {a: runtime.agents[a] for a in agents},
        {w: runtime.workflows[w] for w in workflows},
    )


async def text_of(agent: LabAgent[Any], **run: Any) -> str:
    return str((await agent.run(**run).result).text)


async def populate(runtime: Runtime) -> World:
    """Fill `runtime`'s stores with real lab runs."""
    namer = runtime.create_agent(
        id="conversation-title-namer",
        system_prompt="Reply with a short conversation title.",
        output_schema=TitleOut,
        model=script_client([{"text": json.dumps({"title": f"Title {HOSTILE}"})}]),
    )

    async def title_run(
        input: ConversationTitleInput, ctx: WorkflowContext[ConversationTitleInput]
    ) -> ConversationTitleOutput:
        episode = await namer.run(
            memory_scope=ctx.memory_scope_with_suffix("namer"), user="Write a short title."
        ).result
        return {"title": episode.output.title}

    title: Workflow[Any, Any] = runtime.create_workflow("conversation-title", title_run)
    lookup = define_tool(
        name="lookup",
        description="Look something up",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda value: f"result for {value['q']}: {HOSTILE}",
    )
    researcher = runtime.create_agent(
        id="researcher",
        system_prompt=f"You are a research assistant. {HOSTILE}",
        tools=[lookup],
        title_workflow=title,
        description="Finds papers",
        model=script_client(
            [
                {"tool_use": [{"name": "lookup", "input": {"q": HOSTILE}}]},
                {"text": ["Found ", "it ", HOSTILE]},
                {"text": "Second answer."},
                {"text": "partial ", "error": LLMError("quota <b>exceeded</b>", provider="x")},
            ]
        ),
    )
    writer = runtime.create_agent(
        id="writer",
        system_prompt="You write outlines.",
        model=script_client([{"text": "An outline."}]),
    )
    runtime.create_agent(
        id="templated",
        system_prompt=runtime.create_template(source="Hello {{ missing }}"),
        model=script_client([]),
    )
    runtime.create_agent(
        id="live",
        system_prompt=runtime.create_template(
            source="You help the {{ team }} team.", data={"team": HOSTILE}
        ),
        model=script_client([]),
    )

    async def polish_run(input: Any, ctx: WorkflowContext[Any]) -> str:
        return await ctx.step("shine", lambda: _shine(input))

    polish = runtime.create_workflow("polish", polish_run)

    async def review_run(input: dict[str, str], ctx: WorkflowContext[dict[str, str]]) -> Any:
        outline = await ctx.step(
            "outline",
            lambda: text_of(
                writer, memory_scope=ctx.memory_scope_with_suffix("writer"), user=input["topic"]
            ),
        )
        polished = await polish.run({"text": outline}).result
        return {"outline": outline, "polished": polished}

    review = runtime.create_workflow("review", review_run)

    first = await researcher.run(
        memory_scope="notes", user="Find <b>it</b>", tags=["demo", HOSTILE]
    ).result
    await runtime.wait_idle()
    second = await researcher.run(memory_scope="notes", user="And then?").result
    failing = researcher.run(memory_scope="broken", user="Try")
    with pytest.raises(LLMError):
        await failing.result
    handle = review.run({"topic": HOSTILE})
    await handle.result
    await runtime.wait_idle()
    [title_info] = [
        r for r in await runtime.run_store.list_runs() if r.name == "conversation-title"
    ]
    return World(
        runtime=runtime,
        registry=registry_of(
            runtime, ["researcher", "writer", "templated", "live"], ["review", "polish"]
        ),
        first=first.run_id,
        second=second.run_id,
        failed=failing.run_id,
        review=handle.workflow_run_id,
        title_run=title_info.run_id,
        writer_scope=f"{handle.workflow_run_id}:writer",
    )


async def _shine(value: Any) -> str:
    return f"shiny {value['text']} {HOSTILE}"


@pytest.fixture(params=["memory", "sqlite"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    store = "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'ui.db'}"
    runtime = Runtime(store=store, version=False, defaults={"model": script_client([])})
    yield await populate(runtime)
    await runtime.aclose()


def client_for(runtime: Runtime, registry: Registry | None = None) -> httpx.AsyncClient:
    app = create_app(runtime, registry)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


@pytest.fixture
async def client(world: World) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(world.runtime, world.registry) as c:
        yield c


class _Scan(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[dict[str, str | None]] = []
        self.handlers: list[tuple[str, str]] = []
        self.images: list[dict[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append(dict(attrs))
        if tag == "img":
            self.images.append(dict(attrs))
        for name, _ in attrs:
            if name.startswith("on"):
                self.handlers.append((tag, name))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def assert_inert(html: str) -> str:
    """Fail when the page holds anything that would run: a script other than the app's own,
    an event-handler attribute, an image. Returns the page's text (entities decoded)."""
    scan = _Scan()
    scan.feed(html)
    scan.close()
    assert scan.scripts == [{"src": "/static/tether.js", "defer": None}], scan.scripts
    assert scan.handlers == [], scan.handlers
    assert scan.images == [], scan.images
    return "".join(scan.text)
