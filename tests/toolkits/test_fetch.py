"""fetch_tool against real HTTP servers on loopback: the honest fetch works, and every SSRF
variant is refused before a connection is made (a guard fails any connection to an address
that is not loopback, so a refusal that came too late would show).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tether import RunContext, Session, create_agent
from tether.errors import ConfigError
from tether.testing import collect, script_client
from tether.toolkits import Toolkit, fetch_tool, html_to_markdown
from tether.tools import ToolResult

PAGE = """<!doctype html><html><head><title>T</title><style>body{color:red}</style>
<script>alert('x')</script></head><body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Hello</h1><p>Some <b>bold</b> text and
<a href="/next">a link</a>.</p><ul><li>one</li><li>two</li></ul><footer>© the footer</footer></body></html>"""


class Handler(BaseHTTPRequestHandler):
    label = "A"
    seen: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, status: int, body: bytes, kind: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.seen.append({"path": self.path, "headers": dict(self.headers), "label": self.label})
        if url.path == "/html":
            self.send(200, PAGE.encode(), "text/html; charset=utf-8")
        elif url.path == "/json":
            self.send(200, b'{"b":[1,2],"a":{"x":"\\u00e9"}}', "application/json")
        elif url.path == "/text":
            self.send(200, f"plain from {self.label}\n".encode(), "text/plain")
        elif url.path == "/png":
            self.send(200, b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png")
        elif url.path == "/gzip":
            self.send(200, gzip.compress(b"z" * 1_000_000), "text/plain", Content_Encoding="gzip")
        elif url.path == "/big":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                for _ in range(10_000):  # 100 MB unless the reader hangs up
                    self.wfile.write(b"x" * 10_000)
            except OSError:
                pass
        elif url.path == "/redirect":
            self.send(302, b"", "text/plain", Location=query["to"][0])
        elif url.path == "/loop":
            self.send(302, b"", "text/plain", Location="/loop")
        elif url.path == "/missing":
            self.send(404, b"no such page", "text/plain")
        else:
            self.send(200, f"root of {self.label}".encode(), "text/plain")


def serve(
    host: str, port: int, label: str, seen: list[dict[str, Any]], tls: ssl.SSLContext | None = None
) -> ThreadingHTTPServer:
    handler = type(f"Handler{label}", (Handler,), {"label": label, "seen": seen})
    server = ThreadingHTTPServer((host, port), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Servers:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.a = serve("127.0.0.1", 0, "A", self.seen)
        self.port = self.a.server_address[1]
        self.b = serve("127.0.0.2", self.port, "B", self.seen)  # the same port, another address

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        for server in (self.a, self.b):
            server.shutdown()
            server.server_close()


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def only_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any connection to an address outside loopback: no test may reach one, and a
    refusal made after connecting would show here."""
    original = asyncio.base_events.BaseEventLoop.create_connection

    async def guarded(
        self: Any, protocol_factory: Any, host: Any = None, port: Any = None, **kw: Any
    ) -> Any:
        assert host is None or str(host).startswith("127.") or host == "::1", (
            f"connection to {host}"
        )
        return await original(self, protocol_factory, host, port, **kw)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "create_connection", guarded)


def names(table: dict[str, list[str]], calls: list[str] | None = None) -> Any:
    """A resolver answering from `table` (recording each lookup in `calls`)."""

    async def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise OSError(f"unknown name {host}")
        return table[host]

    return resolve


async def get(tk: Toolkit, url: str, ctx: RunContext | None = None) -> ToolResult:
    return await tk["fetch"].call({"url": url}, ctx or RunContext("test"))


# -- the honest fetch ------------------------------------------------------------------------


async def test_html_comes_back_as_markdown(servers: Servers) -> None:
    result = await get(fetch_tool(allow_private=True), servers.url("/html"))
    assert not result.is_error
    head, body = result.output.split("\n\n", 1)
    assert head == f"URL: {servers.url('/html')}\nStatus: 200\nContent-Type: text/html"
    assert body == "# Hello\n\nSome **bold** text and\n[a link](/next).\n\n- one\n- two"


