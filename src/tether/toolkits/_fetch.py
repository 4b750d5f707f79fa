"""`fetch_tool`: GET a public http(s) URL and return it as text the model can read.

Each hop (the URL, then every redirect) is checked before anything is sent: the scheme, the
host against `allow_hosts`, and the address. The host is resolved once, every address of the
answer is checked, and the connection is made to the checked address — the URL's host is kept
for the Host header and for TLS (SNI and certificate checking) — so a DNS answer that changes
between the check and the connection (rebinding) changes nothing. The body is read as a stream
and cut at `max_bytes`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import httpx

from ..context import RunContext
from ..errors import ConfigError, ToolError
from ..tools import ToolResult, define_tool
from ._addresses import IPAddress, Networks, ip_literal, networks, refusal
from ._toolkit import Toolkit, from_run, one_string_input, trace

__all__ = ["Resolver", "fetch_tool", "system_resolver"]

Resolver: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolves a host name and port to IP addresses (as strings)."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML = ("text/html", "application/xhtml+xml")


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's resolver (``getaddrinfo``), without blocking the event loop."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Refused(Exception):
    pass


def _host_allowed(host: str, allow_hosts: tuple[str, ...] | None) -> bool:
    if allow_hosts is None:
        return True
    host = host.rstrip(".").lower()
    for pattern in allow_hosts:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]):
                return True
        elif host == pattern:
            return True
    return False


@dataclass(slots=True, eq=False)  # compared and hashed by identity, as before
class _Fetch:
    allow_hosts: tuple[str, ...] | None
    allowed: Networks | None
    max_bytes: int
    timeout: float
    max_redirects: int
    headers: Mapping[str, str] | Callable[[RunContext], Mapping[str, str]] | None
    resolver: Resolver
    verify: ssl.SSLContext | bool

    async def address(self, url: httpx.URL) -> IPAddress:
        """The one address this hop connects to, checked; or _Refused saying why."""
        if url.scheme not in ("http", "https"):
            raise _Refused(f"only http and https URLs are fetched, not {url.scheme or '(none)'}:")
        if url.userinfo:
            raise _Refused("URLs with a user name or password are not fetched")
        host = url.host
        if not host:
            raise _Refused("the URL has no host")
        if not _host_allowed(host, self.allow_hosts):
            raise _Refused(
                f"{host} is not one of the allowed hosts ({', '.join(self.allow_hosts or ())})"
            )
        literal = ip_literal(host)
        if literal is None and host.rstrip(".").rsplit(".", 1)[-1].isdigit():
            raise _Refused(f"{host!r} is neither a host name nor a valid IP address")
        if literal is not None:
            found = [literal]
        else:
            port = url.port or (443 if url.scheme == "https" else 80)
            try:
                answer = await self.resolver(host, port)
            except (OSError, UnicodeError) as exc:
                raise _Refused(f"{host} could not be resolved: {exc}") from None
            found = []
            for text in answer:
                ip = ip_literal(text)
                if ip is None:
                    raise _Refused(f"the resolver answered {text!r} for {host}, not an address")
                found.append(ip)
            if not found:
                raise _Refused(f"{host} has no address")
        for ip in found:
            why = refusal(ip, self.allowed)
            if why is not None:
                named = "" if literal is not None else f"{host} resolves to "
                raise _Refused(f"{named}{why}: only public addresses are fetched")
        return found[0]

    async def run(self, args: dict[str, Any], ctx: RunContext) -> ToolResult:
        raw = args["url"]
        try:
            url = httpx.URL(raw)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise ToolError(f"fetch: {raw[:200]!r} is not a URL: {exc}") from None
        extra = dict(from_run(self.headers, ctx)) if self.headers is not None else {}
        first_host = url.host
        hops: list[str] = []
        try:
            async with asyncio.timeout(self.timeout):
                return await self._follow(url, extra, first_host, hops, ctx)
        except _Refused as exc:
            trace(ctx, "fetch:refused", {"url": str(url)[:500], "hops": hops, "reason": str(exc)})
            raise ToolError(f"fetch refused {str(url)[:300]}: {exc}") from None
        except TimeoutError:
            raise ToolError(f"fetch: {str(url)[:300]} took longer than {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise ToolError(
                f"fetch: {str(url)[:300]} failed: {type(exc).__name__}: {exc}"
            ) from None

    async def _follow(
        self,
        url: httpx.URL,
        extra: dict[str, str],
        first_host: str,
        hops: list[str],
        ctx: RunContext,
    ) -> ToolResult:
        async with httpx.AsyncClient(
            trust_env=False, verify=self.verify, follow_redirects=False, timeout=self.timeout
        ) as client:
            for _ in range(self.max_redirects + 1):
                ip = await self.address(url)
                hops.append(str(url)[:500])
                headers = {"Host": url.netloc.decode("ascii"), "Accept-Encoding": "gzip, deflate"}
                if url.host == first_host:
                    headers |= extra  # credentials go to the host they were given for only
                target = url.copy_with(host=str(ip))
                extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
                request = client.build_request(
                    "GET", target, headers=headers, extensions=extensions
                )
                response = await client.send(request, stream=True)
                try:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        url = url.join(response.headers["location"])
                        continue
                    body, cut = await self._read(response)
                finally:
                    await response.aclose()
                return self._result(url, ip, response, body, cut, hops, ctx)
        raise _Refused(f"more than {self.max_redirects} redirects")

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            room = self.max_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                return b"".join(chunks), True  # the rest is never read
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), False

    def _result(
        self,
        url: httpx.URL,
        ip: IPAddress,
        response: httpx.Response,
        body: bytes,
        cut: bool,
        hops: list[str],
        ctx: RunContext,
    ) -> ToolResult:
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        text = _render(media, body, response.encoding or "utf-8")
        if cut:
            text += f"\n[cut at {self.max_bytes} bytes]"
        status = response.status_code
        trace(
            ctx,
            "fetch:get",
            {
                "url": str(url)[:500],
                "address": str(ip),
                "status": status,
                "content_type": media,
                "bytes": len(body),
                "truncated": cut,
                "redirects": len(hops) - 1,
            },
        )
        head = f"URL: {url}\nStatus: {status}\nContent-Type: {media or '(none)'}\n\n"
        return ToolResult(head + text, status >= 400)


def _render(media: str, body: bytes, charset: str) -> str:
    if media in _HTML:
        return html_to_markdown(body.decode(charset, "replace"))
    if media == "application/json" or media.endswith("+json"):
        try:
            return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        except ValueError:
            return body.decode(charset, "replace")
    if (
        media.startswith("text/")
        or media in ("application/xml", "application/javascript")
        or (not media and b"\x00" not in body[:1024])
    ):
        return body.decode(charset, "replace")
    return f"[{media} content, {len(body)} bytes: not shown]"


_FURNITURE = [
    "head", "script", "style", "noscript", "template", "iframe", "svg", "canvas",
    "nav", "footer", "aside", "form", "button",
]  # fmt: skip
"""What a reader of the page's text does not read: code, styling, navigation, forms."""


