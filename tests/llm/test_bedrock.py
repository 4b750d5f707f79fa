"""Bedrock adapter: SigV4-signed requests checked by recomputing the signature with botocore on
a loopback server, event stream frames split at every byte and with flipped CRCs, the Converse
request mapping, and errors that name the cloud, region and credential source."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any
from zlib import crc32

import pytest

pytest.importorskip("botocore", reason="the [bedrock] extra (botocore) is not installed")

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.eventstream import EventStreamBuffer

from tether import create_agent
from tether.errors import (
    AuthenticationError,
    ConfigError,
    ContextLengthError,
    LLMStreamError,
    MissingCredentialsError,
    MissingKeyError,
    ModelSettingError,
)
from tether.llm import client_from_config
from tether.llm._eventstream import EventStreamDecoder, encode_message
from tether.llm.base import ChatRequest
from tether.llm.bedrock import BedrockClient, BedrockStream, to_converse_messages

from .conftest import Outcome, Reply, Seen, WireServer, run_chat, simple_request, split_at

CASES = Path(__file__).parent / "wire" / "bedrock"
KEY_ID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def frames(events: list[list[Any]]) -> bytes:
    out = b""
    for name, payload in events:
        data = json.dumps(payload).encode()
        if name.startswith("exception:"):
            headers = {
                ":message-type": "exception",
                ":exception-type": name.split(":", 1)[1],
                ":content-type": "application/json",
            }
        else:
            headers = {
                ":event-type": name,
                ":content-type": "application/json",
                ":message-type": "event",
            }
        out += encode_message(headers, data)
    return out


def load_case(name: str) -> tuple[bytes, dict[str, Any]]:
    events = json.loads((CASES / f"{name}.events.json").read_text())
    expected = json.loads((CASES / f"{name}.expected.json").read_text())
    return frames(events), expected


CASE_NAMES = sorted(p.name.removesuffix(".events.json") for p in CASES.glob("*.events.json"))


def parse(pieces: list[bytes], output_tool: str | None = None) -> Outcome:
    """What the adapter makes of a body in `pieces`, with no I/O (decoder + parser + the end
    rules `chat()` applies)."""
    from tether.errors import LLMError
    from tether.llm._adapter import end_of_stream

    decoder = EventStreamDecoder()
    parser = BedrockStream(output_tool)
    out = Outcome()
    try:
        for piece in pieces:
            for event in decoder.feed(piece):
                out.chunks.extend(parser.handle(event))
        decoder.flush()
        out.finish = end_of_stream("bedrock", decoder, parser)
    except LLMError as exc:
        out.error = exc
    return out


def check(out: Outcome, exp: dict[str, Any]) -> None:
    assert out.text == exp["text"]
    if "error" in exp:
        assert isinstance(out.error, LLMStreamError), out.error
        assert str(out.error) == exp["error"]
        assert out.error.retryable is exp["retryable"]
        return
    assert out.error is None, out.error
    assert out.finish is not None
    assert out.finish["content"] == exp["content"]
    assert out.finish["stop_reason"] == exp["stop_reason"]
    assert out.finish["finish_reason"] == exp["finish_reason"]
    assert out.finish["usage"] == exp["usage"]
    assert out.thinking == exp.get("thinking", "")
    assert out.partials() == exp.get("partials", {})


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "eu-north-1")


_OPEN: list[BedrockClient] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> Any:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def client(wire: WireServer, **options: Any) -> BedrockClient:
    made = BedrockClient("anthropic.claude-3-5-sonnet-20240620-v1:0", base_url=wire.url, **options)
    _OPEN.append(made)
    return made


def recomputed_signature(seen: Seen, url: str, secret: str, token: str | None = None) -> str:
    """The SigV4 signature of the request as the server received it, computed by botocore
    from the headers the Authorization header says were signed."""
    auth = seen.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 ")
    fields = dict(
        item.strip().split("=", 1) for item in auth[len("AWS4-HMAC-SHA256 ") :].split(",")
    )
    signed = fields["SignedHeaders"].split(";")
    _key, _date, region, service, _end = fields["Credential"].split("/")
    headers = {name: seen.headers[name] for name in signed}
    request = AWSRequest(method=seen.method, url=url + seen.path, data=seen.body, headers=headers)
    request.context["timestamp"] = seen.headers["x-amz-date"]
    signer = SigV4Auth(BotoCredentials(KEY_ID, secret, token), service, region)
    canonical = signer.canonical_request(request)
    signature: str = signer.signature(signer.string_to_sign(request, canonical), request)
    return signature


# -- the event stream framing -----------------------------------------------------------------


@pytest.mark.parametrize("name", CASE_NAMES)
def test_our_frames_are_what_botocore_reads(name: str) -> None:
    body, _ = load_case(name)
    events = json.loads((CASES / f"{name}.events.json").read_text())
    buffer = EventStreamBuffer()
    buffer.add_data(body)
    messages = list(buffer)
    assert len(messages) == len(events)
    for message, (event, payload) in zip(messages, events, strict=True):
        kind = (
            message.headers.get(":event-type") or f"exception:{message.headers[':exception-type']}"
        )
        assert kind == event
        assert json.loads(message.payload) == payload


@pytest.mark.parametrize("name", CASE_NAMES)
def test_cases_read_whole_and_split_at_every_byte(name: str) -> None:
    body, exp = load_case(name)
    whole = parse([body])
    check(whole, exp)
    for cut in range(1, len(body)):
        out = parse(split_at(body, [cut]))
        assert out.chunks == whole.chunks and out.finish == whole.finish, cut
    bytewise = parse([body[i : i + 1] for i in range(len(body))])
    assert bytewise.chunks == whole.chunks and bytewise.finish == whole.finish


@pytest.mark.parametrize("where", ["prelude", "message", "payload"])
def test_a_flipped_crc_or_byte_is_a_stream_error_not_an_answer(where: str) -> None:
    body, _ = load_case("text_basic")
    first = struct.unpack_from(">I", body, 0)[0]
    second_start = first
    corrupt = bytearray(body)
    if where == "prelude":
        corrupt[second_start + 8] ^= 0x01  # the second message's prelude CRC
    elif where == "message":
        end = second_start + struct.unpack_from(">I", body, second_start)[0]
        corrupt[end - 1] ^= 0x80  # its message CRC
    else:
        corrupt[second_start + 40] ^= 0x20  # a byte of its payload
    for pieces in ([bytes(corrupt)], [bytes(corrupt[i : i + 1]) for i in range(len(corrupt))]):
        out = parse(pieces)
        assert isinstance(out.error, LLMStreamError)
        assert "corrupt event stream frame" in str(out.error)
        assert out.finish is None
        assert out.text == ""  # the one good message before it carries no text


def test_a_body_cut_inside_a_frame_is_a_retryable_stream_error() -> None:
    body, _ = load_case("text_basic")
    out = parse([body[:-3]])
    assert isinstance(out.error, LLMStreamError) and out.error.retryable
    assert "ended inside an event stream frame" in str(out.error)


def test_lengths_out_of_bounds_are_refused_before_waiting_for_them() -> None:
    prelude = struct.pack(">II", 64 * 1024 * 1024, 0)
    bad = prelude + struct.pack(">I", crc32(prelude))
    with pytest.raises(LLMStreamError, match="out of bounds"):
        EventStreamDecoder().feed(bad)


def test_an_error_message_becomes_a_stream_error() -> None:
    error = encode_message(
        {":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"},
        b"",
    )
    out = parse([error])
    assert isinstance(out.error, LLMStreamError)
    assert str(out.error) == "bedrock stream InternalFailure: boom"


# -- requests, signed --------------------------------------------------------------------------


async def test_the_request_is_signed_with_sigv4_and_botocore_agrees(
    wire: WireServer, aws_env: None
) -> None:
    body, exp = load_case("tool_use")
    wire.reply(Reply(body=[body[:50], body[50:]]))
    out = await run_chat(client(wire), simple_request("anthropic.claude-3-5-sonnet-20240620-v1:0"))
    check(out, exp)
    (seen,) = wire.requests
    assert seen.method == "POST"
    assert seen.path == "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
    assert seen.headers["accept"] == "application/vnd.amazon.eventstream"
    auth = seen.headers["authorization"]
    assert f"Credential={KEY_ID}/" in auth and "/eu-north-1/bedrock/aws4_request" in auth
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(signed)
    signature = auth.split("Signature=")[1]
    assert signature == recomputed_signature(seen, wire.url, SECRET)
    assert signature != recomputed_signature(seen, wire.url, SECRET + "x")
    assert seen.json() == {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "system": [{"text": "Be brief."}],
    }


async def test_a_request_with_a_long_image_is_signed_over_the_bytes_sent(
    wire: WireServer, aws_env: None
) -> None:
    """Long media is encoded once and kept (`tether.llm._body`); a signed wire gets the body
    joined, so the signature covers exactly what went out, turn after turn."""
    picture = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 200).decode()
    part: Any = {"type": "image", "media_type": "image/png", "data": picture}
    request = simple_request("anthropic.claude-3-5-sonnet-20240620-v1:0")
    request["messages"] = [{"role": "user", "content": [{"type": "text", "text": "?"}, part]}]
    adapter = client(wire)
    body, exp = load_case("text_basic")
    for _ in range(2):
        wire.reply(Reply(body=body))
        check(await run_chat(adapter, request), exp)
    assert adapter._body.encoded == 1
    for seen in wire.requests:
        assert seen.body == adapter.encode(request)
        assert seen.json()["messages"][0]["content"][1] == {
            "image": {"format": "png", "source": {"bytes": picture}}
        }
        assert seen.headers["authorization"].split("Signature=")[1] == recomputed_signature(
            seen, wire.url, SECRET
        )


async def test_temporary_credentials_send_their_token_signed(
    wire: WireServer, aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FQoGZXIvYXdzEXAMPLETOKEN")
    body, _ = load_case("text_basic")
    wire.reply(Reply(body=body), Reply(body=body))
    adapter = client(wire)
    await run_chat(adapter, simple_request())
    await run_chat(adapter, simple_request())
    first, second = wire.requests
    assert first.headers["x-amz-security-token"] == "FQoGZXIvYXdzEXAMPLETOKEN"
    assert "x-amz-security-token" in first.headers["authorization"]
    token = "FQoGZXIvYXdzEXAMPLETOKEN"
    for seen in (first, second):  # each request is signed anew
        sig = seen.headers["authorization"].split("Signature=")[1]
        assert sig == recomputed_signature(seen, wire.url, SECRET, token)
    assert adapter.credentials.source == "env"  # type: ignore[attr-defined]


async def test_a_profile_from_the_shared_files_is_used(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "credentials").write_text(
        f"[work]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"
    )
    (tmp_path / "config").write_text("[profile work]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "work")
    body, _ = load_case("text_basic")
    wire.reply(Reply(body=body))
    adapter = client(wire)
    out = await run_chat(adapter, simple_request())
    assert out.error is None
    (seen,) = wire.requests
    assert "/ap-south-1/bedrock/aws4_request" in seen.headers["authorization"]
    assert seen.headers["authorization"].split("Signature=")[1] == recomputed_signature(
        seen, wire.url, SECRET
    )
    assert adapter.credentials.source == "shared-credentials-file"  # type: ignore[attr-defined]


async def test_no_credentials_names_the_cloud_region_and_what_to_set(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    with pytest.raises(MissingCredentialsError) as info:
        async for _ in client(wire).chat(simple_request()):
            pass
    message = str(info.value)
    assert message.startswith("no AWS credentials for bedrock (region us-west-2)")
    assert "AWS_PROFILE" in message and "AWS_ACCESS_KEY_ID" in message
    assert isinstance(info.value, MissingKeyError)
    assert wire.requests == []


def test_no_region_is_a_config_error_naming_the_variables() -> None:
    with pytest.raises(ConfigError, match="no AWS region for bedrock: set AWS_REGION"):
        BedrockClient("m")


def test_region_order_and_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert BedrockClient("m").base_url == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    assert BedrockClient("m").base_url == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    assert BedrockClient("m", region="us-east-2").base_url.endswith("us-east-2.amazonaws.com")
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "https://vpce.example/")
    assert BedrockClient("m").base_url == "https://vpce.example"
    with pytest.raises(ConfigError, match="not an api_key"):
        BedrockClient("m", api_key="sk-1")


def test_a_model_string_and_config_build_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    made = client_from_config("bedrock:amazon.nova-pro-v1:0")
    assert isinstance(made, BedrockClient) and made.model == "amazon.nova-pro-v1:0"
    made = client_from_config({"model": "bedrock:m", "region": "eu-west-3"})
    assert isinstance(made, BedrockClient) and "eu-west-3" in made.base_url


async def test_a_refusal_names_the_credential_source_and_region(
    wire: WireServer, aws_env: None
) -> None:
    wire.reply(
        Reply(
            403,
            b'{"message": "The security token included in the request is invalid."}',
            headers={"x-amzn-errortype": "UnrecognizedClientException:http://internal"},
        )
    )
    out = await run_chat(client(wire), simple_request())
    assert isinstance(out.error, AuthenticationError)
    text = str(out.error)
    assert "bedrock returned 403: The security token included in the request is invalid." in text
    assert "the credentials from env (region eu-north-1)" in text


async def test_a_throttled_request_is_retried_and_signed_again(
    wire: WireServer, aws_env: None, sleeps: Any
) -> None:
    body, _ = load_case("text_basic")
    wire.reply(Reply(429, b'{"message": "Too many requests"}'), Reply(body=body))
    out = await run_chat(client(wire), simple_request())
    assert out.text == "Hello, Oslo!"
    assert len(wire.requests) == 2
    for seen in wire.requests:
        assert seen.headers["authorization"].split("Signature=")[1] == recomputed_signature(
            seen, wire.url, SECRET
        )


async def test_an_input_too_long_is_a_context_length_error(wire: WireServer, aws_env: None) -> None:
    """Bedrock's refusal of an over-long input, as a 400 (Converse's documented
    ValidationException body) or inside the stream, is the ContextLengthError the history
    policies act on, not a plain HTTP or stream error."""
    wire.reply(
        Reply(
            400,
            b'{"message": "Input is too long for requested model."}',
            headers={"x-amzn-errortype": "ValidationException:http://internal"},
        )
    )
    out = await run_chat(client(wire), simple_request())
    assert isinstance(out.error, ContextLengthError) and not out.error.retryable
    assert "bedrock returned 400: Input is too long for requested model." in str(out.error)
    streamed = parse(
        [
            frames(
                [
                    [
                        "exception:validationException",
                        {"message": "Input is too long for requested model."},
                    ]
                ]
            )
        ]
    )
    assert isinstance(streamed.error, ContextLengthError)
    other = parse(
        [frames([["exception:validationException", {"message": "Malformed input request"}]])]
    )
    assert type(other.error) is LLMStreamError


# -- the Converse request ----------------------------------------------------------------------


def test_transcript_mapping() -> None:
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "think", "signature": "sig"},
                {"type": "thinking", "text": "", "redacted": "UkVE"},
                {"type": "thinking", "text": "unsigned, from another provider"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_call", "id": "t1", "name": "w", "input": {"city": "Oslo"}},
                {"type": "tool_call", "id": "t2", "name": "w", "input": "not json"},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool_result",
                    "id": "t1",
                    "name": "w",
                    "output": "12C",
                    "is_error": False,
                },
                {"type": "tool_result", "id": "t2", "name": "w", "output": "bad", "is_error": True},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]
    assert to_converse_messages(messages) == [
        {"role": "user", "content": [{"text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "think", "signature": "sig"}}},
                {"reasoningContent": {"redactedContent": "UkVE"}},
                {"text": "Checking."},
                {"toolUse": {"toolUseId": "t1", "name": "w", "input": {"city": "Oslo"}}},
                {"toolUse": {"toolUseId": "t2", "name": "w", "input": {}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "t1", "content": [{"text": "12C"}]}},
                {
                    "toolResult": {
                        "toolUseId": "t2",
                        "content": [{"text": "bad"}],
                        "status": "error",
                    }
                },
                {"text": "thanks"},
            ],
        },
    ]


def request_with(**extra: Any) -> ChatRequest:
    request = simple_request()
    request.update(extra)
    return request


def test_tools_settings_cache_points_and_thinking(aws_env: None) -> None:
    adapter = BedrockClient("m", base_url="http://127.0.0.1:1")
    tools = [{"name": "w", "description": "weather", "input_schema": {"type": "object"}}]
    body = adapter.build_body(
        request_with(
            system=[
                {"type": "text", "text": "Static.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Dynamic."},
            ],
            tools=tools,
            settings={
                "max_tokens": 2000,
                "temperature": 1,
                "top_p": 0.9,
                "stop": ["END"],
                "tool_choice": "w",
                "reasoning": {"budget_tokens": 1024},
            },
        )
    )
    assert body["system"] == [
        {"text": "Static."},
        {"cachePoint": {"type": "default"}},
        {"text": "Dynamic."},
    ]
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "w",
                    "description": "weather",
                    "inputSchema": {"json": {"type": "object"}},
                }
            }
        ],
        "toolChoice": {"tool": {"name": "w"}},
    }
    assert body["inferenceConfig"] == {
        "maxTokens": 2000,
        "temperature": 1,
        "topP": 0.9,
        "stopSequences": ["END"],
    }
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }
    required = adapter.build_body(request_with(tools=tools, settings={"tool_choice": "required"}))
    assert required["toolConfig"]["toolChoice"] == {"any": {}}


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"seed": 1}, "seed"),
        ({"tool_choice": "none"}, "tool_choice"),
        ({"parallel_tool_calls": False}, "parallel_tool_calls"),
        ({"reasoning": {"effort": "high"}}, "reasoning"),
    ],
)
def test_settings_converse_cannot_honour_are_refused_at_definition(
    aws_env: None, settings: dict[str, Any], key: str
) -> None:
    with pytest.raises(ModelSettingError, match=f"bedrock cannot honour the model setting '{key}'"):
        create_agent(llm={"model": "bedrock:m"}, settings=settings)  # type: ignore[arg-type]


def test_a_history_with_tool_blocks_declares_their_tools(aws_env: None) -> None:
    adapter = BedrockClient("m", base_url="http://127.0.0.1:1")
    request = simple_request()
    request["messages"] = [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "1", "name": "w", "input": {}}],
        },
        {
            "role": "tool",
            "content": [
                {"type": "tool_result", "id": "1", "name": "w", "output": "x", "is_error": False}
            ],
        },
    ]
    body = adapter.build_body(request)
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "w",
                    "description": "",
                    "inputSchema": {"json": {"type": "object"}},
                }
            }
        ]
    }


async def test_structured_output_is_a_forced_tool_read_back_as_text(
    wire: WireServer, aws_env: None
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    events = [
        ["messageStart", {"role": "assistant"}],
        [
            "contentBlockStart",
            {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tu1", "name": "Answer"}}},
        ],
        ["contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"city"'}}}],
        [
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"toolUse": {"input": ': "Oslo"}'}}},
        ],
        ["messageStop", {"stopReason": "tool_use"}],
    ]
    wire.reply(Reply(body=frames(events)))
    request = request_with(response_format={"name": "Answer", "schema": schema})
    out = await run_chat(client(wire), request)
    assert out.text == '{"city": "Oslo"}'
    assert out.finish is not None
    assert out.finish["content"] == [{"type": "text", "text": '{"city": "Oslo"}'}]
    assert out.finish["finish_reason"] == "stop"
    sent = wire.requests[0].json()["toolConfig"]
    assert sent["toolChoice"] == {"tool": {"name": "Answer"}}
    assert sent["tools"][-1]["toolSpec"]["inputSchema"] == {"json": schema}


async def test_an_agent_turn_on_bedrock(wire: WireServer, aws_env: None) -> None:
    from tether import reduce

    body, _ = load_case("text_basic")
    wire.reply(Reply(body=body))
    agent = create_agent(llm=client(wire))
    session = agent.create_session()
    async for event in agent.send(session, "hi"):
        session = reduce(session, event)
    assert session.messages[-1]["content"] == [{"type": "text", "text": "Hello, Oslo!"}]


def test_images_and_documents_inline_or_from_s3() -> None:
    from tether.errors import ContentError

    messages: list[Any] = [
        {
            "role": "user",
            "content": [
                {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
                {
                    "type": "document",
                    "media_type": "application/pdf",
                    "url": "s3://bucket/a.pdf",
                    "name": "Q3 report.pdf",
                },
                {"type": "text", "text": "Summarize."},
            ],
        }
    ]
    assert to_converse_messages(messages) == [
        {
            "role": "user",
            "content": [
                {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                {
                    "document": {
                        "format": "pdf",
                        "source": {"s3Location": {"uri": "s3://bucket/a.pdf"}},
                        "name": "Q3 report pdf",
                    }
                },
                {"text": "Summarize."},
            ],
        }
    ]
    for part, why in [
        ({"type": "audio", "media_type": "audio/wav", "data": "UklGRg=="}, "no audio"),
        ({"type": "image", "media_type": "image/png", "url": "https://x.example/a.png"}, "s3://"),
        ({"type": "image", "media_type": "image/tiff", "data": "AAAA"}, "image/png"),
    ]:
        with pytest.raises(ContentError, match=why):
            to_converse_messages([{"role": "user", "content": [part]}])