async def test_json_is_pretty_printed_and_text_kept(servers: Servers) -> None:
    tk = fetch_tool(allow_private=True)
    result = await get(tk, servers.url("/json"))
    assert result.output.split("\n\n", 1)[1] == json.dumps(
        {"b": [1, 2], "a": {"x": "é"}}, indent=2, ensure_ascii=False
    )
    assert (await get(tk, servers.url("/text"))).output.endswith("\n\nplain from A\n")
    png = await get(tk, servers.url("/png"))
    assert png.output.endswith("[image/png content, 108 bytes: not shown]")


async def test_the_body_is_cut_while_streaming(servers: Servers) -> None:
    result = await get(fetch_tool(allow_private=True, max_bytes=1000), servers.url("/big"))
    assert result.output.endswith("x" * 1000 + "\n[cut at 1000 bytes]")
    unzipped = await get(fetch_tool(allow_private=True, max_bytes=5000), servers.url("/gzip"))
    assert unzipped.output.endswith("z" * 5000 + "\n[cut at 5000 bytes]")  # a gzip bomb is cut too


async def test_an_error_status_is_an_error_result(servers: Servers) -> None:
    result = await get(fetch_tool(allow_private=True), servers.url("/missing"))
    assert result.is_error and "Status: 404" in result.output and "no such page" in result.output


async def test_redirects_are_followed_and_too_many_refused(servers: Servers) -> None:
    tk = fetch_tool(allow_private=True)
    result = await get(tk, servers.url("/redirect?to=/text"))
    assert result.output.startswith(f"URL: {servers.url('/text')}\nStatus: 200")
    loop = await get(tk, servers.url("/loop"))
    assert loop.is_error and "more than 5 redirects" in loop.output


async def test_names_resolve_once_and_the_connection_goes_to_that_address(servers: Servers) -> None:
    calls: list[str] = []
    tk = fetch_tool(allow_private=True, resolver=names({"docs.tether.test": ["127.0.0.1"]}, calls))
    result = await get(tk, f"http://docs.tether.test:{servers.port}/text")
    assert result.output.endswith("plain from A\n")
    assert calls == ["docs.tether.test"]
    assert servers.seen[-1]["headers"]["Host"] == f"docs.tether.test:{servers.port}"


async def test_allow_hosts_limits_the_hosts(servers: Servers) -> None:
    resolver = names({"api.tether.test": ["127.0.0.1"], "other.tether.test": ["127.0.0.1"]})
    tk = fetch_tool(["api.tether.test"], allow_private=True, resolver=resolver)
    assert not (await get(tk, f"http://api.tether.test:{servers.port}/text")).is_error
    other = await get(tk, f"http://other.tether.test:{servers.port}/text")
    assert other.is_error and "not one of the allowed hosts" in other.output
    wild = fetch_tool(["*.tether.test"], allow_private=True, resolver=resolver)
    assert not (await get(wild, f"http://other.tether.test:{servers.port}/text")).is_error
    redirect = await get(
        tk,
        f"http://api.tether.test:{servers.port}/redirect?to=http://other.tether.test:{servers.port}/text",
    )
    assert redirect.is_error and "not one of the allowed hosts" in redirect.output


async def test_headers_from_the_run_go_to_their_host_only(servers: Servers) -> None:
    resolver = names({"api.tether.test": ["127.0.0.1"], "elsewhere.tether.test": ["127.0.0.2"]})
    tk = fetch_tool(
        allow_private=True,
        resolver=resolver,
        headers=lambda ctx: {"Authorization": f"Bearer {ctx.services['token']}"},
    )
    ctx = RunContext("s", services={"token": "t-123"})
    hop = f"http://elsewhere.tether.test:{servers.port}/text"
    result = await get(tk, f"http://api.tether.test:{servers.port}/redirect?to={hop}", ctx)
    assert result.output.endswith("plain from B\n")
    first, second = servers.seen[-2:]
    assert first["headers"]["Authorization"] == "Bearer t-123"
    assert "Authorization" not in second["headers"]


