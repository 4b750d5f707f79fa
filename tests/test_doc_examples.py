"""Every Python example of the documentation site (docs/**/*.md) runs, as written, as a script:
no top-level `await` (an example that awaits wraps it in `async def main()` and
`asyncio.run(main())`), in the same keyless stand-in world as the README's
(tests/test_readme.py): model strings resolve to a function model, MCP sources to the
in-process test server.

Each fenced ``python`` block is one example with its own namespace, so every block on a page
stands on its own. A block fenced as ``python {test="skip"}`` would be left out; none is, and a
test keeps it that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from pytest_examples import CodeExample, find_examples
from tests.test_readme import world

__all__ = ["world"]  # the fixture, shared with the README's examples

DOCS = Path(__file__).resolve().parents[1] / "docs"
EXAMPLES = [ex for ex in find_examples(DOCS) if ex.prefix in ("py", "python")]


def _label(example: CodeExample) -> str:
    return f"{example.path.relative_to(DOCS)}:{example.start_line}"


class NotAScript(AssertionError):
    """A docs example that a reader could not paste into a file and run with `python`."""


def run_as_script(source: str, label: str) -> str:
    """Run `source` as `python file.py` would (a fresh `__main__` namespace, no event loop
    running, no top-level `await`); returns what it printed.

    Raises:
        NotAScript: it does not compile as a script (a top-level `await` above all).
    """
    try:
        code = compile(source, label, "exec")
    except SyntaxError as exc:
        raise NotAScript(
            f"{label}: not runnable as a script: {exc.msg} (line {exc.lineno}); put the "
            "awaits in `async def main()` and end with `asyncio.run(main())`"
        ) from None
    namespace: dict[str, Any] = {"__name__": "__main__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    return printed.getvalue()


@pytest.mark.parametrize("example", EXAMPLES, ids=_label)
def test_doc_example_runs_as_a_script(example: CodeExample, world: list[Any]) -> None:
    if "shell_tool(" in example.source:
        from tether.toolkits import bubblewrap_problem

        problem = bubblewrap_problem()
        if problem is not None:
            pytest.skip(f"the example sandboxes its shell with bubblewrap: {problem}")
    try:
        printed = run_as_script(example.source, _label(example))
    finally:
        for server in world:
            with contextlib.suppress(Exception):
                asyncio.run(server.aclose())
    assert "Traceback" not in printed


@pytest.mark.parametrize(
    "source",
    [
        "import asyncio\n\nawait asyncio.sleep(0)\n",
        "async for x in []:\n    pass\n",
    ],
)
def test_a_block_that_is_not_a_script_fails(source: str) -> None:
    with pytest.raises(NotAScript, match="not runnable as a script"):
        run_as_script(source, "page.md:1")


def test_a_script_block_runs_and_its_failure_fails() -> None:
    good = "import asyncio\n\n\nasync def main():\n    print('ran')\n\n\nasyncio.run(main())\n"
    assert run_as_script(good, "page.md:1") == "ran\n"
    with pytest.raises(AssertionError):
        run_as_script("assert 1 == 2\n", "page.md:9")


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
