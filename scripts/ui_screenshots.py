"""Take the documentation's screenshots of the inspection UI in headless Chromium.

    .venv/bin/python scripts/ui_screenshots.py [--out docs/images]

Fills a SQLite store with real lab runs (an agent with three tool rounds recorded at the "full"
level, one of them another agent used as a tool, a workflow with nested episodes, a failed run,
tags), serves the UI on loopback and
saves four PNGs: an episode's timeline, a workflow run's timeline, the request view of a model
call and a filtered run list.
The model is a scripted one that takes its time like a real one (a wait before the first token,
then a token at a time), priced by a price override, so every figure on the pages is real.
Needs Debian's chromium and chromium-driver (what the UI's browser tests use).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tether import define_tool
from tether.lab import Registry, Runtime
from tether.llm.base import ChatRequest, StreamChunk
from tether.workflows import WorkflowContext

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


class PacedModel:
    """A scripted model that waits before its first token and streams word by word."""

    provider = "anthropic"

    def __init__(self, model: str, replies: list[dict[str, Any]]) -> None:
        self.model = model
        self._replies = list(replies)

    async def chat(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        reply = self._replies.pop(0)
        await asyncio.sleep(reply.get("wait", 0.4))
        content: list[Any] = []
        text = reply.get("text", "")
        for word in text.split(" "):
            await asyncio.sleep(0.03)
            yield {"type": "text", "text": word + " "}
        if text:
            content.append({"type": "text", "text": text})
        for i, call in enumerate(reply.get("tools", [])):
            content.append({"type": "tool_call", "id": f"call_{len(self._replies)}_{i}", **call})
        yield {
            "type": "finish",
            "content": content,
            "stop_reason": "tool_use" if reply.get("tools") else "end_turn",
            "finish_reason": "tool_calls" if reply.get("tools") else "stop",
            "usage": reply["usage"],
        }

    async def aclose(self) -> None:
        return None


async def populate(runtime: Runtime) -> dict[str, str]:
    async def search(value: dict[str, str]) -> str:
        await asyncio.sleep(0.25)
        return f"3 papers on {value['query']}: lipid nanoparticles, AAV vectors, electroporation"

    async def fetch(value: dict[str, str]) -> str:
        await asyncio.sleep(0.15)
        return "Abstract: LNPs deliver Cas9 mRNA to the liver with high efficiency…"

    tools = [
        define_tool(
            name="search_papers",
            description="Search the literature",
            input_schema={"type": "object", "properties": {"query": {"type": "string"}},
                          "required": ["query"]},
            execute=search,
        ),
        define_tool(
            name="fetch_abstract",
            description="Fetch one paper's abstract",
            input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
            execute=fetch,
        ),
    ]  # fmt: skip
    summarizer = runtime.create_agent(
        id="summarizer",
        system_prompt="Summarise an abstract in one sentence.",
        description="Summarises one abstract",
        model=PacedModel(
            "claude-haiku-4-5",
            [
                {
                    "text": "LNPs carry Cas9 mRNA to liver cells efficiently.",
                    "usage": {"input_tokens": 420, "output_tokens": 18},
                    "wait": 0.25,
                }
            ],
        ),
    )
    tools.append(runtime.tool_from_agent(summarizer))
    researcher = runtime.create_agent(
        id="researcher",
        system_prompt="You are a research assistant. Cite the papers you use.",
        tools=tools,
        recording="full",
        model=PacedModel(
            "claude-sonnet-4-5",
            [
                {
                    "tools": [{"name": "search_papers", "input": {"query": "CRISPR delivery"}}],
                    "usage": {"input_tokens": 1840, "output_tokens": 64},
                    "wait": 0.55,
                },
                {
                    "tools": [{"name": "fetch_abstract", "input": {"id": "lnp-2024"}}],
                    "usage": {"input_tokens": 2010, "cache_read_tokens": 1792, "output_tokens": 41},
                    "wait": 0.35,
                },
                {
                    "tools": [{"name": "summarizer", "input": {"user": "Summarise lnp-2024"}}],
                    "usage": {"input_tokens": 2120, "cache_read_tokens": 1792, "output_tokens": 30},
                    "wait": 0.3,
                },
                {
                    "text": "**Lipid nanoparticles** are the most used carrier: they deliver Cas9 "
                    "mRNA to the liver. See *LNP 2024* for the numbers.",
                    "usage": {"input_tokens": 2260, "cache_read_tokens": 1792, "output_tokens": 58},
                    "wait": 0.45,
                },
                {
                    "text": "AAV vectors reach more tissues but carry less.",
                    "usage": {"input_tokens": 2400, "output_tokens": 22},
                    "wait": 0.3,
                },
            ],
        ),
    )
    writer = runtime.create_agent(
        id="writer",
        system_prompt="You write outlines.",
        model=PacedModel(
            "claude-sonnet-4-5",
            [
                {
                    "text": "1. Carriers 2. Targets 3. Safety",
                    "wait": 0.3,
                    "usage": {"input_tokens": 300, "output_tokens": 20},
                }
                for _ in range(4)
            ],
        ),
    )

    async def review_run(input: dict[str, str], ctx: WorkflowContext[dict[str, str]]) -> Any:
        outline = await ctx.step(
            "outline",
            lambda: _text(writer.run(memory_scope=ctx.run_local_scope("w"), user=input["topic"])),
        )
        notes = await ctx.step(
            "research",
            lambda: _text(researcher.run(memory_scope=ctx.run_local_scope("r"), user="And AAV?")),
        )
        return {"outline": outline, "notes": notes}

    review = runtime.create_workflow("review", review_run)
    first = await researcher.run(
        memory_scope="crispr-notes", user="How is CRISPR delivered in vivo?", tags=["demo"]
    ).result
    handle = review.run({"topic": "CRISPR delivery"})
    await handle.result
    for i in range(3):
        await writer.run(user=f"Outline {i}", tags=["demo"] if i else ["nightly"]).result
    return {"first": first.run_id, "review": handle.workflow_run_id}


async def _text(handle: Any) -> str:
    return str((await handle.result).text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs/images")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp())
    prices = {"anthropic:claude-sonnet-4-5": {"input_mtok": 3, "output_mtok": 15,
                                              "cache_read_mtok": 0.3},
              "anthropic:claude-haiku-4-5": {"input_mtok": 1, "output_mtok": 5}}  # fmt: skip
    runtime = Runtime(store=f"sqlite:///{tmp / 'ui.db'}", version=False, prices=prices)
    ids = asyncio.run(populate(runtime))
    registry = Registry(runtime, dict(runtime.agents), dict(runtime.workflows))
    from tether.ui._serve import _server

    port = free_port()
    server = _server(runtime, "127.0.0.1", port, registry, "warning")
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1360,2400", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp / 'chromium'}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    base = f"http://127.0.0.1:{port}"
    try:
        driver.get(f"{base}/runs/{ids['first']}")
        driver.find_element(By.CSS_SELECTOR, ".waterfall-section").screenshot(
            str(out / "ui-run-timeline.png")
        )
        driver.get(f"{base}/runs/{ids['review']}")
        driver.find_element(By.CSS_SELECTOR, ".waterfall-section").screenshot(
            str(out / "ui-workflow-timeline.png")
        )
        driver.get(f"{base}/runs/{ids['first']}?call=2")
        event = driver.find_element(By.CSS_SELECTOR, "details.request[open]")
        event.find_element(By.XPATH, "..").screenshot(str(out / "ui-request-view.png"))
        driver.get(f"{base}/runs?status=completed&tag=demo&q=crispr")
        driver.find_element(By.TAG_NAME, "main").screenshot(str(out / "ui-filtered-runs.png"))
    finally:
        driver.quit()
        server.should_exit = True
        thread.join(10)
        asyncio.run(runtime.aclose())
    for name in (
        "ui-run-timeline.png",
        "ui-workflow-timeline.png",
        "ui-request-view.png",
        "ui-filtered-runs.png",
    ):
        print(out / name)


if __name__ == "__main__":
    sys.exit(main())
