"""Every Python example in the README runs, as written, against a keyless stand-in world.

The examples name real providers and servers ("anthropic:…", "https://mcp.example.com/…",
"python -m my_server"); here a model string resolves to a function model that answers from the
request (it calls the first tool offered once, then answers; a response format gets a JSON object
of the schema's shape), and an MCP source resolves to the in-process test server. Top-level
`await` works as it does in a notebook. The examples are found with `pytest-examples`.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_examples import CodeExample, find_examples

import tether
import tether.agent
import tether.lab._host
import tether.mcp
from tether.llm.base import ChatRequest
from tether.testing import script_client
from tether.testing.mcp_server import create_test_mcp_server

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = [ex for ex in find_examples(README) if ex.prefix in ("py", "python")]


def _value(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: _value(v) for k, v in schema.get("properties", {}).items()}
    return {"string": "text", "integer": 1, "number": 1.0, "boolean": True, "array": []}.get(
        str(kind), "text"
    )


def function_model(request: ChatRequest) -> dict[str, Any]:
    """One model turn for `request`: a JSON object for a response format; the first offered tool
    once per user message; otherwise an answer that quotes the last tool result."""
    last = request["messages"][-1] if request["messages"] else None
    if "response_format" in request:
        return {"text": json.dumps(_value(request["response_format"].get("schema", {})))}
    tools = request.get("tools") or []
    if tools and last is not None and last["role"] == "user":
        spec = tools[0]
        return {"tool_use": [{"name": spec["name"], "input": _value(spec["input_schema"])}]}
    if last is not None and last["role"] == "tool":
        first = last["content"][0]
        return {"text": ["Done: ", str(first.get("output", ""))[:60]]}
    return {"text": ["Hello", " from", " the model."]}


def stand_in_client(config: Any) -> Any:
    if isinstance(config, list):  # a fallback chain: one stand-in per model
        from tether.llm import FallbackClient

        return FallbackClient([stand_in_client(c) for c in config])
    if not isinstance(config, dict):
        return config  # a client the example built itself
    model = str(config.get("model", "stand-in")).split(":", 1)[-1]
    return script_client([function_model] * 50, model=model)


def _answer(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda args: f"{name} result for {args['q']}"


def stand_in_server(*tools: str) -> Any:
    return create_test_mcp_server(
        tools=[
            {
                "name": name,
                "description": f"{name} the wiki",
                "input_schema": {
                    "type": "object",
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                },
                "run": _answer(name),
            }
            for name in tools
        ],
        resources=[{"name": "style-guide", "uri": "mem://style", "text": "Be brief."}],
    )


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[Any]]:
    """Model strings and MCP sources resolve to stand-ins; the example runs in an empty folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tether.agent, "client_from_config", stand_in_client)
    monkeypatch.setattr(tether.lab._host, "client_from_config", stand_in_client)
    real_http = tether.mcp.mcp_server
    servers: list[Any] = []

    def mcp_server(url: str, **kwargs: Any) -> Any:
        server = stand_in_server("search", "fetch", "edit")
        servers.append(server)
        return real_http(url, transport=server, **kwargs)

    def mcp_stdio(command: str, args: Any = (), **kwargs: Any) -> Any:
        for local in ("env", "cwd", "startup_timeout_ms"):
            kwargs.pop(local, None)
        server = stand_in_server("lookup")
        servers.append(server)
        return real_http(f"http://stdio.test/{command}", transport=server, **kwargs)

    for module in (tether, tether.mcp):
        monkeypatch.setattr(module, "mcp_server", mcp_server)
        monkeypatch.setattr(module, "mcp_stdio", mcp_stdio)
    yield servers


def setup_for(example: CodeExample, namespace: dict[str, Any]) -> None:
    """Context a fragment leaves to the reader (the experiments one names a project's agent)."""
    if "shell_tool(" in example.source:
        from tether.toolkits import bubblewrap_problem

        problem = bubblewrap_problem()
        if problem is not None:
            pytest.skip(f"the example sandboxes its shell with bubblewrap: {problem}")
    if example.source.startswith("report = await evaluate(lab,"):
        from tether.evals import evaluate
        from tether.lab import Runtime

        Path("cases.jsonl").write_text(
            json.dumps({"id": "hi", "input": "Hello", "expected": "Hello from the model."}) + "\n"
        )
        lab = Runtime(defaults={"model": "openai:gpt-4o-mini"})
        lab.create_agent(id="assistant", system_prompt="Answer briefly.")
        namespace.update(lab=lab, evaluate=evaluate, my_check=lambda case, result: True)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda ex: f"README.md:{ex.start_line}")
async def test_readme_example_runs(example: CodeExample, world: list[Any]) -> None:
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    setup_for(example, namespace)
    code = compile(
        example.source, f"README.md:{example.start_line}", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            result = eval(code, namespace)
            if result is not None:
                await result
    finally:
        for value in list(namespace.values()):
            if isinstance(value, tether.Agent) or type(value).__name__ == "Runtime":
                await value.aclose()
        for server in world:
            await server.aclose()
    assert "Traceback" not in printed.getvalue()


def test_every_python_example_of_the_readme_is_collected() -> None:
    fences = README.read_text().count("```python")
    assert len(EXAMPLES) == fences >= 8
