from __future__ import annotations

import asyncio
import datetime
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import jsonschema
import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from tether import (
    RunContext,
    Session,
    ToolDefinitionError,
    ToolError,
    ToolResult,
    create_agent,
    define_tool,
    tool,
)
from tether.testing import collect, script_client

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def ctx() -> RunContext:
    return RunContext(session_id="s")


async def test_define_tool_checks_input_at_the_call_boundary() -> None:
    calls: list[Any] = []
    t = define_tool(name="add", input_schema=ADD_SCHEMA, execute=lambda i: calls.append(i) or 3)
    bad = await t.call({"a": 1, "b": "two"}, ctx())
    assert (
        bad.is_error
        and bad.output == "Invalid input for tool add: b: 'two' is not of type 'integer'"
    )
    missing = await t.call({"a": 1}, ctx())
    assert missing.is_error and "'b' is a required property" in missing.output
    assert calls == []
    ok = await t.call({"a": 1, "b": 2}, ctx())
    assert (ok.output, ok.is_error) == ("3", False)


async def test_validators_are_compiled_once_per_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    t = define_tool(name="add", input_schema=ADD_SCHEMA, execute=lambda i: i["a"] + i["b"])

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a validator was built at call time")

    # The schema is checked against its meta-schema (the costly part of building a validator)
    # when the tool is defined; jsonschema itself picks a validator class per subschema as it
    # descends, so `validator_for` is not ours to forbid.
    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", forbidden)
    monkeypatch.setattr(jsonschema.validators, "create", forbidden)
    for _ in range(3):
        assert (await t.call({"a": 1, "b": 2}, ctx())).output == "3"


_DEFS = {"$defs": {"Thing": {"type": "object"}}}


