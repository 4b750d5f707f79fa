"""Message text as Markdown, safely: CommonMark (plus tables and strikethrough) by markdown-it-py
with raw HTML off, so whatever a model writes is text or Markdown's own markup, never markup of
its own.

- Raw HTML (`<script>`, `<img onerror>`, comments) is shown as text.
- Links keep only `http:`, `https:` and `mailto:` targets (and relative ones); `javascript:`,
  `data:`, `vbscript:` and the rest stay plain text. Links open with `rel="noopener noreferrer
  nofollow"`.
- Images are never loaded: `![alt](url)` becomes the text "[image: alt]" beside a link to the
  URL (when its scheme is allowed), so a message cannot make the browser fetch anything.
- The Content-Security-Policy stays as it is: nothing here needs inline script or style.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup, escape

from .._extras import missing_extra

try:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise missing_extra("the inspection UI needs markdown-it-py", "lab") from exc

__all__ = ["MAX_MARKDOWN", "render_markdown"]

MAX_MARKDOWN = 200_000
"""Longer texts are shown as plain preformatted text (rendering them would stall the page)."""
_SCHEMES = frozenset({"http", "https", "mailto"})
_REL = "noopener noreferrer nofollow"


def _allowed(url: str) -> bool:
    scheme = urlsplit(url.strip()).scheme.lower()
    return scheme == "" or scheme in _SCHEMES


def _link_open(
    renderer: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    token.attrSet("rel", _REL)
    token.attrSet("target", "_blank")
    return str(renderer.renderToken(tokens, idx, options, env))


def _image(
    renderer: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    alt = "".join(child.content for child in token.children or [])
    src = str(token.attrGet("src") or "")
    label = escape(f"[image: {alt}]" if alt else "[image]")
    if src and _allowed(src):
        return f'<a class="md-image" href="{escape(src)}" rel="{_REL}" target="_blank">{label}</a>'
    return f'<span class="md-image">{label}</span>'


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _allowed  # type: ignore[method-assign]  # markdown-it's documented hook
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    return md


_MD = _parser()


def render_markdown(text: Any) -> Markup:
    """`text` as safe HTML (a `<div class="md">`); anything but a string is shown as text."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if len(text) > MAX_MARKDOWN:
        return Markup('<pre class="text">{}</pre>').format(text)
    return Markup('<div class="md">') + Markup(_MD.render(text)) + Markup("</div>")
