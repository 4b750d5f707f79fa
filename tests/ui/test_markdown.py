"""Markdown on the pages is safe: raw HTML is text, only http/https/mailto links survive (and
open with rel=noopener), images are never loaded, and the page's CSP is unchanged."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from tether.lab import Runtime
from tether.testing import script_client
from tether.ui._markdown import MAX_MARKDOWN, render_markdown
from tether.web.middleware import CONTENT_SECURITY_POLICY

from .conftest import assert_inert, client_for

ATTACKS = [
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=2">',
    "[click me](javascript:window.__pwned=3)",
    "[upper](JAVASCRIPT:window.__pwned=4)",
    "[spaced](  javascript:window.__pwned=5  )",
    "[entity](java&#115;cript:window.__pwned=6)",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[vb](vbscript:msgbox(1))",
    "<javascript:window.__pwned=7>",
    '<a href="javascript:window.__pwned=8">raw link</a>',
    '<iframe src="https://evil.example"></iframe>',
    "![tracker](https://evil.example/pixel.png)",
    "![inline](data:image/png;base64,AAAA)",
    '<div style="position:fixed">overlay</div>',
    "<!-- a comment -->",
]


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Links()
    parser.feed(html)
    return parser.tags


@pytest.mark.parametrize("attack", ATTACKS)
def test_no_attack_becomes_markup(attack: str) -> None:
    html = str(render_markdown(f"before {attack} after"))
    for tag, attrs in tags_of(html):
        assert tag in {"div", "p", "a", "span", "code", "em", "strong"}, (tag, html)
        assert not any(name.startswith("on") or name == "style" for name in attrs), html
        if tag == "a":
            href = attrs.get("href") or ""
            assert re.match(r"^(https?:|mailto:)", href), html
            assert attrs.get("rel") == "noopener noreferrer nofollow"


def test_markdown_is_rendered() -> None:
    html = str(
        render_markdown("# Title\n\n**bold** and `code <b>`\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    )
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html
    assert "<code>code &lt;b&gt;</code>" in html and "<table>" in html
    link = str(render_markdown("[docs](https://example.com/a?b=1&c=2)"))
    assert (
        '<a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer nofollow" '
        'target="_blank">docs</a>' in link
    )
    image = str(render_markdown("![a cat](https://example.com/cat.png)"))
    assert "<img" not in image and "[image: a cat]" in image
    huge = str(render_markdown("<b>" * (MAX_MARKDOWN // 3 + 1)))
    assert huge.startswith('<pre class="text">&lt;b&gt;')


async def test_markdown_attacks_on_a_run_and_its_conversation_stay_inert() -> None:
    reply = "\n\n".join(ATTACKS)
    runtime = Runtime(store="memory", version=False)
    agent = runtime.create_agent(id="md", model=script_client([{"text": reply}]))
    result = await agent.run(memory_scope="md-scope", user="\n\n".join(ATTACKS)).result
    async with client_for(runtime) as client:
        for url in (f"/runs/{result.run_id}", "/conversations/md-scope"):
            response = await client.get(url)
            assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            html = response.text
            assert_inert(html)
            assert "javascript:" not in " ".join(
                str(a.get("href")) for t, a in tags_of(html) if t == "a"
            )
            assert not [t for t, _ in tags_of(html) if t in ("iframe", "img", "script")][1:]
            main = html[html.index("<main>") :]
            assert "<iframe" not in main and "<img" not in main and 'style="' not in main
            assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    await runtime.aclose()