@pytest.mark.parametrize(
    ("schema", "bad", "good"),
    [
        (
            {"type": "object", "properties": {"p": {"prefixItems": [{"type": "integer"}]}}},
            {"p": ["x"]},
            {"p": [1, "x"]},
        ),
        ({"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1}, {"a": 1, "b": 2}),
        (
            {"properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
            {"a": 1, "z": 2},
            {"a": 1},
        ),
        (
            {"properties": {"l": {"contains": {"type": "integer"}, "minContains": 2}}},
            {"l": [1, "x"]},
            {"l": [1, 2]},
        ),
        (
            {**_DEFS, "properties": {"x": {"$ref": "#/$defs/Thing", "required": ["k"]}}},
            {"x": {}},
            {"x": {"k": 1}},
        ),
    ],
    ids=[
        "prefixItems",
        "dependentRequired",
        "unevaluatedProperties",
        "minContains",
        "ref-siblings",
    ],
)
async def test_a_draft_2020_12_schema_is_enforced_at_the_call_boundary(
    schema: dict[str, Any], bad: Any, good: Any
) -> None:
    # A schema without $schema is Draft 2020-12 (what the providers take). The compiled fast path
    # knows drafts 4-7 only and would let these through; the boundary check must not.
    t = define_tool(name="t", input_schema=schema, execute=lambda i: "ran")
    rejected = await t.call(bad, ctx())
    assert rejected.is_error and rejected.output.startswith("Invalid input for tool t: ")
    assert (await t.call(good, ctx())).output == "ran"


def test_an_invalid_schema_is_refused_at_definition() -> None:
    with pytest.raises(ToolDefinitionError, match="not a valid JSON Schema"):
        define_tool(name="x", input_schema={"type": "objekt"}, execute=lambda i: 1)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "semi;colon"])
def test_a_tool_name_the_providers_refuse_is_refused_at_definition(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="tool name"):
        define_tool(name=name, execute=lambda i: 1)


def test_execute_or_endpoint_exactly_one() -> None:
    with pytest.raises(ToolDefinitionError, match="exactly one"):
        define_tool(name="x")
    with pytest.raises(ToolDefinitionError, match="exactly one"):
        define_tool(name="x", execute=lambda i: 1, endpoint={"url": "http://x"})


async def test_every_tool_failure_becomes_an_error_result() -> None:
    def boom(i: Any) -> Any:
        raise KeyError("missing")

    async def slow(i: Any) -> Any:
        await asyncio.sleep(5)

    def raises_tool_error(i: Any) -> Any:
        raise ToolError("city not found, try a nearby one")

    cases = {
        "bad json": (define_tool(name="t", execute=lambda i: 1), '{"a": 1'),
        "exception": (define_tool(name="t", execute=boom), {}),
        "timeout": (define_tool(name="t", execute=slow, timeout=0.01), {}),
        "tool error": (define_tool(name="t", execute=raises_tool_error), {}),
        "unserializable": (define_tool(name="t", execute=lambda i: {1, 2}), {}),
    }
    outputs = {}
    for label, (t, value) in cases.items():
        result = await t.call(value, ctx())
        assert result.is_error, label
        outputs[label] = result.output
    assert outputs["bad json"] == "Invalid arguments for tool t: not valid JSON: '{\"a\": 1'"
    assert outputs["exception"] == "Tool t failed: KeyError: 'missing'"
    assert outputs["timeout"] == "Tool t timed out after 0.01s"
    assert outputs["tool error"] == "city not found, try a nearby one"
    assert outputs["unserializable"].startswith("Tool t returned a value that is not JSON")


async def test_a_timeout_the_tool_itself_raises_is_its_failure_not_a_crash() -> None:
    # Without a timeout= of its own, a TimeoutError (a socket's, say) is the tool failing.
    def stalled(i: Any) -> Any:
        raise TimeoutError("the socket timed out")

    async def stalled_later(i: Any) -> Any:
        await asyncio.sleep(0)
        raise TimeoutError("the socket timed out")

    for fn in (stalled, stalled_later):
        result = await define_tool(name="t", execute=fn).call({}, ctx())
        assert result == ToolResult("Tool t failed: TimeoutError: the socket timed out", True)


async def test_the_loop_goes_on_after_a_failed_tool_and_the_model_sees_the_error() -> None:
    def boom(i: Any) -> Any:
        raise RuntimeError("db down")

    client = script_client(
        [
            {"tool_use": [{"name": "boom", "input": {}}, {"name": "nope", "input": {}}]},
            {"text": "sorry"},
        ]
    )
    agent = create_agent(llm=client, tools=[define_tool(name="boom", execute=boom)])
    events = await collect(agent, Session(), "go")
    results = [e for e in events if e["type"] == "tool_result"]
    assert results[0]["output"] == "Tool boom failed: RuntimeError: db down"
    assert results[1]["output"] == "Unknown tool 'nope'. Available tools: boom."
    assert all(r["is_error"] for r in results)
    assert events[-1]["text"] == "sorry"


async def test_non_string_results_are_json_serialized() -> None:
    t = define_tool(name="t", execute=lambda i: {"temp": 21.5, "city": "Oslø"})
    assert (await t.call({}, ctx())).output == '{"temp":21.5,"city":"Oslø"}'


@pytest.mark.parametrize(
    "value", [0, -7, 10**30, True, False, None, 21.5, 1e-7, 1e22, -0.0, float("nan"), float("inf")]
)
async def test_a_scalar_result_is_spelled_as_json_spells_it(value: Any) -> None:
    import json

    t = define_tool(name="t", execute=lambda i: value)
    result = await t.call({}, ctx())
    assert result.output == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert not result.is_error


async def test_pydantic_models_anywhere_in_a_result_are_json_serialized() -> None:
    class Reading(BaseModel):
        when: datetime.date
        temp: float

    day = datetime.date(2026, 1, 2)
    for value, expected in [
        (Reading(when=day, temp=4.5), '{"when":"2026-01-02","temp":4.5}'),
        ([Reading(when=day, temp=1)], '[{"when":"2026-01-02","temp":1.0}]'),
        ({"r": Reading(when=day, temp=2)}, '{"r":{"when":"2026-01-02","temp":2.0}}'),
    ]:
        t = define_tool(name="t", execute=lambda i, *, v=value: v)
        assert await t.call({}, ctx()) == ToolResult(expected)
    # what JSON cannot hold outside a model is still an error result the model sees
    bad = await define_tool(name="t", execute=lambda i: {"when": day}).call({}, ctx())
    assert bad == ToolResult(
        "Tool t returned a value that is not JSON-serializable: "
        "Object of type date is not JSON serializable",
        True,
    )


async def test_tool_ctx_carries_signal_services_and_remember() -> None:
    from tether import AbortController

    seen: dict[str, Any] = {}

    async def spy(value: Any, c: RunContext) -> str:
        seen.update(signal=c.signal, services=c.services, call=c.tool_call_id)
        c.remember({"seen": True})
        return "ok"

    controller = AbortController()
    client = script_client(
        [{"tool_use": [{"name": "spy", "input": {}, "id": "c1"}]}, {"text": "done"}]
    )
    agent = create_agent(
        llm=client,
        tools=[define_tool(name="spy", execute=spy)],
        services={"db": "agent-db", "cache": "agent-cache"},
    )
    session = Session()
    await collect(agent, session, "go", signal=controller.signal, services={"db": "run-db"})
    assert seen == {
        "signal": controller.signal,
        "services": {"db": "run-db", "cache": "agent-cache"},
        "call": "c1",
    }
    assert session.memory == {"seen": True}


def test_the_tool_decorator_derives_the_schema_from_a_typed_function() -> None:
    @tool
    def forecast(city: Annotated[str, Field(description="City name")], days: int = 1) -> str:
        """Weather forecast for a city."""
        return f"{city}:{days}"

    assert forecast.name == "forecast"
    assert forecast.description == "Weather forecast for a city."
    assert forecast.input_schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name", "title": "City"},
            "days": {"type": "integer", "default": 1, "title": "Days"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


async def test_a_typed_tool_validates_converts_and_injects_the_context() -> None:
    @tool(name="scale", timeout=1)
    async def scale(value: float, c: RunContext, factor: int = 2) -> dict[str, Any]:
        """Scale a value."""
        return {"value": value * factor, "session": c.session_id}

    assert "c" not in scale.input_schema["properties"]
    good = await scale.call({"value": 1.5}, RunContext(session_id="s9"))
    assert good.output == '{"value":3.0,"session":"s9"}'
    bad = await scale.call({"value": "x", "extra": 1}, ctx())
    assert bad.is_error
    assert "value: Input should be a valid number" in bad.output
    assert "extra: Extra inputs are not permitted" in bad.output


# -- endpoint tools, against a real local HTTP server -------------------------------------------


async def _echo(request: Request) -> Any:
    if request.method == "GET":
        return JSONResponse({"method": "GET", "q": dict(request.query_params)})
    return JSONResponse(
        {
            "method": request.method,
            "body": await request.json(),
            "auth": request.headers.get("authorization"),
        }
    )


async def _query(request: Request) -> Any:
    return JSONResponse(
        {
            "method": request.method,
            "q": dict(request.query_params),
            "auth": request.headers.get("authorization"),
        }
    )


async def _fail(request: Request) -> Any:
    return PlainTextResponse("upstream is sad", status_code=503)


async def _bad(request: Request) -> Any:
    return PlainTextResponse("no such city " + "x" * 600, status_code=400)


async def _slow(request: Request) -> Any:
    await asyncio.sleep(0.5)
    return PlainTextResponse("late")


HANG: dict[str, threading.Event] = {}


async def _hang(request: Request) -> Any:
    # Answers only once the client has gone away, and says that it went.
    await request.body()
    HANG["hit"].set()
    while (await request.receive())["type"] != "http.disconnect":
        pass
    HANG["gone"].set()
    return PlainTextResponse("never read")


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/echo", _echo, methods=["GET", "POST"]),
            Route("/query", _query, methods=["GET", "DELETE"]),
            Route("/fail", _fail, methods=["POST"]),
            Route("/bad", _bad, methods=["POST"]),
            Route("/slow", _slow, methods=["GET", "POST"]),
            Route("/hang", _hang, methods=["POST"]),
        ]
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(5)


async def test_an_endpoint_tool_posts_its_input_as_json(http_server: str) -> None:
    client = script_client(
        [{"tool_use": [{"name": "echo", "input": {"q": "oslo"}}]}, {"text": "ok"}]
    )
    echo = define_tool(
        name="echo",
        endpoint={
            "url": f"{http_server}/echo",
            "method": "POST",
            "headers": {"authorization": "Bearer t"},
        },
    )
    async with create_agent(llm=client, tools=[echo]) as agent:
        events = await collect(agent, Session(), "go")
    result = next(e for e in events if e["type"] == "tool_result")
    assert result == {
        "type": "tool_result",
        "id": "call_1",
        "name": "echo",
        "output": '{"method":"POST","body":{"q":"oslo"},"auth":"Bearer t"}',
    }


async def test_an_endpoint_get_sends_query_parameters(http_server: str) -> None:
    agent = create_agent(llm=script_client([]))
    t = define_tool(name="echo", endpoint={"url": f"{http_server}/echo", "method": "GET"})
    c = RunContext(session_id="s", _http=agent._http)
    assert (await t.call({"q": "x"}, c)).output == '{"method":"GET","q":{"q":"x"}}'
    await agent.aclose()


async def test_endpoint_errors_and_timeouts_are_error_results(http_server: str) -> None:
    agent = create_agent(llm=script_client([]))
    c = RunContext(session_id="s", _http=agent._http)
    fail = define_tool(name="fail", endpoint={"url": f"{http_server}/fail"})
    slow = define_tool(name="slow", endpoint={"url": f"{http_server}/slow", "timeout": 0.1})
    dead = define_tool(name="dead", endpoint={"url": "http://127.0.0.1:9/none"})
    r1, r2, r3 = [await t.call({}, c) for t in (fail, slow, dead)]
    await agent.aclose()
    assert (
        r1.is_error
        and r1.output == f"Tool fail: endpoint {http_server}/fail answered 503: upstream is sad"
    )
    assert (
        r2.is_error and r2.output == f"Tool slow: endpoint {http_server}/slow timed out after 0.1s"
    )
    assert r3.is_error and r3.output.startswith(
        "Tool dead: endpoint http://127.0.0.1:9/none failed"
    )


@pytest.mark.parametrize("how", ["abort", "cancel"])
async def test_cancelling_an_endpoint_call_closes_its_connection(
    http_server: str, how: str
) -> None:
    from tether import AbortController, AbortedError

    HANG.update(hit=threading.Event(), gone=threading.Event())
    hang = define_tool(name="hang", endpoint={"url": f"{http_server}/hang"})
    client = script_client([{"tool_use": [{"name": "hang", "input": {}}]}, {"text": "x"}])
    controller = AbortController()
    async with create_agent(llm=client, tools=[hang]) as agent:
        task = asyncio.create_task(collect(agent, Session(), "go", signal=controller.signal))
        assert await asyncio.to_thread(HANG["hit"].wait, 10)
        if how == "abort":
            controller.abort()
            events = await task
            assert isinstance(events[-1]["error"], AbortedError)
        else:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        # the server saw the client go away while the agent (and its HTTP client) is still open
        assert await asyncio.to_thread(HANG["gone"].wait, 10)
    assert {t for t in asyncio.all_tasks() if not t.done()} == {asyncio.current_task()}


def test_a_remote_schema_is_checked_for_required_properties_and_types_only() -> None:
    schema = {
        "$schema": "https://example.com/custom-dialect",
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 10, "x-unit": "m"},
            "s": {"type": "string", "format": "email", "pattern": "^a"},
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "string"}],
                "items": {"type": "null"},
            },
            "any": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    t = define_tool(name="r", input_schema=schema, execute=lambda v: v, validation="remote")
    assert t.unchecked is None
    # What every validator reads the same way is checked here...
    assert t.check_input({}) == "'n' is a required property"
    assert t.check_input({"n": "1"}) == "n: '1' is not of type 'integer'"
    # ...and the rest is the server's: bounds, formats, patterns, combinators, extra keys,
    # items after prefixItems, and null for a property it does not require.
    assert t.check_input({"n": 1, "s": "zz", "pair": ["a", 1], "any": [], "extra": 1}) is None
    assert t.check_input({"n": 1, "s": None}) is None
    assert t.check_input({"n": None}) == "n: None is not of type 'integer'"


