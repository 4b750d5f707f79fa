"""Providers from installed packages: the ``tether.providers`` entry point group, read through
importlib.metadata from a distribution installed (a ``.dist-info`` beside its module) in a
directory put on sys.path, exactly as pip would have left it."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.errors import ConfigError, UnknownProviderError
from tether.llm import ENTRY_POINT_GROUP, client_from_config, provider_names
from tether.llm.credentials import Credentials, OpenAICredentials
from tether.llm.openai_chat import OpenAIChatClient

from .conftest import Reply, WireServer, run_chat, simple_request, sse

# A cloud that speaks Chat Completions behind its own key header and URL layout: a provider
# is new credentials on an existing adapter, not a new adapter.
ACME = """
from typing import ClassVar

from tether.llm.credentials import Credentials
from tether.llm.openai_chat import OpenAIChatClient


class AcmeCredentials(Credentials):
    env_vars: ClassVar[tuple[str, ...]] = ("ACME_KEY",)
    default_base_url: ClassVar[str] = "https://api.acme.invalid"

    def headers(self) -> dict[str, str]:
        return {"api-key": self.api_key} if self.api_key else {}


class AcmeClient(OpenAIChatClient):
    provider: ClassVar[str] = "acme"
    credentials_class = AcmeCredentials

    def url(self, request):
        return f"{self.base_url}/deployments/{request['model']}/chat/completions"


def not_a_client(model, **options):
    return "a string"
"""


def install(site: Path, dist: str, module: str, source: str, entry_points: dict[str, str]) -> None:
    """What ``pip install --target site`` leaves for a one-module distribution."""
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = [f"[{ENTRY_POINT_GROUP}]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    (info / "RECORD").write_text(
        f"{module}.py,,\n{info.name}/METADATA,,\n{info.name}/entry_points.txt,,\n"
    )


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A site directory on sys.path; its modules are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if getattr(sys.modules[name], "__file__", "") and str(tmp_path) in str(
            sys.modules[name].__file__
        ):
            del sys.modules[name]
    importlib.invalidate_caches()


OK_CHAT = sse(
    (None, {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}),
    (None, "[DONE]"),
)


async def test_an_installed_package_adds_a_provider(site: Path, wire: WireServer) -> None:
    install(site, "acme-tether", "acme_tether", ACME, {"acme": "acme_tether:AcmeClient"})
    assert "acme" in provider_names()
    client = client_from_config({"model": "acme:gpt-4o-mini", "base_url": wire.url, "api_key": "k"})
    assert type(client).__name__ == "AcmeClient" and isinstance(client, OpenAIChatClient)
    wire.reply(Reply(body=OK_CHAT))
    async with client:
        out = await run_chat(client, simple_request("gpt-4o-mini"))
    assert out.text == "hi" and out.finish is not None
    assert out.finish["finish_reason"] == "stop"
    seen = wire.requests[0]
    assert seen.path == "/deployments/gpt-4o-mini/chat/completions"
    assert seen.headers["api-key"] == "k" and "authorization" not in seen.headers
    assert seen.json()["model"] == "gpt-4o-mini"


def test_a_plugin_provider_needs_its_own_key(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "acme-tether", "acme_tether", ACME, {"acme": "acme_tether:AcmeClient"})
    monkeypatch.delenv("ACME_KEY", raising=False)
    with pytest.raises(ConfigError, match="no API key for acme: set ACME_KEY"):
        client_from_config("acme:m")
    monkeypatch.setenv("ACME_KEY", "from-env")
    client = client_from_config("acme:m")
    assert isinstance(client, OpenAIChatClient)
    assert client._headers["api-key"] == "from-env"


def test_an_unknown_prefix_names_the_installed_plugins(site: Path) -> None:
    with pytest.raises(UnknownProviderError, match="unknown provider 'acme'") as before:
        client_from_config("acme:m")
    assert "entry point" in str(before.value)
    install(site, "acme-tether", "acme_tether", ACME, {"acme": "acme_tether:AcmeClient"})
    with pytest.raises(UnknownProviderError, match=r"known: anthropic, .*, acme"):
        client_from_config("nope:m")


def test_a_plugin_cannot_take_over_a_built_in_name(site: Path) -> None:
    install(site, "evil-tether", "evil_tether", ACME, {"openai": "evil_tether:AcmeClient"})
    client = client_from_config({"model": "openai:gpt-x", "api_key": "k"})
    assert type(client) is OpenAIChatClient
    assert provider_names().count("openai") == 1


def test_a_plugin_that_does_not_load_names_its_distribution(site: Path) -> None:
    install(
        site,
        "broken-tether",
        "broken_tether",
        "import not_installed_anywhere\n",
        {"broken": "broken_tether:Client"},
    )
    with pytest.raises(ConfigError, match=r"'broken' from distribution broken-tether 1\.0") as err:
        client_from_config({"model": "broken:m", "api_key": "k"})
    assert "ModuleNotFoundError" in str(err.value)
    assert "broken = broken_tether:Client" in str(err.value)


def test_a_plugin_that_builds_no_client_is_refused(site: Path) -> None:
    install(site, "acme-tether", "acme_tether", ACME, {"odd": "acme_tether:not_a_client"})
    with pytest.raises(ConfigError, match="not an LLMClient"):
        client_from_config("odd:m")


def test_two_packages_claiming_one_name_are_refused(site: Path) -> None:
    install(site, "acme-tether", "acme_tether", ACME, {"acme": "acme_tether:AcmeClient"})
    install(site, "acme-fork", "acme_fork", ACME, {"acme": "acme_fork:AcmeClient"})
    with pytest.raises(ConfigError, match="more than one installed package") as err:
        client_from_config({"model": "acme:m", "api_key": "k"})
    assert "acme-tether" in str(err.value) and "acme-fork" in str(err.value)


async def test_credentials_can_be_handed_to_an_adapter(wire: WireServer) -> None:
    class Gateway(Credentials):
        def headers(self) -> dict[str, str]:
            return {"x-gateway-token": "t"}

    client = OpenAIChatClient("m", credentials=Gateway("openai", base_url=wire.url))
    wire.reply(Reply(body=OK_CHAT))
    async with client:
        assert (await run_chat(client, simple_request())).text == "hi"
    assert wire.requests[0].headers["x-gateway-token"] == "t"
    assert "authorization" not in wire.requests[0].headers
    assert client.base_url == wire.url
    with pytest.raises(ConfigError, match="not both"):
        OpenAIChatClient("m", credentials=OpenAICredentials("openai", api_key="a"), api_key="b")


async def test_an_agent_takes_a_plugin_model_string(site: Path, wire: WireServer) -> None:
    from tether import create_agent

    install(site, "acme-tether", "acme_tether", ACME, {"acme": "acme_tether:AcmeClient"})
    wire.reply(Reply(body=OK_CHAT))
    agent = create_agent(model={"model": "acme:m", "api_key": "k", "base_url": wire.url})
    try:
        result = await agent.run_turn(agent.create_session(), "hello")
    finally:
        await agent.aclose()
    assert result.text == "hi"
    assert wire.requests[0].path == "/deployments/m/chat/completions"
