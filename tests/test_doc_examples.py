"""Every Python example of the documentation site (docs/**/*.md) runs, as written, in the same
keyless stand-in world as the README's (tests/test_readme.py): model strings resolve to a
function model, MCP sources to the in-process test server, and top-level `await` works.

Each fenced ``python`` block is one example with its own namespace, so every block on a page
stands on its own. A block fenced as ``python {test="skip"}`` would be left out; none is, and a
test keeps it that way.
"""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from pytest_examples import CodeExample, find_examples
from tests.test_readme import world

import tether

__all__ = ["world"]  # the fixture, shared with the README's examples

DOCS = Path(__file__).resolve().parents[1] / "docs"
EXAMPLES = [ex for ex in find_examples(DOCS) if ex.prefix in ("py", "python")]


def _label(example: CodeExample) -> str:
    return f"{example.path.relative_to(DOCS)}:{example.start_line}"


@pytest.mark.parametrize("example", EXAMPLES, ids=_label)
async def test_doc_example_runs(example: CodeExample, world: list[Any]) -> None:
    if "shell_tool(" in example.source:
        from tether.toolkits import bubblewrap_problem

        problem = bubblewrap_problem()
        if problem is not None:
            pytest.skip(f"the example sandboxes its shell with bubblewrap: {problem}")
    namespace: dict[str, Any] = {"__name__": "doc_example"}
    code = compile(example.source, _label(example), "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
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


def test_the_docs_have_examples_and_none_is_skipped() -> None:
    pages = {ex.path for ex in EXAMPLES}
    assert len(pages) >= 10, sorted(str(p.relative_to(DOCS)) for p in pages)
    for path in DOCS.rglob("*.md"):
        assert 'python {test="skip"}' not in path.read_text(encoding="utf-8"), path


def test_the_readme_links_to_pages_the_site_has() -> None:
    import re

    import yaml

    config = yaml.safe_load((DOCS.parent / "mkdocs.yml").read_text(encoding="utf-8"))
    site = config["site_url"]
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    links = set(re.findall(re.escape(site) + r"([\w/-]*)", readme))
    assert len(links) >= 8
    for link in links:
        page = link.rstrip("/")
        candidates = (
            [DOCS / f"{page}.md", DOCS / page / "index.md"] if page else [DOCS / "index.md"]
        )
        assert any(c.is_file() for c in candidates), f"README links to {site}{link}: no such page"
