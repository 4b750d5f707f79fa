"""The pages, in process over an ASGI transport: what each shows, what it leaves out, 404s, and
that hostile text from models, tools and callers is text on every one of them."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import quote

import httpx
import pytest

from tether.lab import Runtime
from tether.stores.run_store import RunInfo
from tether.testing import script_client
from tether.ui import create_app
from tether.web.middleware import CONTENT_SECURITY_POLICY

from .conftest import ESCAPED, HOSTILE, World, assert_inert, client_for


def run_ids(html: str) -> list[str]:
    return re.findall(r'data-run-id="([^"]+)"', html)


async def page(client: httpx.AsyncClient, url: str, status: int = 200) -> str:
    response = await client.get(url)
    assert response.status_code == status, (url, response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("text/html")
    return response.text


async def test_root_redirects_to_the_runs(client: httpx.AsyncClient) -> None:
    response = await client.get("/")
    assert response.status_code == 307 and response.headers["location"] == "/runs"


async def test_runs_page_lists_registered_root_runs_newest_first(
    client: httpx.AsyncClient, world: World
) -> None:
    html = await page(client, "/runs")
    # The title workflow and every nested run (the namer, the writer, polish) stay out.
    assert run_ids(html) == [world.review, world.failed, world.second, world.first]
    text = assert_inert(html)
    assert "completed" in text and "failed" in text
    assert "UTC" in text  # started
    assert re.search(r"\d+ ms|\d+\.\d s", text)  # duration
    assert ESCAPED in html  # the hostile tag, as text
    assert '<a href="/conversations/notes">notes</a>' in html


async def test_all_runs_shows_nested_and_title_runs_too(
    client: httpx.AsyncClient, world: World
) -> None:
    html = await page(client, "/runs?all=1")
    ids = run_ids(html)
    assert world.title_run in ids and world.first in ids
    assert len(ids) == 8  # 3 researcher, title + namer, review + writer + polish
    assert_inert(html)


async def test_without_a_registry_the_runtime_definitions_are_listed_but_not_title_runs(
    world: World,
) -> None:
    async with client_for(world.runtime) as client:
        runs = await page(client, "/runs")
        assert world.title_run not in run_ids(runs)
        assert run_ids(runs) == [world.review, world.failed, world.second, world.first]
        agents = assert_inert(await page(client, "/agents"))
        assert "conversation-title-namer" in agents
        workflows = assert_inert(await page(client, "/workflows"))
        assert "review" in workflows and "conversation-title" not in workflows
        # The namer is a runtime agent, so its helper conversation is listed here.
        conversations = assert_inert(await page(client, "/conversations"))
        assert ":namer" in conversations


async def test_a_registered_title_workflow_is_listed(world: World) -> None:
    world.registry.workflows["conversation-title"] = world.runtime.workflows["conversation-title"]
    async with client_for(world.runtime, world.registry) as client:
        assert world.title_run in run_ids(await page(client, "/runs"))
        workflows = assert_inert(await page(client, "/workflows"))
        assert "names the conversations of researcher" in " ".join(workflows.split())


async def test_run_page_collapses_text_deltas_and_shows_tool_calls_and_tags(
    client: httpx.AsyncClient, world: World
) -> None:
    html = await page(client, f"/runs/{world.first}")
    text = assert_inert(html)
    # Three deltas, one text item holding the final text.
    assert html.count('class="ev ev-text"') == 1
    assert f"Found it {HOSTILE}" in text
    assert "#8–10" in text
    assert "tool call" in text and "lookup" in text
    assert f"result for {HOSTILE}: {HOSTILE}" in text
    assert "Modelrequests2" in text.replace("\n", "").replace(" ", "")
    footer = html[html.index('<footer class="tags-footer">') :]
    footer_text = assert_inert_fragment(footer)
    assert "Tags" in footer_text and "demo" in footer_text and HOSTILE in footer_text
    # Shown, not a filter: the seed gives tags a footer and the run list no tag filter.
    assert "<a " not in footer
    runs = await page(client, "/runs")
    assert '<span class="tag">demo</span>' in runs and "tag=" not in runs
    assert "data-live-run" not in html  # a finished run does not poll


def assert_inert_fragment(html: str) -> str:
    return assert_inert(f'<script src="/static/tether.js" defer></script>{html}')


async def test_failed_run_shows_partial_text_and_the_failure(
    client: httpx.AsyncClient, world: World
) -> None:
    html = await page(client, f"/runs/{world.failed}")
    text = assert_inert(html)
    assert "partial" in text
    assert 'class="ev ev-agent-failed"' in html
    assert "quota <b>exceeded</b>" in text and "<b>exceeded" not in html
    assert 'class="status status-failed"' in html


async def test_workflow_run_page_shows_steps_and_nested_runs_as_a_tree(
    client: httpx.AsyncClient, world: World
) -> None:
    html = await page(client, f"/runs/{world.review}")
    text = assert_inert(html)
    tree = html[html.index('<ul class="tree root">') : html.index('<section class="events">')]
    # The writer's episode sits under the "outline" step; polish is nested with its own step.
    outline = tree.index("<code>outline</code>")
    writer = tree.index(">writer</a>")
    polish = tree.index(">polish</a>")
    shine = tree.index("<code>shine</code>")
    assert outline < writer < polish < shine
    [writer_run] = await world.runtime.run_store.list_runs(
        workflow_run_id=world.review, kind="agent"
    )
    assert f'href="/runs/{writer_run.run_id}"' in tree
    assert f"shiny An outline. {HOSTILE}" in text
    assert "Input" in text and "Output" in text
    # A nested run links back to its parent and step.
    child = await page(client, f"/runs/{writer_run.run_id}")
    assert f'href="/runs/{world.review}"' in child and "<code>outline</code>" in child


async def test_conversations_list_shows_titles_and_leaves_unregistered_agents_out(
    client: httpx.AsyncClient, world: World
) -> None:
    html = await page(client, "/conversations")
    text = assert_inert(html)
    assert f"Title {HOSTILE}" in text
    assert world.writer_scope in text
    assert ":namer" not in text  # the namer is not in the registry
    assert f'href="/conversations/{quote(world.writer_scope, safe="")}"' in html


async def test_conversation_page_shows_the_pinned_prompt_and_splits_turns(
    client: httpx.AsyncClient, world: World
) -> None:
    html = await page(client, "/conversations/notes")
    text = assert_inert(html)
    assert 'class="prompt prompt-pinned"' in html
    assert f"You are a research assistant. {HOSTILE}" in text
    assert f"Title {HOSTILE}" in text
    turns = re.findall(r'<section class="turn" data-start="(\d+)" data-end="(\d+)">', html)
    assert turns == [("1", "5"), ("5", "7")]
    first, second = html.split('<section class="turn"')[1:3]
    assert world.first in first and "Find &lt;b&gt;it&lt;/b&gt;" in first and "lookup" in first
    assert world.second in second and "And then?" in second and "Second answer." in second


async def test_a_pinned_prompt_wins_over_the_live_definition(world: World) -> None:
    world.runtime.agents["researcher"].system_prompt = "A new identity."
    async with client_for(world.runtime, world.registry) as client:
        text = assert_inert(await page(client, "/conversations/notes"))
    assert "A new identity." not in text and "You are a research assistant." in text


async def test_an_unpinned_conversation_overlays_the_live_prompt(
    client: httpx.AsyncClient,
) -> None:
    # "broken" has a recorded episode but nothing stored: the agent's prompt is shown live.
    html = await page(client, "/conversations/broken")
    text = assert_inert(html)
    assert 'class="prompt prompt-live"' in html and "Not pinned yet" in text
    assert f"You are a research assistant. {HOSTILE}" in text
    assert "nothing stored" in text and "quota <b>exceeded</b>" in text


async def test_the_live_overlay_renders_templates_and_shows_an_error_when_one_cannot(
    client: httpx.AsyncClient,
) -> None:
    live = await page(client, "/conversations/fresh?agent=live")
    assert 'class="prompt prompt-live"' in live
    assert f"You help the {HOSTILE} team." in assert_inert(live)
    broken = await page(client, "/conversations/fresh?agent=templated")
    text = assert_inert(broken)
    assert 'class="prompt prompt-error"' in broken and "cannot render" in text
    assert "'missing' is undefined" in text
    assert "Nothing stored yet." in text


async def test_a_conversation_written_without_episodes_shows_its_records(world: World) -> None:
    store = world.runtime.message_store
    await store.append(
        "imported",
        [
            {"role": "user", "content": [{"type": "text", "text": HOSTILE}]},
            {"role": "assistant", "content": [{"type": "thinking", "text": "hmm"}]},
        ],
    )
    async with client_for(world.runtime, world.registry) as client:
        html = await page(client, "/conversations/imported")
        text = assert_inert(html)
        assert "records without a recorded episode" in text and HOSTILE in text
        assert 'class="prompt prompt-unknown"' in html
        # Naming an agent overlays its live prompt: this scope has not pinned one.
        overlay = await page(client, "/conversations/imported?agent=researcher")
        assert 'class="prompt prompt-live"' in overlay
        listed = assert_inert(await page(client, "/conversations"))
        assert "imported" in listed


async def test_agents_page_lists_ids_models_and_tools(client: httpx.AsyncClient) -> None:
    html = await page(client, "/agents")
    text = assert_inert(html)
    for agent_id in ("researcher", "writer", "templated", "live"):
        assert f'href="/agents/{agent_id}"' in html
    assert "conversation-title-namer" not in text  # not registered
    assert "lookup" in text and "script" in text and "Finds papers" in text
    assert "conversation-title" in text  # researcher's title workflow


async def test_agent_page_shows_the_live_prompt_or_why_it_cannot_render(
    client: httpx.AsyncClient,
) -> None:
    live = assert_inert(await page(client, "/agents/live"))
    assert f"You help the {HOSTILE} team." in live
    broken = assert_inert(await page(client, "/agents/templated"))
    assert "cannot render" in broken and "'missing' is undefined" in broken


async def test_an_agent_model_config_never_shows_its_key() -> None:
    runtime = Runtime(store="memory", version=False)
    runtime.create_agent(
        id="keyed",
        model={"model": "openai:gpt-4o", "api_key": "sk-secret", "headers": {"x": "secret-h"}},
    )
    async with client_for(runtime) as client:
        html = await page(client, "/agents")
        detail = await page(client, "/agents/keyed")
    assert "openai:gpt-4o" in html and "openai:gpt-4o" in detail
    assert "sk-secret" not in html + detail and "secret-h" not in html + detail
    await runtime.aclose()


async def test_workflows_page_lists_registered_workflows(client: httpx.AsyncClient) -> None:
    text = assert_inert(await page(client, "/workflows"))
    assert "review" in text and "polish" in text and "conversation-title" not in text


@pytest.mark.parametrize(
    "url",
    [
        "/runs/nope",
        "/conversations/nope",
        "/agents/nope",
        "/nowhere",
        f"/runs/{quote(HOSTILE, safe='')}",
        f"/conversations/{quote(HOSTILE, safe='')}",
        f"/agents/{quote(HOSTILE, safe='')}",
    ],
)
async def test_unknown_ids_get_a_404_page(client: httpx.AsyncClient, url: str) -> None:
    html = await page(client, url, 404)
    text = assert_inert(html)
    assert "Not found" in text


async def test_bad_filters_and_page_numbers_are_a_400(client: httpx.AsyncClient) -> None:
    html = await page(client, "/runs?status=zero", 400)
    assert "status must be one of" in assert_inert(html)
    await page(client, "/runs?cursor=nope", 400)
    await page(client, "/runs?until=tomorrow", 400)
    html = await page(client, "/conversations?page=0", 400)
    assert "page must be a positive integer" in assert_inert(html)


async def test_every_page_escapes_hostile_content(client: httpx.AsyncClient, world: World) -> None:
    [writer_run] = await world.runtime.run_store.list_runs(
        workflow_run_id=world.review, kind="agent"
    )
    # (page, whether hostile text belongs on it)
    urls = [
        ("/runs", True),
        ("/runs?all=1", True),
        (f"/runs/{world.first}", True),
        (f"/runs/{world.failed}", False),
        (f"/runs/{world.review}", True),
        (f"/runs/{world.title_run}", True),
        (f"/runs/{writer_run.run_id}", False),
        ("/conversations", True),
        ("/conversations/notes", True),
        ("/conversations/broken", True),
        (f"/conversations/{quote(world.writer_scope, safe='')}", True),
        ("/conversations/x?agent=live", True),
        ("/agents", False),
        ("/agents/researcher", True),
        ("/agents/live", True),
        ("/workflows", False),
    ]
    for url, hostile in urls:
        html = await page(client, url)
        text = assert_inert(html)
        assert "<script>window" not in html and "<img" not in html, url
        # Where a model, tool or caller put it, it is on the page: as text.
        assert ("<script>window.__pwned=1</script>" in text) is hostile, url


async def test_hostile_scope_names_and_agent_ids_are_escaped_and_linked_safely() -> None:
    runtime = Runtime(store="memory", version=False)
    agent = runtime.create_agent(
        id=f"a{HOSTILE}", system_prompt="p", model=script_client([{"text": "ok"}])
    )
    scope = f"s/{HOSTILE}?#%41 ünï 🦀 /../x"
    await agent.run(memory_scope=scope, user="hi").result
    async with client_for(runtime) as client:
        for url in ["/runs", "/conversations", "/agents"]:
            html = await page(client, url)
            assert_inert(html)
        html = await page(client, "/conversations")
        assert f'href="/conversations/{quote(scope, safe="")}"' in html
        detail = await page(client, f"/conversations/{quote(scope, safe='')}")
        assert scope in assert_inert(detail)
        agent_page = await page(client, f"/agents/{quote(agent.id, safe='')}")
        assert agent.id in assert_inert(agent_page)
    await runtime.aclose()


async def test_security_headers_and_the_static_files(client: httpx.AsyncClient) -> None:
    response = await client.get("/runs")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    css = await client.get("/static/tether.css")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]
    js = await client.get("/static/tether.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    # The script parses markup only from the server's own rendered fragments (into an inert
    # <template>), and builds none from data.
    assert js.text.count("innerHTML") == 1 and "holder.innerHTML = fragment.html;" in js.text
    for unsafe in ("insertAdjacentHTML", "outerHTML", "document.write", "eval(", "Function("):
        assert unsafe not in js.text, unsafe
    assert "http://" not in js.text and "https://" not in js.text
    for asset in (css.text, (await client.get("/runs")).text):
        assert "http://" not in asset and "https://" not in asset  # nothing from the network


async def test_a_registered_namer_lists_its_helper_conversations(world: World) -> None:
    world.registry.agents["conversation-title-namer"] = world.runtime.agents[
        "conversation-title-namer"
    ]
    async with client_for(world.runtime, world.registry) as client:
        text = assert_inert(await page(client, "/conversations"))
    assert f"{world.title_run}:namer" in text


async def test_a_system_prompt_conflict_warning_is_a_warning_panel() -> None:
    runtime = Runtime(store="memory", version=False)
    first = runtime.create_agent(
        id="first", system_prompt="One.", model=script_client([{"text": "a"}])
    )
    other = runtime.create_agent(
        id="other", system_prompt=f"Two {HOSTILE}", model=script_client([{"text": "b"}])
    )
    await first.run(memory_scope="s", user="x").result
    result = await other.run(memory_scope="s", user="y").result
    async with client_for(runtime) as client:
        html = await page(client, f"/runs/{result.run_id}")
    text = assert_inert(html)
    assert 'class="panel panel-warning"' in html
    assert "system_prompt_conflict" in text and "keeping the pinned prompt" in text
    await runtime.aclose()


async def test_long_lists_are_paged() -> None:
    runtime = Runtime(store="memory", version=False)
    runtime.create_agent(id="a", model=script_client([]))
    for i in range(57):
        await runtime.run_store.start_run(
            RunInfo(run_id=f"run-{i:02d}", kind="agent", name="a", started_at=1000.0 + i)
        )
        await runtime.message_store.append(
            f"scope-{i:02d}", [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
        )
    async with client_for(runtime) as client:
        first = await page(client, "/runs")
        assert run_ids(first) == [f"run-{i:02d}" for i in range(56, 6, -1)]
        older = re.search(r'<a class="next" href="(/runs\?cursor=[^"]+)"', first)
        assert older is not None
        second = await page(client, older.group(1).replace("&amp;", "&"))
        assert run_ids(second) == [f"run-{i:02d}" for i in range(6, -1, -1)]
        assert 'class="next"' not in second and "newest" in second
        api = (await client.get("/api/runs")).json()
        assert len(api["runs"]) == 50 and api["next_cursor"] is not None
        rest = (await client.get(f"/api/runs?cursor={api['next_cursor']}")).json()
        assert len(rest["runs"]) == 7 and rest["next_cursor"] is None
        scopes = (await client.get("/api/scopes")).json()
        assert len(scopes["scopes"]) == 50 and scopes["next_page"] == 2
        rest = (await client.get("/api/scopes?page=2")).json()
        assert len(rest["scopes"]) == 7 and rest["next_page"] is None
    await runtime.aclose()


async def test_an_unexpected_failure_is_a_500_with_the_security_headers() -> None:
    """A store that raises something no page expects: the server's own 500 answer carries the
    same headers as every other response, and says nothing of the exception."""
    runtime = Runtime(store="memory", version=False)

    async def broken(**kwargs: object) -> list[RunInfo]:
        raise RuntimeError(HOSTILE)

    runtime.run_store.list_runs = broken  # type: ignore[method-assign]
    runtime.run_store.query_runs = broken  # type: ignore[method-assign, assignment]
    app = create_app(runtime)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        html = await client.get("/runs")
        api = await client.get("/api/runs")
    for response in (html, api):
        assert response.status_code == 500
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "pwned" not in response.text
    assert html.headers["content-type"].startswith("text/html")
    assert "Internal error" in assert_inert(html.text)
    assert api.headers["content-type"] == "application/json"
    assert api.json()["error"]["type"] == "internal_error"
    await runtime.aclose()


def hrefs(html: str) -> list[str]:
    """Every link target on a page, entities decoded, except the pager's relative ones."""
    return [h.replace("&amp;", "&") for h in re.findall(r'href="([^"?][^"]*)"', html)]


