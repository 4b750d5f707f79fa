"""`tether ui`: hands the project's runtime to the server (`tether.serve`'s app: the pages and
the chat page, no takeovers, the project reloaded as it changes), then closes it."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

import tether.cli._ui as ui_module
import tether.serve._server as server_module
from tether.cli import EXIT_PROJECT
from tether.cli._ui import DEFAULT_HOST, DEFAULT_PORT
from tether.errors import ConfigError
from tether.lab import Registry, Runtime

from .conftest import Project


def test_ui_help(project: Project) -> None:
    result = project.invoke("ui", "--help")
    assert result.exit_code == 0, result.output
    assert "Serve the inspection UI" in result.stdout
    assert "--host" in result.stdout and "--port" in result.stdout


def fake_ui(monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]]) -> None:
    """A stand-in server whose serve_with() records what it was given and uses the runtime."""

    def serve_with(
        runtime: Runtime, options: Any, *, registry: Any = None, close_runtime: bool = False
    ) -> None:
        runs = asyncio.run(runtime.run_store.list_runs())
        calls.append(
            {
                "runtime": runtime,
                "runs": runs,
                "registry": registry,
                "host": options.host,
                "port": options.port,
                "token": options.token,
                "allowed_host": tuple(options.allowed_hosts),
                "takeover_every": options.takeover_every,
                "watch_registry": options.watch_registry,
            }
        )

    monkeypatch.setattr(server_module, "serve_with", serve_with)
    # No server binds here: the default port may be taken on this machine by a real one.
    monkeypatch.setattr(ui_module, "check_port", lambda host, port: None)


def test_ui_serves_the_projects_runtime_and_closes_it_after(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert project.invoke("agent", "run", "echo", "-i", "hi").exit_code == 0
    calls: list[dict[str, Any]] = []
    fake_ui(monkeypatch, calls)
    result = project.invoke(
        "ui", "--host", "0.0.0.0", "--port", "9999", "--token", "t0k", "--allowed-host", "box"
    )
    assert result.exit_code == 0, result.output
    (call,) = calls
    assert call["host"] == "0.0.0.0" and call["port"] == 9999
    assert call["token"] == "t0k" and call["allowed_host"] == ("box",)
    # It inspects and chats: it takes no other worker's runs over, and follows the project.
    assert call["takeover_every"] is None and call["watch_registry"] is True
    assert isinstance(call["runtime"], Runtime)
    assert isinstance(call["registry"], Registry)
    assert call["registry"].runtime is call["runtime"]
    assert sorted(call["registry"].agents)[0] == "echo"
    assert [r.name for r in call["runs"]] == ["echo"]  # the project's store, opened
    with pytest.raises(ConfigError, match="this runtime is closed"):
        call["runtime"].run_store  # noqa: B018


def test_ui_defaults_to_loopback_on_the_uis_own_port(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    fake_ui(monkeypatch, calls)
    assert project.invoke("ui").exit_code == 0
    assert (calls[0]["host"], calls[0]["port"]) == (DEFAULT_HOST, DEFAULT_PORT)


def test_the_cli_defaults_are_the_uis() -> None:
    real = pytest.importorskip("tether.ui", reason="the inspection UI is not in this checkout")
    assert (real.DEFAULT_HOST, real.DEFAULT_PORT) == (DEFAULT_HOST, DEFAULT_PORT)


@pytest.mark.parametrize(
    ("command", "module", "what"),
    [("ui", "tether.ui", "the inspection UI"), ("serve", "tether.serve", "the server")],
)
def test_a_server_that_cannot_be_imported_is_a_project_error(
    project: Project, monkeypatch: pytest.MonkeyPatch, command: str, module: str, what: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    result = project.invoke(command)
    assert result.exit_code == EXIT_PROJECT
    assert result.stderr.startswith(
        f"Error: ModuleNotFoundError: {what} cannot be loaded: import of {module} halted"
    )
    assert "pip install 'tether[lab]'" in result.stderr


def test_ui_rejects_a_port_out_of_range(project: Project) -> None:
    result = project.invoke("ui", "--port", "70000")
    assert result.exit_code == 2
    assert "Invalid value for '--port'" in result.stderr


def test_ctrl_c_that_stopped_the_server_is_a_normal_end(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[Runtime] = []

    def serve_with(runtime: Runtime, options: Any, **kwargs: Any) -> None:
        served.append(runtime)
        raise KeyboardInterrupt  # what uvicorn re-raises after a graceful Ctrl-C shutdown

    monkeypatch.setattr(server_module, "serve_with", serve_with)
    monkeypatch.setattr(ui_module, "check_port", lambda host, port: None)
    result = project.invoke("ui")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    with pytest.raises(ConfigError, match="this runtime is closed"):
        served[0].run_store  # noqa: B018


def test_ui_off_loopback_without_a_token_is_refused(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    fake_ui(monkeypatch, calls)
    monkeypatch.delenv("TETHER_UI_TOKEN", raising=False)
    result = project.invoke("ui", "--host", "0.0.0.0")
    assert result.exit_code == 2, result.output
    assert "--token" in result.stderr and calls == []


def test_ui_reads_the_token_from_the_environment(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    fake_ui(monkeypatch, calls)
    monkeypatch.setenv("TETHER_UI_TOKEN", "from-env")
    assert project.invoke("ui", "--host", "192.0.2.7").exit_code == 0
    assert calls[0]["token"] == "from-env"


def test_ui_with_a_token_prints_the_login_link(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    fake_ui(monkeypatch, calls)
    result = project.invoke("ui", "--host", "0.0.0.0", "--port", "9999", "--token", "t0k&=x")
    assert result.exit_code == 0, result.output
    # Bound to every interface: reached by this machine's name (which the server answers).
    link = f"http://{socket.gethostname()}:9999/login?token=t0k%26%3Dx"
    assert f"Log in once from a browser: {link}\n" in result.stderr
    result = project.invoke("ui", "--host", "192.0.2.7", "--port", "0", "--token", "t")
    assert "http://192.0.2.7:PORT/login?token=t (PORT: the one the server reports" in result.stderr
    # No token, no link.
    assert "Log in" not in project.invoke("ui").stderr


def test_the_printed_link_logs_a_browser_in(project: Project) -> None:
    """The real `tether ui` with a token: the link it prints trades the token for the session
    cookie, and that cookie opens the pages."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-c", "from tether.cli import main; main()", "--config",
               str(project.root / "tether.toml"), "ui", "--port", str(port), "--token", "s3cret"]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        link = f"http://127.0.0.1:{port}/login?token=s3cret"
        assert line == f"Log in once from a browser: {link}\n"
        deadline = time.monotonic() + 30
        while True:
            try:
                with httpx.Client() as client:
                    assert client.get(f"http://127.0.0.1:{port}/runs").status_code in (
                        302,
                        303,
                        401,
                    )
                    login = client.get(link)
                    assert login.status_code in (302, 303), login.text
                    assert client.get(f"http://127.0.0.1:{port}/runs").status_code == 200
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(30)
        if process.stderr is not None:
            process.stderr.close()
