"""The cascade ladder: until / when / retry / verdicts / exit gate / feedback / attempts,
services, step events and trace records — including the seed's own examples."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

import tether
from tether.errors import AbortedError, WorkflowError
from tether.events import AgentEvent, TraceRecord
from tether.session import reduce
from tether.testing import script_client
from tether.workflows import (
    LadderContext,
    LadderOutcome,
    LadderStep,
    LadderWorkflow,
    Retry,
    Verdict,
    define_workflow,
    read_verdict,
    run_ladder,
)


def agent_with(
    *workflows: LadderWorkflow, replies: Sequence[str] = (), **config: Any
) -> tether.Agent:
    return tether.create_agent(
        llm=script_client([{"text": r} for r in replies]), workflows=list(workflows), **config
    )


async def ask(ctx: LadderContext, prompt: str) -> str:
    """What a real step does: one turn of the agent, returning the reply text."""
    assert ctx.agent is not None and ctx.session is not None
    text = ""
    async for event in ctx.agent.send(ctx.session, prompt):
        if event["type"] == "done":
            text = event["text"]
    return text


async def run(agent: tether.Agent, name: str, input: Any = None, **kw: Any) -> LadderOutcome:
    return await agent.run_workflow(agent.create_session(), name, input, **kw)


# -- the seed's examples ---------------------------------------------------------------------


async def test_seed_usage_ladder_climbs_to_the_first_accepted_step() -> None:
    async def zettel(ctx: LadderContext) -> dict[str, Any]:
        return {"strategy": await ask(ctx, f"zettel {ctx.input['intent']}")}

    async def free_form(ctx: LadderContext) -> dict[str, Any]:
        text = await ask(ctx, "free-form")
        return {"ok": bool(text), "text": text}

    async def passes_gate(r: dict[str, Any]) -> bool:
        await asyncio.sleep(0)
        return bool(r["text"] == "<card/>")

    async def free_form_until(r: dict[str, Any]) -> bool:
        return bool(r["ok"] and await passes_gate(r))

    monolithic_ran: list[bool] = []

    def monolithic(ctx: LadderContext) -> str:
        monolithic_ran.append(True)
        return "mono"

    generate = define_workflow(
        "generate",
        [
            {
                "name": "zettel",
                "run": zettel,
                "until": lambda r: r["strategy"] == "composition-match",
            },
            {"name": "free-form", "run": free_form, "until": free_form_until},
            {"name": "monolithic", "run": monolithic},
        ],
    )
    agent = agent_with(generate, replies=["no-match", "<card/>"])
    outcome = await run(agent, "generate", {"intent": "a login form"})
    assert (outcome.result, outcome.step, outcome.accepted) == (
        {"ok": True, "text": "<card/>"},
        "free-form",
        True,
    )
    assert outcome.attempts == [
        {"step": "zettel", "accepted": False, "round": 1, "result": {"strategy": "no-match"}},
        {
            "step": "free-form",
            "accepted": True,
            "round": 1,
            "result": {"ok": True, "text": "<card/>"},
        },
    ]
    assert monolithic_ran == []


def emits(r: dict[str, Any]) -> dict[str, Any]:
    # The seed's verdict-returning until, verbatim in spirit.
    return (
        {"accepted": True}
        if len(r["messages"])
        else {"accepted": False, "reason": "no-emission", "detail": "engine emitted nothing"}
    )


async def test_seed_verdicts_land_on_the_attempts() -> None:
    async def engine(ctx: LadderContext) -> dict[str, Any]:
        text = await ask(ctx, ctx.step_name)
        return {"messages": [text] if text else []}

    generate = define_workflow(
        "generate",
        [
            {"name": "zettel", "run": engine, "until": emits},
            {"name": "free-form", "run": engine, "until": emits},
        ],
    )
    agent = agent_with(generate, replies=["", "<card/>"])
    outcome = await run(agent, "generate", {"intent": "x"})
    assert outcome.attempts == [
        {
            "step": "zettel",
            "accepted": False,
            "reason": "no-emission",
            "detail": "engine emitted nothing",
            "round": 1,
            "result": {"messages": []},
        },
        {"step": "free-form", "accepted": True, "round": 1, "result": {"messages": ["<card/>"]}},
    ]
    assert outcome.accepted and outcome.step == "free-form"


async def test_seed_exit_gate_reads_ctx_input_and_falls_through() -> None:
    catalog = {"Card", "Button"}

    async def validates_against_catalog(result: dict[str, Any], ctx: LadderContext) -> bool:
        await asyncio.sleep(0)
        return result["component"] in catalog and ctx.input["intent"] in result["title"]

    generate = define_workflow(
        "generate",
        [
            {
                "name": "zettel",
                "run": lambda ctx: {"component": "Carousel", "title": "login"},
                "until": lambda r: True,
            },
            {
                "name": "free-form",
                "run": lambda ctx: {"component": "Card", "title": "login"},
                "until": lambda r: True,
            },
            {"name": "monolithic", "run": lambda ctx: {"component": "Nope", "title": ""}},
        ],
        exit_gate=validates_against_catalog,
    )
    outcome = await run(agent_with(generate), "generate", {"intent": "login"})
    assert outcome.step == "free-form" and outcome.accepted
    assert outcome.attempts[0] == {
        "step": "zettel",
        "accepted": False,
        "reason": "gate-rejected",
        "gate_rejected": True,
        "round": 1,
        "result": {"component": "Carousel", "title": "login"},
    }
    assert "gate_rejected" not in outcome.attempts[1]


async def test_seed_same_step_repair_retries_with_feedback() -> None:
    seen_feedback: list[Verdict | None] = []
    seen_rounds: list[int] = []

    def generate(input: dict[str, Any], feedback: Verdict | None) -> dict[str, Any]:
        fixed = set(feedback.data) if feedback is not None and feedback.data else set()
        errors = [e for e in input["problems"] if e not in fixed][:1]
        return {"valid": not errors, "errors": errors, "fixed": sorted(fixed)}

    def repair(ctx: LadderContext) -> dict[str, Any]:
        seen_feedback.append(ctx.feedback)
        seen_rounds.append(ctx.round)
        return generate(ctx.input, ctx.feedback)

    ladder = define_workflow(
        "repairing",
        [
            {
                "name": "repair",
                "retry": {"max_rounds": 3},
                "run": repair,
                "until": lambda r: (
                    {"accepted": True}
                    if r["valid"]
                    else {"accepted": False, "reason": "invalid", "data": r["errors"]}
                ),
            }
        ],
    )
    outcome = await run(agent_with(ladder), "repairing", {"problems": ["missing-label"]})
    assert seen_rounds == [1, 2]
    assert seen_feedback == [None, Verdict(False, reason="invalid", data=["missing-label"])]
    assert outcome.accepted and outcome.step == "repair"
    assert [
        (a["round"], a["accepted"], a.get("reason"), a.get("data")) for a in outcome.attempts
    ] == [
        (1, False, "invalid", ["missing-label"]),
        (2, True, None, None),
    ]


async def test_seed_services_per_run_wins_key_by_key() -> None:
    seen: list[tuple[Any, dict[str, Any]]] = []

    def step(ctx: LadderContext) -> str:
        seen.append((ctx.input, dict(ctx.services)))
        return "ok"

    agent = agent_with(
        define_workflow("generate", [{"name": "only", "run": step}]),
        services={"llm_adapter": "agent-adapter", "store": "agent-store"},
    )
    await run(agent, "generate", {"intent": "x"}, services={"llm_adapter": "turn-adapter"})
    await run(agent, "generate", {"intent": "y"})
    assert seen == [
        ({"intent": "x"}, {"llm_adapter": "turn-adapter", "store": "agent-store"}),
        ({"intent": "y"}, {"llm_adapter": "agent-adapter", "store": "agent-store"}),
    ]
    assert agent.services == {"llm_adapter": "agent-adapter", "store": "agent-store"}


# -- rules -----------------------------------------------------------------------------------


@dataclass
class ObjectVerdict:
    accepted: bool
    reason: str | None = None


@pytest.mark.parametrize(
    ("value", "accepted", "reason"),
    [
        ({"accepted": False, "reason": "no"}, False, "no"),
        ({"accepted": True, "reason": "fine"}, True, "fine"),
        (Verdict(False, reason="dataclass"), False, "dataclass"),
        (ObjectVerdict(False, reason="object"), False, "object"),
        # Not verdicts: `accepted` is not a real bool, so the value is read for truthiness.
        ({"accepted": 0}, True, None),
        ({"accepted": "no"}, True, None),
        ({}, False, None),
        ([], False, None),
        ([0], True, None),
        ("", False, None),
        ("x", True, None),
        (0, False, None),
        (None, False, None),
    ],
)
def test_what_counts_as_a_verdict(value: Any, accepted: bool, reason: str | None) -> None:
    v = read_verdict(value)
    assert (v.accepted, v.reason) == (accepted, reason)


async def test_truthiness_until_rejects_and_the_ladder_falls_through() -> None:
    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": lambda ctx: [], "until": lambda r: r},
            {"name": "b", "run": lambda ctx: [1], "until": lambda r: r},
        ],
    )
    outcome = await run(agent_with(ladder), "w")
    assert [(a["step"], a["accepted"]) for a in outcome.attempts] == [("a", False), ("b", True)]
    assert "reason" not in outcome.attempts[0]


async def test_accepted_is_false_only_when_the_last_step_also_rejected() -> None:
    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": lambda ctx: "ra", "until": lambda: False},
            {
                "name": "b",
                "run": lambda ctx: "rb",
                "until": lambda r: Verdict(False, reason="still-bad", detail="d", data={"k": 1}),
            },
        ],
    )
    outcome = await run(agent_with(ladder), "w")
    assert (outcome.result, outcome.step, outcome.accepted) == ("rb", "b", False)
    assert outcome.attempts[-1] == {
        "step": "b",
        "accepted": False,
        "reason": "still-bad",
        "detail": "d",
        "data": {"k": 1},
        "round": 1,
        "result": "rb",
    }


async def test_a_terminal_step_is_always_accepted_and_never_gated() -> None:
    gate_calls: list[Any] = []

    def gate(result: Any) -> bool:
        gate_calls.append(result)
        return False

    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": lambda ctx: "ra", "until": lambda r: False},
            {"name": "floor", "run": lambda ctx: "last resort"},
            {"name": "never", "run": lambda ctx: "unreached"},
        ],
        exit_gate=gate,
    )
    outcome = await run(agent_with(ladder), "w")
    assert (outcome.result, outcome.step, outcome.accepted) == ("last resort", "floor", True)
    assert gate_calls == []  # 'a' was rejected by until, 'floor' is terminal


async def test_until_true_on_the_last_step_makes_it_gated() -> None:
    ladder = define_workflow(
        "w",
        [{"name": "floor", "run": lambda ctx: "x", "until": lambda: True}],
        exit_gate=lambda r, ctx: {"accepted": False, "reason": "bad", "data": [r]},
    )
    outcome = await run(agent_with(ladder), "w")
    assert not outcome.accepted
    assert outcome.attempts == [
        {
            "step": "floor",
            "accepted": False,
            "reason": "gate-rejected",
            "detail": "bad",
            "data": ["x"],
            "gate_rejected": True,
            "round": 1,
            "result": "x",
        }
    ]


async def test_the_gate_runs_only_after_until_accepted() -> None:
    gate_calls: list[Any] = []

    def gate(r: Any) -> bool:
        gate_calls.append(r)
        return True

    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": lambda ctx: "ra", "until": lambda r: False},
            {"name": "b", "run": lambda ctx: "rb", "until": lambda r: True},
        ],
        exit_gate=gate,
    )
    outcome = await run(agent_with(ladder), "w")
    assert outcome.step == "b" and outcome.accepted
    assert gate_calls == ["rb"]


async def test_a_gate_rejection_consumes_a_round_and_comes_back_as_feedback() -> None:
    feedback: list[Verdict | None] = []

    def step(ctx: LadderContext) -> int:
        feedback.append(ctx.feedback)
        return ctx.round

    ladder = define_workflow(
        "w",
        [{"name": "s", "run": step, "until": lambda r: r >= 2, "retry": {"max_rounds": 4}}],
        exit_gate=lambda r: r >= 3,
    )
    outcome = await run(agent_with(ladder), "w")
    assert outcome.result == 3 and outcome.accepted
    assert feedback == [
        None,
        Verdict(False),
        Verdict(False, reason="gate-rejected", gate_rejected=True),
    ]
    assert [(a["round"], a["accepted"], a.get("reason")) for a in outcome.attempts] == [
        (1, False, None),
        (2, False, "gate-rejected"),
        (3, True, None),
    ]


async def test_max_rounds_counts_total_runs_then_falls_through() -> None:
    rounds: list[tuple[str, int]] = []

    def step(ctx: LadderContext) -> str:
        rounds.append((ctx.step_name, ctx.round))
        return ctx.step_name

    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": step, "until": lambda r: False, "retry": {"max_rounds": 2}},
            LadderStep("b", step, until=lambda r: False),
            LadderStep("c", step, until=lambda r: False, retry=Retry(max_rounds=3)),
        ],
    )
    outcome = await run(agent_with(ladder), "w")
    assert rounds == [("a", 1), ("a", 2), ("b", 1), ("c", 1), ("c", 2), ("c", 3)]
    assert [(a["step"], a["round"]) for a in outcome.attempts] == rounds
    assert not outcome.accepted and outcome.step == "c"


async def test_feedback_resets_when_the_ladder_moves_to_the_next_step() -> None:
    feedback: list[Any] = []

    def step(ctx: LadderContext) -> None:
        feedback.append((ctx.step_name, ctx.round, ctx.feedback, len(ctx.attempts)))

    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": step, "until": lambda: {"accepted": False, "reason": "r"}},
            {"name": "b", "run": step},
        ],
    )
    await run(agent_with(ladder), "w")
    assert feedback == [("a", 1, None, 0), ("b", 1, None, 1)]


async def test_when_false_skips_without_an_attempt() -> None:
    seen: list[Any] = []

    def when_b(result: Any, ctx: LadderContext) -> bool:
        seen.append((result, ctx.step_name))
        return False

    async def when_c(result: Any) -> Verdict:
        seen.append((result, "c"))
        return Verdict(True)

    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": lambda ctx: "ra", "until": lambda r: False},
            {"name": "b", "run": lambda ctx: "rb", "when": when_b},
            {"name": "c", "run": lambda ctx: "rc", "when": when_c},
        ],
    )
    outcome = await run(agent_with(ladder), "w")
    assert seen == [("ra", "b"), ("ra", "c")]
    assert [a["step"] for a in outcome.attempts] == ["a", "c"]
    assert outcome.step == "c" and outcome.accepted
    skipped = [e for e in outcome.events if e["type"] == "step" and e["step"] == "b"]
    assert skipped == [
        {"type": "step", "workflow": "w", "step": "b", "data": {"status": "skipped"}}
    ]


async def test_when_sees_none_before_any_step_ran_and_all_skipped_is_no_answer() -> None:
    seen: list[Any] = []

    def when(r: Any) -> bool:
        seen.append(r)
        return False

    ladder = define_workflow("w", [{"name": "a", "run": lambda ctx: 1, "when": when}])
    outcome = await run(agent_with(ladder), "w")
    assert seen == [None]
    assert (outcome.result, outcome.step, outcome.accepted, outcome.attempts) == (
        None,
        None,
        False,
        [],
    )


async def test_everything_may_be_async() -> None:
    async def run_(ctx: LadderContext) -> int:
        await asyncio.sleep(0)
        return ctx.round

    async def until(r: int, ctx: LadderContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"accepted": r == 2, "reason": None if r == 2 else "first"}

    async def when(r: Any, ctx: LadderContext) -> bool:
        return True

    async def gate(r: int, ctx: LadderContext) -> bool:
        return True

    ladder = define_workflow(
        "w",
        [{"name": "a", "run": run_, "until": until, "when": when, "retry": {"max_rounds": 2}}],
        exit_gate=gate,
    )
    outcome = await run(agent_with(ladder), "w")
    assert outcome.result == 2 and outcome.accepted
    assert outcome.attempts[0]["reason"] == "first"


async def test_checks_receive_the_result_and_the_context() -> None:
    seen: list[Any] = []

    def until(result: Any, ctx: LadderContext) -> bool:
        seen.append(("until", result, ctx.input, ctx.step_name, ctx.round, ctx.workflow_name))
        return True

    def gate(result: Any, ctx: LadderContext) -> bool:
        seen.append(("gate", result, ctx.input))
        return True

    ladder = define_workflow("w", [{"name": "a", "run": lambda ctx: "r", "until": until}], gate)
    await run(agent_with(ladder), "w", {"in": 1})
    assert seen == [("until", "r", {"in": 1}, "a", 1, "w"), ("gate", "r", {"in": 1})]


async def test_an_error_in_a_step_propagates() -> None:
    def boom(ctx: LadderContext) -> None:
        raise ValueError("step failed")

    ladder = define_workflow("w", [{"name": "a", "run": boom}])
    with pytest.raises(ValueError, match="step failed"):
        await run(agent_with(ladder), "w")


async def test_unknown_workflow_names_the_declared_ones() -> None:
    agent = agent_with(define_workflow("generate", [{"name": "a", "run": lambda ctx: 1}]))
    with pytest.raises(WorkflowError, match=r"'nope'.*'generate'"):
        await run(agent, "nope")


async def test_an_aborted_signal_stops_before_the_next_round() -> None:
    controller = tether.AbortController()
    ran: list[int] = []

    def step(ctx: LadderContext) -> int:
        ran.append(ctx.round)
        controller.abort("enough")
        return ctx.round

    ladder = define_workflow(
        "w", [{"name": "a", "run": step, "until": lambda r: False, "retry": {"max_rounds": 3}}]
    )
    with pytest.raises(AbortedError, match="enough"):
        await run(agent_with(ladder), "w", signal=controller.signal)
    assert ran == [1]


async def test_run_ladder_takes_a_ladder_directly() -> None:
    ladder = define_workflow("w", [{"name": "a", "run": lambda ctx: ctx.input}])
    agent = agent_with()
    outcome = await run_ladder(agent, agent.create_session(), ladder, 42)
    assert outcome.result == 42 and outcome.to_dict() == {
        "result": 42,
        "step": "a",
        "accepted": True,
        "attempts": [{"step": "a", "accepted": True, "round": 1, "result": 42}],
    }


# -- events and tracing ----------------------------------------------------------------------


def _ladder_for_events() -> LadderWorkflow:
    def step(ctx: LadderContext) -> str:
        ctx.trace("engine:read", {"corpus": "zettel"})
        return ctx.step_name

    return define_workflow(
        "generate",
        [
            {"name": "zettel", "run": step, "until": emits_none},
            {"name": "monolithic", "run": step, "until": lambda r: True},
        ],
        exit_gate=lambda r: r != "monolithic" or {"accepted": True},
    )


def emits_none(r: Any) -> dict[str, Any]:
    return {"accepted": False, "reason": "no-emission"}


async def test_step_events_and_trace_records() -> None:
    records: list[TraceRecord] = []
    live: list[AgentEvent] = []
    agent = agent_with(_ladder_for_events(), trace=records.append)
    session = agent.create_session()
    outcome = await run_ladder(agent, session, "generate", on_event=live.append)
    assert live == outcome.events

    def brief(e: AgentEvent) -> tuple[Any, ...]:
        if e["type"] == "step":
            return ("step", e["step"], e.get("data"))
        assert e["type"] == "trace"
        return ("trace", e["record"]["name"], e["record"].get("data"))

    assert [brief(e) for e in outcome.events] == [
        ("step", "zettel", {"round": 1, "status": "running"}),
        ("trace", "step:start", {"workflow": "generate", "step": "zettel", "round": 1}),
        ("trace", "engine:read", {"corpus": "zettel"}),
        ("step", "zettel", {"round": 1, "status": "rejected", "reason": "no-emission"}),
        (
            "trace",
            "step:verdict",
            {
                "workflow": "generate",
                "step": "zettel",
                "round": 1,
                "accepted": False,
                "reason": "no-emission",
            },
        ),
        ("step", "monolithic", {"round": 1, "status": "running"}),
        ("trace", "step:start", {"workflow": "generate", "step": "monolithic", "round": 1}),
        ("trace", "engine:read", {"corpus": "zettel"}),
        ("step", "monolithic", {"round": 1, "status": "accepted"}),
        (
            "trace",
            "step:verdict",
            {"workflow": "generate", "step": "monolithic", "round": 1, "accepted": True},
        ),
    ]
    assert [r["phase"] for r in records] == ["workflow"] * 6
    assert all(r.get("session_id") == session.id for r in records)
    # Step and trace events are render-only: folding them changes nothing.
    folded = session
    for event in outcome.events:
        folded = reduce(folded, event)
    assert folded == session


async def test_without_tracing_only_step_events_are_emitted() -> None:
    outcome = await run(agent_with(_ladder_for_events()), "generate")
    assert {e["type"] for e in outcome.events} == {"step"}


async def test_gate_rejection_shows_on_the_step_event_and_the_verdict_record() -> None:
    records: list[TraceRecord] = []
    ladder = define_workflow(
        "w",
        [
            {"name": "a", "run": lambda ctx: 1, "until": lambda r: True},
            {"name": "b", "run": lambda ctx: 2},
        ],
        exit_gate=lambda r: False,
    )
    outcome = await run(agent_with(ladder, trace=records.append), "w")
    assert outcome.events[2] == {
        "type": "step",
        "workflow": "w",
        "step": "a",
        "data": {
            "round": 1,
            "status": "rejected",
            "reason": "gate-rejected",
            "gate_rejected": True,
        },
    }
    verdicts = [r["data"] for r in records if r["name"] == "step:verdict"]
    assert verdicts[0] == {
        "workflow": "w",
        "step": "a",
        "round": 1,
        "accepted": False,
        "reason": "gate-rejected",
        "gate_rejected": True,
    }


async def test_remember_in_a_step_becomes_a_memory_event_to_fold() -> None:
    def step(ctx: LadderContext) -> str:
        ctx.remember({"tone": "brief"})
        return "ok"

    agent = agent_with(define_workflow("w", [{"name": "a", "run": step}]))
    session = agent.create_session()
    outcome = await agent.run_workflow(session, "w")
    memory = [e for e in outcome.events if e["type"] == "memory"]
    assert memory == [{"type": "memory", "patch": {"tone": "brief"}}]
    for event in outcome.events:
        session = reduce(session, event)
    assert session.memory == {"tone": "brief"}


# -- declaration errors ----------------------------------------------------------------------


def _ok(ctx: LadderContext) -> int:
    return 1


@pytest.mark.parametrize(
    ("name", "steps", "message"),
    [
        ("", [{"name": "a", "run": _ok}], "non-empty"),
        ("w", [], "no steps"),
        ("w", {"name": "a", "run": _ok}, "must be a list"),
        ("w", [{"name": "a", "run": _ok, "maxRounds": 2}], r"unknown keys \['maxRounds'\]"),
        ("w", [{"name": "a"}], "run must be callable"),
        ("w", [{"run": _ok}], "name must be a non-empty string"),
        ("w", [{"name": "a", "run": _ok, "until": "yes"}], "until must be callable"),
        ("w", [{"name": "a", "run": _ok, "when": 1}], "when must be callable"),
        ("w", [{"name": "a", "run": _ok, "retry": {"max_rounds": 0}}], "max_rounds"),
        ("w", [{"name": "a", "run": _ok, "retry": {"max_rounds": "2"}}], "max_rounds"),
        ("w", [{"name": "a", "run": _ok, "retry": {"max_rounds": True}}], "max_rounds"),
        ("w", [{"name": "a", "run": _ok, "retry": {"rounds": 2}}], "only max_rounds"),
        ("w", [{"name": "a", "run": _ok, "retry": 3}], "retry must be"),
        ("w", [{"name": "a", "run": _ok}, {"name": "a", "run": _ok}], "two steps named 'a'"),
        ("w", ["not a step"], "expected a dict or LadderStep"),
    ],
)
def test_define_workflow_refuses_malformed_steps(name: str, steps: Any, message: str) -> None:
    with pytest.raises(WorkflowError, match=message):
        define_workflow(name, steps)


def test_define_workflow_refuses_a_non_callable_gate() -> None:
    with pytest.raises(WorkflowError, match="exit_gate"):
        define_workflow("w", [{"name": "a", "run": _ok}], exit_gate="strict")  # type: ignore[arg-type]


async def test_run_workflow_passes_on_event_through_to_the_ladder() -> None:
    from tether import Session, create_agent
    from tether.testing import script_client
    from tether.workflows import define_workflow

    ladder = define_workflow("w", [{"name": "only", "run": lambda ctx: "r"}])
    agent = create_agent(llm=script_client([]), workflows=[ladder])
    seen: list[object] = []
    outcome = await agent.run_workflow(Session(), "w", None, on_event=seen.append)
    assert outcome.result == "r"
    assert seen and seen == list(outcome.events)
    assert {e["type"] for e in seen} == {"step"}  # type: ignore[index]


async def test_the_agent_runs_a_durable_workflow_it_declares_by_its_id() -> None:
    # "workflow" has one meaning: workflows= takes ladders and durable workflows alike (they
    # run on one engine); run_workflow() runs either by name.
    from tether import create_agent
    from tether.testing import script_client
    from tether.workflows import WorkflowContext, create_workflow

    async def run(input: dict[str, int], ctx: WorkflowContext[dict[str, int]]) -> int:
        return await ctx.step("double", lambda: input["n"] * 2)

    durable = create_workflow("double", run)
    ladder = define_workflow("ladder", [{"name": "a", "run": lambda ctx: ctx.input}])
    agent = create_agent(llm=script_client([]), workflows=[durable, ladder])
    assert set(agent.workflows) == {"double", "ladder"}
    outcome = await agent.run_workflow(agent.create_session(), "double", {"n": 21})
    assert (outcome.result, outcome.accepted, outcome.attempts) == (42, True, [])
    assert (await agent.run_workflow(agent.create_session(), "ladder", 7)).result == 7
    with pytest.raises(WorkflowError, match=r"a durable workflow runs with agent\.run_workflow"):
        await run_ladder(agent, agent.create_session(), "double")


def test_two_workflows_with_one_name_are_a_config_error() -> None:
    from tether import ConfigError, create_agent
    from tether.testing import script_client

    one = define_workflow("w", [{"name": "a", "run": lambda ctx: 1}])
    with pytest.raises(ConfigError, match="two workflows named 'w'"):
        create_agent(llm=script_client([]), workflows=[one, one])