@pytest.mark.parametrize("name", [".", ".."])
async def test_ids_that_are_dot_segments_are_linked_to_their_own_pages(name: str) -> None:
    """A browser (and httpx) resolves /conversations/.. to / before asking, and %2E%2E too, so
    such a scope, run or agent is linked with its id in the query instead."""
    runtime = Runtime(store="memory", version=False)
    agent = runtime.create_agent(
        id=name, system_prompt=f"prompt of {name}", model=script_client([{"text": "ok"}])
    )
    await agent.run(memory_scope=name, user="hi").result

    async def flow(value: object, ctx: object) -> str:
        return "done"

    await runtime.create_workflow("flow", flow).run("x", workflow_run_id=name).result
    await runtime.wait_idle()
    async with client_for(runtime) as client:
        for listing in ("/runs", "/conversations", "/agents"):
            html = await page(client, listing)
            for href in hrefs(html):
                if not href.startswith("/static/"):
                    await page(client, href)  # its own page: no redirect, no 404
        conversation = await page(client, hrefs(await page(client, "/conversations"))[-1])
        assert f"<dt>Memory scope</dt><dd><code>{name}</code></dd>" in conversation
        assert f"prompt of {name}" in conversation
        runs = await page(client, "/runs")
        row = runs[runs.index(f'data-run-id="{name}"') :]
        run = await page(client, hrefs(row)[0])
        assert f"<dt>Run</dt><dd><code>{name}</code></dd>" in run
        agents = await page(client, "/agents")
        detail = await page(client, hrefs(agents[agents.index("<tbody>") :])[0])
        assert f'<span class="kind">agent</span> {name}</h1>' in detail
    await runtime.aclose()


