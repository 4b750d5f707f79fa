"""A provider's context-length refusal under a history policy: compacted once, retried once.

Each provider's loopback server refuses the first request the way its API does, then answers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.helpers import assistant, user

from tether import ContextLengthError, Session, create_agent, keep_tokens, summarize
from tether.history import SUMMARY_OPEN
from tether.session import Message
from tether.testing import script_client

from .conftest import Reply, Sleeps, WireServer
from .test_env import OK_CHAT, OK_GEMINI, OK_RESPONSES
from .test_http import OK_ANTHROPIC, make_client

REFUSALS: dict[str, tuple[Any, bytes, int, int]] = {
    "anthropic": (
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 209353 tokens > 199999 maximum",
            },
        },
        OK_ANTHROPIC,
        209353,
        199999,
    ),
    "openai": (
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130021 tokens. Please reduce the length of the "
                "messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        OK_CHAT,
        130021,
        128000,
    ),
    "openai-responses": (
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust "
                "your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
        OK_RESPONSES,
        0,
        0,
    ),
    "gemini": (
        [
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200000) exceeds the maximum number of "
                    "tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        OK_GEMINI,
        1200000,
        1048576,
    ),
}


def _long(turns: int) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [user(f"question {n} " + "x" * 400), assistant(f"answer {n}")]
    return out


def _sent_texts(body: dict[str, Any]) -> str:
    return json.dumps(body)


@pytest.mark.parametrize("provider", sorted(REFUSALS))
async def test_keep_tokens_compacts_and_retries_once(
    wire: WireServer, sleeps: Sleeps, provider: str
) -> None:
    refusal, ok, _tokens, _limit = REFUSALS[provider]
    wire.reply(Reply(400, json.dumps(refusal).encode()), Reply(body=ok))
    records: list[Any] = []
    async with make_client(provider, wire, sleeps) as client:
        agent = create_agent(model=client, history=[keep_tokens(1_000_000)], trace=records.append)
        session = Session(messages=_long(10))
        result = await agent.run_turn(session, "and now?")
    assert len(wire.requests) == 2
    first, second = (_sent_texts(r.json()) for r in wire.requests)
    assert "question 0" in first and "question 0" not in second and "and now?" in second
    assert len(second) < len(first)
    compacted = [r for r in records if r["name"] == "history:compacted"]
    assert len(compacted) == 1 and compacted[0]["data"]["messages"] == 21
    assert compacted[0]["data"]["error"].startswith(f"{provider} returned 400")
    assert compacted[0]["data"]["kept"] < 21
    assert result.finish_reason == "stop" and session.messages[20] == user("and now?")


@pytest.mark.parametrize("provider", sorted(REFUSALS))
async def test_a_second_refusal_ends_the_turn_with_the_providers_numbers(
    wire: WireServer, sleeps: Sleeps, provider: str
) -> None:
    refusal, _ok, tokens, limit = REFUSALS[provider]
    body = json.dumps(refusal).encode()
    wire.reply(Reply(400, body), Reply(400, body))
    writer = script_client([{"text": "the summary"}])
    policy = summarize(model=writer, when_tokens_over=1_000_000, keep_last_turns=1)
    async with make_client(provider, wire, sleeps) as client:
        agent = create_agent(model=client, history=[policy])
        session = Session(messages=_long(6))
        with pytest.raises(ContextLengthError) as info:
            await agent.run_turn(session, "and now?")
    assert len(wire.requests) == 2  # compacted once, retried once, no more
    assert SUMMARY_OPEN in _sent_texts(wire.requests[1].json())
    assert len(writer.calls) == 1
    assert info.value.tokens == (tokens or None) and info.value.limit == (limit or None)
    # the session keeps the user's message, as after any failed call, and nothing else
    assert len(session.messages) == 13 and session.messages[12] == user("and now?")


async def test_without_a_policy_the_refusal_ends_the_turn(wire: WireServer, sleeps: Sleeps) -> None:
    refusal, *_ = REFUSALS["anthropic"]
    wire.reply(Reply(400, json.dumps(refusal).encode()))
    async with make_client("anthropic", wire, sleeps) as client:
        agent = create_agent(model=client)
        with pytest.raises(ContextLengthError):
            await agent.run_turn(Session(messages=_long(2)), "go")
    assert len(wire.requests) == 1