def test_a_remote_schema_that_cannot_be_compiled_is_not_checked_and_says_why() -> None:
    t = define_tool(
        name="r",
        input_schema={"type": "object", "required": "q"},
        execute=lambda v: v,
        validation="remote",
    )
    assert t.check_input({"anything": 1}) is None
    assert t.unchecked is not None and "not a valid JSON Schema" in t.unchecked
    with pytest.raises(ToolDefinitionError, match="not a valid JSON Schema"):
        define_tool(name="l", input_schema={"type": "object", "required": "q"}, execute=print)


@pytest.mark.parametrize("method", ["GET", "DELETE", "delete"])
async def test_get_and_delete_send_query_parameters_with_the_headers(
    http_server: str, method: str
) -> None:
    agent = create_agent(llm=script_client([]))
    c = RunContext(session_id="s", _http=agent._http)
    t = define_tool(
        name="q",
        endpoint={
            "url": f"{http_server}/query",
            "method": method,
            "headers": {"authorization": "Bearer t"},
        },
    )
    result = await t.call({"city": "oslo"}, c)
    await agent.aclose()
    assert result.output == (
        f'{{"method":"{method.upper()}","q":{{"city":"oslo"}},"auth":"Bearer t"}}'
    )


async def test_a_get_endpoint_times_out_like_a_post_one(http_server: str) -> None:
    agent = create_agent(llm=script_client([]))
    c = RunContext(session_id="s", _http=agent._http)
    slow = define_tool(
        name="slow", endpoint={"url": f"{http_server}/slow", "method": "GET", "timeout": 0.1}
    )
    result = await slow.call({}, c)
    await agent.aclose()
    assert result == ToolResult(
        f"Tool slow: endpoint {http_server}/slow timed out after 0.1s", True
    )