async def test_an_agent_fetches_and_the_fetch_is_traced(servers: Servers) -> None:
    records: list[Any] = []
    client = script_client(
        [
            {"tool_use": [{"name": "fetch", "input": {"url": servers.url("/text")}}]},
            {"tool_use": [{"name": "fetch", "input": {"url": "http://169.254.169.254/"}}]},
            {"text": "done"},
        ]
    )
    agent = create_agent(
        llm=client, tools=[*fetch_tool(allow_private=["127.0.0.0/8"])], trace=records.append
    )
    await collect(agent, Session(), "fetch")
    mine = [r for r in records if r["name"].startswith("fetch:")]
    assert [r["name"] for r in mine] == ["fetch:get", "fetch:refused"]
    assert mine[0]["data"] == {
        "url": servers.url("/text"),
        "address": "127.0.0.1",
        "status": 200,
        "content_type": "text/plain",
        "bytes": 13,
        "truncated": False,
        "redirects": 0,
    }
    assert "cloud metadata" in mine[1]["data"]["reason"]


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="allow_hosts must be a list"):
        fetch_tool("example.com")
    with pytest.raises(ConfigError, match="allow_private"):
        fetch_tool(allow_private=["not-a-network"])
    with pytest.raises(ConfigError, match="max_bytes"):
        fetch_tool(max_bytes=0)


def test_the_fetch_extra_is_imported_only_to_convert_a_page() -> None:
    code = "import tether.toolkits, sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('bs4', 'markdownify')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_html_to_markdown_drops_scripts_and_styles() -> None:
    text = html_to_markdown(PAGE)
    assert "alert" not in text and "color:red" not in text and text.startswith("# Hello")
    assert "About" not in text and "footer" not in text


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: no certificate for the TLS test")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=secure.tether.test",
            "-addext",
            "subjectAltName=DNS:secure.tether.test",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_https_checks_the_name_while_connecting_to_the_checked_address(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    seen: list[dict[str, Any]] = []
    server = serve("127.0.0.1", 0, "TLS", seen, tls)
    port = server.server_address[1]
    try:
        trust = ssl.create_default_context(cafile=str(cert))
        resolver = names({"secure.tether.test": ["127.0.0.1"], "wrong.tether.test": ["127.0.0.1"]})
        tk = fetch_tool(allow_private=True, resolver=resolver, verify=trust)
        result = await get(tk, f"https://secure.tether.test:{port}/text")
        assert result.output.endswith("plain from TLS\n"), result.output
        wrong = await get(tk, f"https://wrong.tether.test:{port}/text")
        assert wrong.is_error and "CERTIFICATE_VERIFY_FAILED" in wrong.output  # the name counts
    finally:
        server.shutdown()
        server.server_close()


# -- SSRF ------------------------------------------------------------------------------------

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "0x7f.1",
    "0x7f.0x0.0x0.0x1",
    "0177.0.0.1",
    "017700000001",
    "2130706433",
    "0x7f000001",
    "127.0.0.1.",
    "127.255.255.254",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "[::127.0.0.1]",
    "[64:ff9b::127.0.0.1]",
    "[2002:7f00:1::]",
    "0.0.0.0",
    "0",
    "[::]",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
async def test_every_spelling_of_loopback_is_refused(servers: Servers, host: str) -> None:
    port = servers.port if "[" not in host else 9
    result = await get(fetch_tool(), f"http://{host}:{port}/text")
    # refused by our check, or (a few spellings) already by httpx's URL parser: nothing is sent
    assert result.is_error and ("fetch refused" in result.output or "is not a URL" in result.output)
    assert servers.seen == []
    # the same server is reachable for an honest call that allows it
    assert not (await get(fetch_tool(allow_private=True), servers.url("/text"))).is_error


PRIVATE_AND_METADATA = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://0xa9fea9fe/",
    "http://2852039166/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://192.0.0.192/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://[fc00::1]/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://198.18.0.1/",
]


