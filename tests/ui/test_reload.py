"""A registry loaded from a project reloads when the project's files change: an agent added to
the project appears without a restart, and a project that stops loading keeps the last good
registry with a banner saying why."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tether.lab import load_registry
from tether.ui import _reload, create_app

APP = """\
from tether.lab import Runtime
from tether.testing import script_client

lab = Runtime(store="memory", version=False, defaults={{"model": script_client([])}})
{agents}
"""


def write_app(root: Path, names: list[str], extra: str = "") -> None:
    agents = "\n".join(f'{n} = lab.create_agent(id="{n}", system_prompt="hi")' for n in names)
    path = root / "reloadapp" / "agents.py"
    path.write_text(APP.format(agents=agents) + extra)
    # Make sure the change is seen even on a file system with coarse timestamps.
    stamp = time.time() + len(names)
    os.utime(path, (stamp, stamp))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "reloadapp").mkdir()
    (tmp_path / "reloadapp" / "__init__.py").write_text("")
    write_app(tmp_path, ["alpha"])
    (tmp_path / "tether.toml").write_text(
        textwrap.dedent(
            """\
            runtime = "reloadapp.agents:lab"
            agents = ["reloadapp.agents:alpha"]
            """
        )
    )
    monkeypatch.setattr(_reload, "_CHECK_EVERY", 0.0)
    yield tmp_path
    for name in [m for m in sys.modules if m == "reloadapp" or m.startswith("reloadapp.")]:
        del sys.modules[name]
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


async def agents_page(client: httpx.AsyncClient) -> str:
    response = await client.get("/agents")
    assert response.status_code == 200
    return response.text


async def test_an_agent_added_to_the_project_appears_without_a_restart(project: Path) -> None:
    registry = load_registry(project)
    runtime = registry.runtime
    app = create_app(runtime, registry)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        html = await agents_page(client)
        assert "alpha" in html and "beta" not in html
        write_app(project, ["alpha", "beta"])
        (project / "tether.toml").write_text(
            'runtime = "reloadapp.agents:lab"\n'
            'agents = ["reloadapp.agents:alpha", "reloadapp.agents:beta"]\n'
        )
        html = await agents_page(client)
        assert "beta" in html
        # A project that no longer imports keeps the registry that worked, and says why.
        write_app(project, ["alpha", "beta"], extra="raise RuntimeError('half-saved file')\n")
        html = await agents_page(client)
        assert "beta" in html and "half-saved file" in html
        write_app(project, ["alpha", "beta", "gamma"])
        html = await agents_page(client)
        assert "half-saved file" not in html
    # The stores stayed the ones the app was made with.
    assert registry.runtime is runtime
    await runtime.aclose()


async def test_a_registry_made_in_code_is_not_watched(project: Path) -> None:
    registry = load_registry(project)
    registry.config_path = None
    source = _reload.RegistrySource(registry)
    write_app(project, ["alpha", "beta"])
    assert source.registry is registry
    await registry.runtime.aclose()