async def test_a_400_answer_is_an_error_showing_the_first_500_characters(
    http_server: str,
) -> None:
    agent = create_agent(llm=script_client([]))
    c = RunContext(session_id="s", _http=agent._http)
    bad = define_tool(name="bad", endpoint={"url": f"{http_server}/bad"})
    result = await bad.call({}, c)
    await agent.aclose()
    body = ("no such city " + "x" * 600)[:500]
    assert result == ToolResult(f"Tool bad: endpoint {http_server}/bad answered 400: {body}", True)


async def test_an_endpoint_tool_called_without_an_http_client_says_so() -> None:
    t = define_tool(name="far", endpoint={"url": "http://127.0.0.1:9/none"})
    assert await t.call({}, ctx()) == ToolResult(
        "Tool far: no HTTP client available for its endpoint", True
    )


# -- what mutation testing showed untested ------------------------------------------------------


async def test_arguments_that_are_not_json_are_echoed_cut_to_200_characters() -> None:
    t = define_tool(name="t", execute=lambda i: 1)
    raw = "{" + "a" * 300
    result = await t.call(raw, ctx())
    assert result == ToolResult(
        f"Invalid arguments for tool t: not valid JSON: {raw[:200]!r}", True
    )


async def test_a_sync_execute_that_returns_an_awaitable_is_awaited() -> None:
    async def later(value: Any) -> str:
        return f"later {value['n']}"

    t = define_tool(name="t", execute=lambda i: later(i))
    assert await t.call({"n": 1}, ctx()) == ToolResult("later 1")


