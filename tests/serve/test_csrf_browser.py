"""Cross-site request forgery in headless Chromium: pages served from another port of the same
host (same site: the browser sends the server's cookies) and from another origin try every
request a page can make without the server's consent — `fetch` in no-cors mode, a JSON `fetch`
(preflighted), forms posting text/plain and urlencoded bodies — against real `tether serve`
processes, with and without a token; none starts or cancels anything. The server's own chat
page, in the same logged-in browser, still sends."""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.browser import chromium, require_chromium

from .conftest import Server, free_port, start_server, write_project

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TOKEN = "browser-csrf-token"

ATTACK = """<!doctype html><html><head><title>attacking</title></head><body>
<iframe name="sink" id="sink"></iframe>
<form id="plain" method="post" enctype="text/plain" target="sink"
      action="{target}/api/agents/chat/runs"><input name='{{"input": "form", "x": "' value='"}}'></form>
<form id="urlencoded" method="post" target="sink"
      action="{target}/api/workflows/pipeline/runs"><input name="input" value="x"></form>
<script>
const target = {target_js};
const results = [];
async function attempt(name, run) {{
  try {{ const r = await run(); results.push(name + ":" + (r.type || r.status)); }}
  catch (e) {{ results.push(name + ":blocked"); }}
}}
function submit(id) {{
  return new Promise((done) => {{
    const sink = document.getElementById("sink");
    sink.onload = () => done({{ status: "submitted" }});
    document.getElementById(id).submit();
    setTimeout(() => done({{ status: "timeout" }}), 5000);
  }});
}}
(async () => {{
  const body = JSON.stringify({{ input: "attack" }});
  await attempt("no-cors text", () => fetch(target + "/api/agents/chat/runs",
    {{ method: "POST", mode: "no-cors", credentials: "include", body,
       headers: {{ "content-type": "text/plain" }} }}));
  await attempt("no-cors bare", () => fetch(target + "/api/agents/chat/runs",
    {{ method: "POST", mode: "no-cors", credentials: "include", body }}));
  await attempt("json cors", () => fetch(target + "/api/agents/chat/runs",
    {{ method: "POST", credentials: "include", body,
       headers: {{ "content-type": "application/json" }} }}));
  await attempt("ag-ui", () => fetch(target + "/api/agents/chat/ag-ui",
    {{ method: "POST", mode: "no-cors", credentials: "include", body }}));
  await attempt("no-cors cancel", () => fetch(target + "/api/runs/" + {run_js} + "/cancel",
    {{ method: "POST", mode: "no-cors", credentials: "include" }}));
  await attempt("form text/plain", () => submit("plain"));
  await attempt("form urlencoded", () => submit("urlencoded"));
  document.title = "done";
  document.body.setAttribute("data-results", results.join("|"));
}})();
</script></body></html>"""


class _Attacker(BaseHTTPRequestHandler):
    target = ""
    run_id = ""

    def do_GET(self) -> None:
        page = ATTACK.format(
            target=html.escape(self.target),
            target_js=json.dumps(self.target),
            run_js=json.dumps(self.run_id),
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def attacker() -> Iterator[tuple[int, type[_Attacker]]]:
    handler = type("Attacker", (_Attacker,), {})
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield port, handler
    server.shutdown()
    server.server_close()
    thread.join()


def serve(tmp: pytest.TempPathFactory, name: str, token: str | None) -> Server:
    root = write_project(tmp.mktemp(name) / "project")
    env = {
        "TETHER_TEST_STORE": f"sqlite:///{root / 'tether.db'}",
        "TETHER_TEST_DELAY": "0",
        # A workflow run that is still running while the pages try to cancel it.
        "TETHER_TEST_STEP_SECONDS": "10",
    }
    if token:
        env["TETHER_SERVE_TOKEN"] = token
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return start_server(root, env, headers=headers)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = serve(tmp_path_factory, "open", None)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = serve(tmp_path_factory, "token", TOKEN)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def runs_of(server: Server) -> int:
    with server.client() as client:
        return len(client.get("/api/runs", params={"limit": 200}).json()["runs"])


def running_workflow(server: Server, handler: type[_Attacker]) -> str:
    with server.client() as client:
        started = client.post("/api/workflows/pipeline/runs", json={"input": 1})
        assert started.status_code == 202, started.text
    handler.target = server.base
    handler.run_id = started.json()["run_id"]
    return handler.run_id


def status_of(server: Server, run_id: str) -> str:
    with server.client() as client:
        status: str = client.get(f"/api/runs/{run_id}").json()["run"]["status"]
        return status


def attack(browser: WebDriver, page: str) -> str:
    browser.get(page)
    WebDriverWait(browser, 30).until(lambda d: d.title == "done")
    return browser.find_element(By.TAG_NAME, "body").get_attribute("data-results") or ""


@pytest.mark.parametrize("where", ["127.0.0.1", "localhost"], ids=["other-port", "other-origin"])
def test_pages_elsewhere_start_nothing_on_a_loopback_server(
    open_server: Server,
    attacker: tuple[int, type[_Attacker]],
    browser: WebDriver,
    where: str,
) -> None:
    port, handler = attacker
    run_id = running_workflow(open_server, handler)
    before = runs_of(open_server)
    results = attack(browser, f"http://{where}:{port}/")
    # Every attempt went out (the forms were submitted, the no-cors fetches sent) ...
    assert "form text/plain:submitted" in results and "no-cors text:opaque" in results, results
    # ... and the preflighted one was stopped by the browser; nothing ran.
    assert "json cors:blocked" in results
    assert runs_of(open_server) == before
    assert status_of(open_server, run_id) == "running"  # the bodiless cancel did nothing


def test_a_logged_in_browser_is_not_used_by_a_page_on_another_port(
    token_server: Server, attacker: tuple[int, type[_Attacker]], browser: WebDriver
) -> None:
    browser.get(f"{token_server.base}/login?token={TOKEN}")
    WebDriverWait(browser, 15).until(lambda d: "/login" not in d.current_url)
    port, handler = attacker
    run_id = running_workflow(token_server, handler)
    before = runs_of(token_server)
    # Same site (127.0.0.1, another port): the browser sends the session cookie with each.
    results = attack(browser, f"http://127.0.0.1:{port}/")
    assert "form urlencoded:submitted" in results, results
    assert runs_of(token_server) == before
    assert status_of(token_server, run_id) == "running"
    # The server's own page, in this same browser, still starts a run (with its CSRF token).
    browser.get(f"{token_server.base}/chat/chat")
    box = browser.find_element(By.ID, "chat-input")
    box.send_keys("hello")
    browser.find_element(By.ID, "chat-send").click()
    WebDriverWait(browser, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".chat-assistant .chat-text")
    )
    assert runs_of(token_server) == before + 1
