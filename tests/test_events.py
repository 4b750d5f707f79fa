from __future__ import annotations

import typing

from tether import PROGRESS_STAGES, TRACE_PHASES, is_progress_stage, is_trace_phase
from tether.events import RENDER_ONLY, AgentEvent, ProgressStage, TracePhase


def test_progress_stages_are_the_closed_vocabulary() -> None:
    assert PROGRESS_STAGES == (
        "sent",
        "started",
        "reasoning",
        "content",
        "validating",
        "retry",
        "tool",
        "done",
    )
    assert set(PROGRESS_STAGES) == set(typing.get_args(ProgressStage))


def test_is_progress_stage_drops_out_of_vocabulary_values() -> None:
    assert all(is_progress_stage(s) for s in PROGRESS_STAGES)
    for bad in ("Sent", "thinking…", "", None, 3, ["sent"], "done "):
        assert not is_progress_stage(bad)


def test_trace_phases_are_the_closed_vocabulary() -> None:
    assert TRACE_PHASES == (
        "prompt",
        "request",
        "response",
        "tool",
        "workflow",
        "guardrail",
        "usage",
        "mcp",
    )
    assert set(TRACE_PHASES) == set(typing.get_args(TracePhase))
    assert all(is_trace_phase(p) for p in TRACE_PHASES)
    assert not is_trace_phase("http") and not is_trace_phase(None)


def test_event_union_has_every_kind_of_the_seed() -> None:
    kinds: set[str] = set()
    for member in typing.get_args(AgentEvent):
        kinds.update(typing.get_args(typing.get_type_hints(member)["type"]))
    assert kinds == {
        "message",
        "text",
        "thinking",
        "tool_input_delta",
        "partial_output",
        "tool_use",
        "tool_result",
        "step",
        "progress",
        "surface",
        "guardrail",
        "trace",
        "memory",
        "paused",
        "resumed",
        "done",
        "error",
        "handoff",  # tether.handoffs: the turn goes on with another agent (render-only)
    }
    assert kinds - RENDER_ONLY == {
        "message",
        "tool_use",
        "tool_result",
        "memory",
        "paused",
        "resumed",
        "done",
    }