async def test_a_callable_whose_signature_cannot_be_read_gets_the_context() -> None:
    class Opaque:
        """Like some C callables: inspect.signature() cannot read it."""

        @property
        def __signature__(self) -> Any:
            raise ValueError("no signature")

        def __call__(self, *args: Any) -> str:
            return f"{len(args)} arguments"

    t = define_tool(name="t", execute=Opaque())
    assert (await t.call({}, ctx())).output == "2 arguments"


def test_defaults_give_an_empty_description_and_an_object_schema() -> None:
    t = define_tool(name="t", execute=lambda i: 1)
    assert t.spec == {
        "name": "t",
        "description": "",
        "input_schema": {"type": "object", "properties": {}},
    }
    assert (t.validation, t.timeout, t.unchecked) == ("local", None, None)


def test_a_schema_that_is_not_an_object_is_refused_saying_so() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        define_tool(name="x", input_schema=["integer"], execute=lambda i: 1)  # type: ignore[arg-type]
    assert str(info.value) == "tool 'x': input_schema must be a JSON Schema object"


async def test_local_validation_enforces_every_keyword_and_remote_only_the_shape() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 10}}}
    local = define_tool(name="l", input_schema=schema, execute=lambda i: "ran")
    remote = define_tool(
        name="r", input_schema=schema, execute=lambda i: "ran", validation="remote"
    )
    assert (local.validation, remote.validation) == ("local", "remote")
    assert local.check_input({"n": 5}) == "n: 5 is less than the minimum of 10"
    assert remote.check_input({"n": 5}) is None


@pytest.mark.parametrize("dialect", [None, "http://json-schema.org/draft-07/schema#"])
def test_formats_are_annotations_as_json_schema_reads_them_by_default(dialect: str | None) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"to": {"format": "email"}}}
    if dialect:
        schema["$schema"] = dialect
    t = define_tool(name="t", input_schema=schema, execute=lambda i: "ran")
    assert t.check_input({"to": "not an address"}) is None


