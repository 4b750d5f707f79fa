from __future__ import annotations

from typing import Any

import pytest

from tether.lab._agent import model_label  # type: ignore[attr-defined]
from tether.llm.openai_chat import OpenAIChatClient
from tether.testing import script_client


@pytest.mark.parametrize(
    ("spec", "label"),
    [
        (None, "(none)"),
        ("openai:gpt-4o", "openai:gpt-4o"),
        ({"model": "anthropic:claude-x", "api_key": "sk-secret"}, "anthropic:claude-x"),
        ({"api_key": "sk-secret"}, "(config without a model)"),
        (script_client([]), "script (ScriptClient)"),
    ],
)
def test_a_model_is_labelled_without_anything_secret(spec: Any, label: str) -> None:
    assert model_label(spec) == label
    assert "secret" not in model_label(spec)


def test_an_adapter_is_labelled_provider_colon_model() -> None:
    client = OpenAIChatClient("gpt-x", api_key="sk-secret")
    assert model_label(client) == "openai:gpt-x"
    assert "secret" not in model_label(client)