@pytest.mark.parametrize("url", PRIVATE_AND_METADATA)
async def test_private_link_local_and_metadata_addresses_are_refused(url: str) -> None:
    result = await get(fetch_tool(), url)
    assert result.is_error and "fetch refused" in result.output, result.output


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("localtest.tether.test", ["127.0.0.1"]),
        ("metadata.google.internal", ["169.254.169.254"]),
        ("intranet.tether.test", ["10.1.2.3"]),
        ("v6.tether.test", ["::1"]),
        ("mapped.tether.test", ["::ffff:127.0.0.1"]),
        ("mixed.tether.test", ["93.184.216.34", "127.0.0.1"]),  # one bad answer spoils it
    ],
)
async def test_a_name_resolving_to_a_private_address_is_refused(
    name: str, answer: list[str]
) -> None:
    result = await get(fetch_tool(resolver=names({name: answer})), f"http://{name}/")
    assert result.is_error and f"{name} resolves to" in result.output, result.output


async def test_localhost_by_the_system_resolver_is_refused(servers: Servers) -> None:
    for host in ("localhost", "LOCALHOST"):
        result = await get(fetch_tool(), f"http://{host}:{servers.port}/text")
        assert result.is_error and "resolves to" in result.output
    assert servers.seen == []


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.2:{port}/text",
        "http://[::1]:{port}/text",
        "http://169.254.169.254/latest/meta-data/",
        "http://0x7f.2:{port}/text",
        "file:///etc/passwd",
        "gopher://127.0.0.1:{port}/",
    ],
)
async def test_every_redirect_is_checked_again(servers: Servers, target: str) -> None:
    tk = fetch_tool(allow_private=["127.0.0.1"])  # the first server only
    to = target.format(port=servers.port)
    result = await get(tk, servers.url(f"/redirect?to={to}"))
    assert result.is_error and "fetch refused" in result.output, result.output
    assert [s["label"] for s in servers.seen] == ["A"]


async def test_a_dns_answer_that_changes_between_lookups_changes_nothing(servers: Servers) -> None:
    """Rebinding: the first answer is the allowed address, every later one the forbidden one.
    A fetch that looked the name up again to connect would reach server B."""
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["127.0.0.2"]

    tk = fetch_tool(allow_private=["127.0.0.1"], resolver=rebinding)
    result = await get(tk, f"http://rebind.tether.test:{servers.port}/text")
    assert result.output.endswith("plain from A\n")
    assert calls == ["rebind.tether.test"]
    assert [s["label"] for s in servers.seen] == ["A"]
    # the next call resolves anew, gets the forbidden answer, and is refused
    again = await get(tk, f"http://rebind.tether.test:{servers.port}/text")
    assert again.is_error and "127.0.0.2 is a loopback address" in again.output
    assert [s["label"] for s in servers.seen] == ["A"]


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://127.0.0.1/",
        "gopher://127.0.0.1:70/",
        "dict://127.0.0.1:11211/",
        "javascript:alert(1)",
        "http://user:pass@127.0.0.1/",
        "http://999.1.1.1/",
        "not a url at all",
        "http:///nohost",
    ],
)
async def test_other_schemes_userinfo_and_malformed_urls_are_refused(url: str) -> None:
    result = await get(fetch_tool(allow_private=True), url)
    assert result.is_error, result.output


async def test_an_ipv6_address_is_connected_to_when_allowed() -> None:
    class V6Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    seen: list[dict[str, Any]] = []
    server = V6Server(("::1", 0), type("HandlerV6", (Handler,), {"label": "V6", "seen": seen}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        tk = fetch_tool(allow_private=["::1"], resolver=names({"v6.tether.test": ["::1"]}))
        assert (await get(tk, f"http://v6.tether.test:{port}/text")).output.endswith(
            "plain from V6\n"
        )
        assert (await get(tk, f"http://[::1]:{port}/text")).output.endswith("plain from V6\n")
        assert seen[0]["headers"]["Host"] == f"v6.tether.test:{port}"
        assert seen[1]["headers"]["Host"] == f"[::1]:{port}"
        refused = await get(fetch_tool(), f"http://[::1]:{port}/text")
        assert refused.is_error and len(seen) == 2
    finally:
        server.shutdown()
        server.server_close()