def test_a_pattern_does_not_let_a_trailing_newline_through() -> None:
    # Python's `$` also matches before a final newline; JSON Schema's (ECMA-262) does not.
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}}}
    t = define_tool(name="t", input_schema=schema, execute=lambda i: "ran")
    assert t.check_input({"code": "abc"}) is None
    assert t.check_input({"code": "abc\n"}) == "code: 'abc\\n' does not match '^[a-z]+$'"
    # A `$` in a character class or escaped is a literal dollar sign, left as it is.
    dollar = {"type": "string", "pattern": r"^[$]x\$$"}
    literal = define_tool(name="d", input_schema=dollar, execute=lambda i: "ran")
    assert literal.check_input("$x$") is None
    assert literal.check_input("$x$\n") is not None
    # `pattern` says nothing about values that are not strings.
    untyped = define_tool(name="u", input_schema={"pattern": "^[a-z]+$"}, execute=lambda i: "ran")
    assert untyped.check_input(5) is None


def test_a_problem_names_its_path_and_one_at_the_root_names_none() -> None:
    point = {"type": "object", "properties": {"x": {"type": "integer"}}}
    t = define_tool(
        name="t",
        input_schema={"type": "object", "properties": {"point": point}},
        execute=lambda i: "ran",
    )
    assert t.check_input({"point": {"x": "a"}}) == "point/x: 'a' is not of type 'integer'"
    assert t.check_input([1]) == "[1] is not of type 'object'"


def test_a_2020_12_keyword_inside_a_combinator_is_enforced() -> None:
    schema = {"anyOf": [{"type": "array", "prefixItems": [{"type": "integer"}]}]}
    t = define_tool(name="t", input_schema=schema, execute=lambda i: "ran")
    assert t.check_input(["x"]) == "0: 'x' is not of type 'integer'"
    assert t.check_input([1, "x"]) is None


async def test_a_typed_tool_may_be_sync_take_no_context_and_leave_a_parameter_untyped() -> None:
    @tool
    def label(text: str, extra):  # type: ignore[no-untyped-def]
        return f"{text}:{extra!r}"

    assert label.description == ""
    assert label.input_schema["properties"]["extra"] == {"title": "Extra"}
    assert await label.call({"text": "a", "extra": [1, None]}, ctx()) == ToolResult("a:[1, None]")


async def test_parameters_after_the_context_are_part_of_a_typed_tools_schema() -> None:
    @tool
    def scale(value: float, c: RunContext, factor: int = 2) -> float:
        return value * factor

    assert list(scale.input_schema["properties"]) == ["value", "factor"]
    assert await scale.call({"value": 1.5, "factor": 3}, ctx()) == ToolResult("4.5")


class Point(BaseModel):
    x: int
    y: int


async def test_a_typed_tools_input_problems_are_listed_with_their_paths() -> None:
    @tool(description="Place a label.")
    def place(point: Point, label: str) -> str:
        """Not the description."""
        return label

    assert place.description == "Place a label."
    result = await place.call({"point": {"x": "a", "y": 1}, "label": 3}, ctx())
    assert result == ToolResult(
        "Invalid input for tool place: point/x: Input should be a valid integer, unable to parse "
        "string as an integer; label: Input should be a valid string",
        True,
    )
    at_root = await place.call([1], ctx())
    assert at_root == ToolResult(
        "Invalid input for tool place: (root): Input should be a valid dictionary or instance "
        "of place_input",
        True,
    )


async def test_a_typed_tools_timeout_holds() -> None:
    @tool(timeout=0.01)
    async def stall() -> str:
        await asyncio.sleep(5)
        return "late"

    assert await stall.call({}, ctx()) == ToolResult("Tool stall timed out after 0.01s", True)


def test_a_typed_tool_cannot_take_star_args() -> None:
    def spread(*values: int) -> int:
        return sum(values)

    with pytest.raises(ToolDefinitionError) as info:
        tool(spread)
    assert str(info.value) == "tool 'spread': *args/**kwargs cannot be described"


def test_a_remote_schema_checks_item_types_and_leaves_boolean_subschemas_open() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
            "extra": True,
        },
    }
    t = define_tool(name="r", input_schema=schema, execute=lambda v: v, validation="remote")
    assert t.check_input({"tags": [1]}) == "tags/0: 1 is not of type 'string'"
    assert t.check_input({"tags": ["longer"], "extra": {"any": 1}}) is None


def test_a_remote_schema_that_is_not_an_object_is_not_checked_and_says_so() -> None:
    t = define_tool(name="r", input_schema=True, execute=lambda v: v, validation="remote")  # type: ignore[arg-type]
    assert t.unchecked == "its input schema is not a JSON Schema object"
    assert t.check_input(["anything"]) is None