async def raw_get(app: object, path: str) -> tuple[int, dict[str, str], bytes]:
    """GET `path` exactly as given (an HTTP client would resolve its dot segments first)."""
    sent: list[dict[str, object]] = []
    requested = False

    async def receive() -> dict[str, object]:
        nonlocal requested
        if requested:  # the client stays connected until the answer is complete
            await asyncio.Event().wait()
        requested = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"localhost")],
        "server": ("localhost", 80),
        "client": ("127.0.0.1", 1),
    }
    await app(scope, receive, send)  # type: ignore[operator]
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}  # type: ignore[attr-defined]
    body = b"".join(m.get("body", b"") for m in sent[1:])  # type: ignore[misc]
    return start["status"], headers, body  # type: ignore[return-value]


async def test_static_files_cannot_be_left_by_a_path_and_every_answer_has_the_headers() -> None:
    runtime = Runtime(store="memory", version=False)
    app = create_app(runtime)
    for path in [
        "/static/../_app.py",
        "/static/../../tether/ui/_app.py",
        "/static/%2e%2e/_app.py",
        "/static/..%2f_app.py",
        "/static//etc/passwd",
        "/static/nope.css",
    ]:
        status, headers, body = await raw_get(app, path)
        assert status == 404, path
        assert b"create_app" not in body and b"root:" not in body, path
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
    for path in ["/static/tether.css", "/static/tether.js", "/nowhere", "/api/nothing"]:
        status, headers, _ = await raw_get(app, path)
        assert status in (200, 404), path
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        assert headers["x-content-type-options"] == "nosniff", path
    await runtime.aclose()