def html_to_markdown(html: str) -> str:
    """Readable Markdown of an HTML page: scripts, styles and page furniture dropped."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(_FURNITURE):
        tag.decompose()
    markdown: str = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    lines = [line.rstrip() for line in markdown.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


_SCHEMA = one_string_input("url", "An http or https URL.")


def fetch_tool(
    allow_hosts: Sequence[str] | None = None,
    *,
    allow_private: bool | Sequence[str] = False,
    max_bytes: int = 512 * 1024,
    timeout: float = 30.0,
    max_redirects: int = 5,
    headers: Mapping[str, str] | Callable[[RunContext], Mapping[str, str]] | None = None,
    resolver: Resolver | None = None,
    verify: ssl.SSLContext | bool = True,
    name: str = "fetch",
) -> Toolkit:
    """A tool that GETs an http(s) URL: HTML comes back as Markdown, JSON pretty-printed.

    Args:
        allow_hosts: Host names it may fetch (``"docs.python.org"``, or ``"*.example.com"`` for
            the subdomains); None: any public host.
        allow_private: Also connect to non-public addresses: True for all of them (loopback,
            private, link-local, metadata...), or a list of networks (``["10.1.2.0/24"]``);
            False (the default) only public ones.
        max_bytes: The most of a body that is read (decompressed); the rest is cut.
        timeout: Seconds a fetch may take, redirects included.
        max_redirects: Redirects followed, each checked like the first URL.
        headers: Sent to the URL's own host (never to another host a redirect leads to), or
            a function of the call's `RunContext` returning them — a token from the run.
        resolver: ``async (host, port) -> [addresses]``; the system resolver by default.
        verify: TLS verification: True (the system's CAs), False, or an `ssl.SSLContext`.
        name: The tool's name.

    Raises:
        ConfigError: a wrong option, or the ``fetch`` extra (markdownify) is not installed.
    """
    if importlib.util.find_spec("markdownify") is None or importlib.util.find_spec("bs4") is None:
        raise ConfigError(
            "fetch_tool turns HTML into Markdown with markdownify, which is not installed: "
            "pip install 'tether[fetch]'"
        )
    hosts: tuple[str, ...] | None = None
    if allow_hosts is not None:
        if isinstance(allow_hosts, str) or not all(isinstance(h, str) for h in allow_hosts):
            raise ConfigError("fetch_tool: allow_hosts must be a list of host names")
        hosts = tuple(h.rstrip(".").lower() for h in allow_hosts)
    allowed: Networks | None
    if allow_private is True:
        allowed = None
    elif allow_private is False:
        allowed = ()
    else:
        try:
            allowed = networks(list(allow_private))
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"fetch_tool: allow_private must be a bool or networks: {exc}"
            ) from None
    if type(max_bytes) is not int or max_bytes < 1:
        raise ConfigError(f"fetch_tool: max_bytes must be a positive int, got {max_bytes!r}")
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(f"fetch_tool: timeout must be positive seconds, not {timeout!r}")
    fetch = _Fetch(
        hosts,
        allowed,
        max_bytes,
        timeout,
        max_redirects,
        headers,
        resolver or system_resolver,
        verify,
    )
    scope = "any public web address" if hosts is None else "only " + ", ".join(hosts)
    description = (
        f"Fetch a web page or file by GET ({scope}). HTML is returned as Markdown, JSON "
        f"pretty-printed, other text as it is; at most {max_bytes} bytes of the body."
    )
    return Toolkit(
        [define_tool(name=name, description=description, input_schema=_SCHEMA, execute=fetch.run)]
    )