def test_a_remote_schema_the_meta_schema_check_chokes_on_names_the_failure() -> None:
    t = define_tool(name="r", input_schema={"$schema": 5}, execute=lambda v: v, validation="remote")
    assert t.unchecked is not None
    assert re.match(r"its input schema cannot be compiled: \w+Error: ", t.unchecked), t.unchecked
    assert t.check_input({"anything": 1}) is None


def test_a_remote_optional_property_may_be_null_whatever_its_type_list_says() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": ["string", "integer"]}, "n": {"type": ["number", "null"]}},
        "required": ["s"],
    }
    t = define_tool(name="r", input_schema=schema, execute=lambda v: v, validation="remote")
    assert t.unchecked is None
    assert t.check_input({"s": "a", "n": None}) is None
    assert t.check_input({"s": "a", "n": "x"}) == "n: 'x' is not of type 'number', 'null'"
    assert t.check_input({"s": None}) == "s: None is not of type 'string', 'integer'"


# -- the flat-schema fast path agrees with the validator -------------------------------------

_FLAT_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "description": "b"}},
        "required": ["a", "b"],
    },
    {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": "number"},
            "ok": {"type": "boolean"},
            "none": {"type": "null"},
            "obj": {"type": "object"},
            "list": {"type": "array"},
        },
        "required": ["q"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q", "extra"]},
]
_SCALAR = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)
)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)
_KEYS = ["a", "b", "q", "n", "ok", "none", "obj", "list", "extra", "x"]


@pytest.mark.parametrize("schema", _FLAT_SCHEMAS)
@settings(max_examples=400, deadline=None)
@given(
    value=st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=6)
    | _JSON
    | st.fixed_dictionaries(
        {"q": st.text(max_size=2)}, optional={k: _JSON for k in _KEYS if k != "q"}
    )
)
def test_a_flat_schema_checks_exactly_what_the_validator_checks(
    schema: dict[str, Any], value: Any
) -> None:
    import jsonschema

    t = define_tool(name="flat", input_schema=schema, execute=lambda i: "ok")
    assert (t.check_input(value) is None) == jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ({"q": "x"}, True),
        ({"q": "x", "n": 1}, True),
        ({"q": "x", "n": 1.5}, True),
        ({"q": "x", "n": True}, False),  # a bool is not a number
        ({"q": "x", "ok": 1}, False),  # nor is an int a bool
        ({"q": "x", "none": None, "obj": {}, "list": []}, True),
        ({"q": "x", "obj": []}, False),
        ({"q": "x", "list": {}}, False),
        ({"q": "x", "x": 1}, False),  # no other properties
        ({"n": 1}, False),  # q is required
        ({"q": 1}, False),
        ([], False),
        ("q", False),
    ],
)
def test_the_flat_fast_path_on_the_values_that_tell_types_apart(value: Any, valid: bool) -> None:
    t = define_tool(name="flat", input_schema=_FLAT_SCHEMAS[1], execute=lambda i: "ok")
    assert (t.check_input(value) is None) is valid


def test_an_integer_property_takes_a_whole_float_as_the_validator_does() -> None:
    t = define_tool(name="flat", input_schema=_FLAT_SCHEMAS[0], execute=lambda i: "ok")
    assert t.check_input({"a": 1.0, "b": 2}) is None  # JSON Schema: 1.0 is an integer
    assert t.check_input({"a": 1.5, "b": 2}) is not None
    assert t.check_input({"a": True, "b": 2}) is not None


class Connection:
    """A type pydantic has no schema for."""


def test_a_parameter_type_without_a_json_schema_names_the_tool_parameter_and_type() -> None:
    def query(sql: str, conn: Connection) -> str:
        return sql

    with pytest.raises(ToolDefinitionError) as caught:
        tool(query)
    message = str(caught.value)
    assert message.startswith("tool 'query': parameter 'conn' has type ")
    assert "Connection" in message and "JSON schema" in message


def test_an_annotation_that_does_not_resolve_names_the_tool() -> None:
    def lookup(key: Undefined) -> str:  # type: ignore[name-defined]  # noqa: F821
        return "x"

    with pytest.raises(ToolDefinitionError, match=r"tool 'lookup': .*name 'Undefined'"):
        tool(lookup)
