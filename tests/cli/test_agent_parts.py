"""A lab agent with every harness part from the command line, in real processes: an MCP server
(the official SDK's, over stdio), a guardrail and OpenTelemetry tracing run from the installed
`tether agent run`, and the agent page of `tether ui` lists its MCP tools and guardrails."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import textwrap
from pathlib import Path

import httpx
import pytest
from tests.weather_mcp_server import SCRIPT

from .conftest import Project
from .test_entry_point import TETHER, env, posix_only, tether

LAB = '''
"""A weather agent: an MCP server, a guardrail, OpenTelemetry tracing, a scripted model."""

import json
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from tether import define_guardrail, prompt_layer
from tether.lab import Runtime
from tether.mcp import mcp_stdio
from tether.otel import OtelSink
from tether.testing import script_client

SPANS = Path(__file__).resolve().parent.parent / "spans.jsonl"


class FileExporter(SpanExporter):
    def export(self, spans):
        with SPANS.open("a", encoding="utf-8") as out:
            for span in spans:
                attributes = {k: v for k, v in (span.attributes or {}).items()}
                out.write(json.dumps({"name": span.name, "attributes": attributes}) + "\\n")
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter()))


def model(request):
    """Forecast, then try to purge (the guardrail says no), then answer."""
    results = [p for m in request["messages"] for p in m["content"] if p["type"] == "tool_result"]
    if not results:
        return {"text": "Checking. ", "tool_use": [{"name": "w_forecast", "input": {"city": "Oslo"}}]}
    if len(results) == 1:
        return {"tool_use": [{"name": "w_purge", "input": {"city": "Oslo"}}]}
    return {"text": "Oslo: " + results[0]["output"].split(": ", 1)[1]}


def no_purge(subject):
    if subject["name"] == "w_purge":
        return {"action": "deny", "reason": "purging is not allowed"}
    return None


lab = Runtime(version=False)
weather = lab.create_agent(
    id="weather",
    model=script_client([model] * 3, model="scripted-weather"),
    system_prompt=[prompt_layer("identity", "You forecast.", cache=True)],
    integrations=[mcp_stdio(sys.executable, [SERVER], prefix="w_", attach=["units"])],
    guardrails=[define_guardrail(name="read-only", tool_call=no_purge)],
    trace=OtelSink(tracer_provider=provider, agent_name="weather"),
)
'''

CONFIG = """
runtime = "APP.lab:lab"
agents = ["APP.lab:weather"]
store = "sqlite:///.tether/cli.db"
"""


@pytest.fixture
def weather(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    package = "weatherapp"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("", encoding="utf-8")
    lab = textwrap.dedent(LAB).replace("[SERVER]", f"[{str(SCRIPT)!r}]")
    (root / package / "lab.py").write_text(lab, encoding="utf-8")
    (root / "tether.toml").write_text(CONFIG.replace("APP", package), encoding="utf-8")
    monkeypatch.chdir(root)
    return Project(root, package)


def test_an_agent_with_mcp_a_guardrail_and_otel_runs_from_tether_agent_run(
    weather: Project,
) -> None:
    run = tether(weather, "agent", "run", "weather", "--scope", "oslo", "--input", "Oslo?")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "Oslo: sunny, 21 C"
    assert '[tool] w_forecast {"city": "Oslo"}' in run.stderr
    assert "[guardrail] read-only deny w_purge: purging is not allowed" in run.stderr
    assert "[tool] w_purge failed: Guardrail read-only denied the call" in run.stderr
    spans = [
        json.loads(line)
        for line in (weather.root / "spans.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    names = [s["name"] for s in spans]
    assert "invoke_agent weather" in names
    assert names.count("chat scripted-weather") == 3
    assert "execute_tool w_forecast" in names and "execute_tool w_purge" in names
    (turn,) = [s for s in spans if s["name"] == "invoke_agent weather"]
    assert turn["attributes"]["gen_ai.conversation.id"] == "oslo"
    listed = json.loads(tether(weather, "runs", "list", "--json").stdout)
    assert [(r["name"], r["status"]) for r in listed] == [("weather", "completed")]


@posix_only
def test_the_agent_page_of_tether_ui_lists_its_mcp_tools_and_guardrails(
    weather: Project,
) -> None:
    child = subprocess.Popen(
        [str(TETHER), "ui", "--port", "0"],
        cwd=weather.root,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = None
        seen = []
        for line in child.stdout:
            seen.append(line)
            found = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
                break
        assert port is not None, "".join(seen)
        page = httpx.get(f"http://127.0.0.1:{port}/agents/weather", timeout=60)
        assert page.status_code == 200, page.text[:500]
        assert '<code class="tool-name mcp-tool">w_forecast</code>' in page.text
        assert '<code class="tool-name mcp-tool">w_purge</code>' in page.text
        assert "read-only" in page.text and "on tool calls" in page.text
        assert "OtelSink" in page.text
        child.send_signal(signal.SIGINT)
        child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0
