"""History policies: what of a conversation is sent to the model, each model call.

A policy is a list of processors, each ``(messages, ctx) -> messages`` (sync or async), run in
order before every model call of a turn. A processor sees the transcript as the previous one
left it and returns the list to send; it never changes the caller's `Session` (the loop hands
it its own list, and the built-ins copy what they change).

The built-ins cut only at the start of a turn (a user message), so a tool call always travels
with its result and an assistant message always with its thinking (and the signature a
provider wants back); the current turn is never cut. The system prompt is not part of the
messages at all: no processor can drop it.

A processor that returns something that is not a valid transcript (a tool result without its
call, a part of an unknown shape, a value that is not JSON) is a `ConfigError` naming the
processor, raised before the request is made.
"""

from __future__ import annotations

import inspect
import json
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from ._json import check_json_safe
from ._params import bad, items_of, model_client_spec
from .errors import ConfigError, NotJSONSafeError
from .events import Usage
from .session import Message, Session, _message_problem

if TYPE_CHECKING:
    from .llm.base import LLMClient

__all__ = [
    "SUMMARY_CLOSE",
    "SUMMARY_OPEN",
    "HistoryContext",
    "HistoryProcessor",
    "Summary",
    "apply_history",
    "chars_of",
    "check_history",
    "check_transcript",
    "clear_tool_results",
    "context_window_of",
    "keep_last",
    "keep_tokens",
    "last_turns_start",
    "summarize",
    "turn_starts",
    "with_summary",
]

HistoryProcessor: TypeAlias = Callable[
    [list[Message], "HistoryContext"], "list[Message] | Awaitable[list[Message]]"
]
"""``(messages, ctx) -> messages``, sync or async."""

CHARS_PER_TOKEN: Mapping[str, float] = {
    "anthropic": 3.5,
    "openai": 4.0,
    "openai-responses": 4.0,
    "gemini": 4.0,
}
"""The estimate of characters per token by provider, when no call has been counted yet."""
_DEFAULT_CPT = 4.0

CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-", 1_048_576),
)
"""Context windows (input tokens) by model-name prefix, first match wins; a model config's
``context_window=`` says it for any other model."""

_MEDIA_CHARS = 4_000
"""What an inline media part counts as in an estimate (about a thousand tokens)."""

SUMMARY_OPEN = "<conversation_summary>"
SUMMARY_CLOSE = "</conversation_summary>"
CLEARED = "[tether: this tool result was cleared to save context]"

DEFAULT_SUMMARY_PROMPT = (
    "You compress conversations. Summarize the conversation below so that it can be continued "
    "from the summary alone: keep the user's goals, decisions, facts, names, numbers, open "
    "questions and what tools returned that still matters. Write plain prose, no preamble."
)


def context_window_of(client: Any) -> int | None:
    """The client's context window: its `context_window` (from the model config) or the
    table's entry for its model name; None when neither knows."""
    own = getattr(client, "context_window", None)
    if isinstance(own, int) and own > 0:
        return own
    model = str(getattr(client, "model", "") or "")
    for prefix, size in CONTEXT_WINDOWS:
        if model.startswith(prefix):
            return size
    return None


def chars_of(messages: Sequence[Message]) -> int:
    """The characters of what is sent: text, thinking, tool inputs and results."""
    n = 0
    for m in messages:
        for p in m["content"]:
            if p["type"] == "text" or p["type"] == "thinking":
                n += len(p["text"])
            elif p["type"] == "tool_result":
                n += len(p["output"]) + len(p["name"])
            elif p["type"] == "tool_call":
                value = p["input"]
                n += len(p["name"]) + (
                    len(value) if isinstance(value, str) else len(json.dumps(value))
                )
            elif "data" in p:  # inline media: its base64 is not what the model counts
                n += _MEDIA_CHARS + len(json.dumps({k: v for k, v in p.items() if k != "data"}))
            else:
                n += len(json.dumps(p))
        n += 4  # the role and framing
    return n


@dataclass(slots=True)
class Summary:
    """A summary a `summarize` processor made during a call: the text, the first message it
    does not cover (the object itself, so the lab can find it in what it loaded), how many it
    covers, and what making it cost."""

    text: str
    first_kept: Message
    covered: int
    model: str
    usage: Usage


@dataclass(slots=True)
class HistoryContext:
    """What a processor knows besides the messages. One per turn, updated each model call."""

    session_id: str
    """The session's id (the memory scope's, in the lab)."""
    model: str
    provider: str | None
    context_window: int | None
    """The model's context window in input tokens, when known (see `context_window_of`)."""
    round: int = 0
    """The model call of the turn about to be made (1 for the first)."""
    services: Mapping[str, Any] = field(default_factory=dict)
    last_input_tokens: int | None = None
    """The input tokens the turn's previous model call reported (None before the first)."""
    system_chars: int = 0
    """The characters of this turn's system prompt and tool specs (counted in estimates)."""
    summaries: list[Summary] = field(default_factory=list)
    """Summaries made this call (the lab stores them)."""
    sink: Callable[[Summary], None] | None = None
    """Where each summary goes (the lab's episode stores it in the scope and loads the newest
    with the turns after it); with a sink, a processor keeps none of its own."""

    @property
    def stores_summaries(self) -> bool:
        return self.sink is not None

    _last_sent: list[Message] | None = None
    _cpt: float | None = None
    _seen: list[Message] = field(default_factory=list)

    @property
    def chars_per_token(self) -> float:
        """Characters per token: measured on the last call when it reported its input tokens,
        else the provider's estimate."""
        if self._cpt is not None:
            return self._cpt
        return CHARS_PER_TOKEN.get(self.provider or "", _DEFAULT_CPT)

    def estimate(self, messages: Sequence[Message]) -> int:
        """Estimated input tokens of a request with these messages (and this turn's system
        prompt and tools): the last call's reported count plus an estimate of what was added
        since, when `messages` extends what was sent then; else the whole by characters."""
        sent = self._last_sent
        last = self.last_input_tokens
        cpt = self.chars_per_token
        if sent is not None and last is not None and len(messages) >= len(sent):
            n = len(sent)
            if n == 0 or (messages[0] is sent[0] and messages[n - 1] is sent[n - 1]):
                return last + math.ceil(chars_of(messages[n:]) / cpt)
        return math.ceil((chars_of(messages) + self.system_chars) / cpt)

    def counted(self, sent: list[Message], input_tokens: int | None) -> None:
        """Record what the call just made sent and the input tokens it reported."""
        self._last_sent = list(sent)
        self.last_input_tokens = input_tokens
        if input_tokens:
            chars = chars_of(sent) + self.system_chars
            if chars > 0:
                self._cpt = max(chars / input_tokens, 0.5)


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """The index of every user message: where a turn begins, the only places a built-in cuts."""
    return [i for i, m in enumerate(messages) if m["role"] == "user"]


def last_turns_start(messages: Sequence[Message], turns: int) -> int | None:
    """Where the last `turns` turns begin, None when there are no more turns than that."""
    starts = turn_starts(messages)
    return starts[-turns] if len(starts) > turns else None


def _name(processor: Any) -> str:
    name = getattr(processor, "__qualname__", None) or getattr(processor, "__name__", None)
    if isinstance(name, str):
        return name
    return type(processor).__name__


def check_history(value: Any, where: str = "", param: str = "history") -> list[Any] | None:
    """A list of processors (callables), or None."""
    if value is None:
        return None
    if callable(value):
        raise bad(param, value, "a list of history processors (say [processor])", where)
    return items_of(
        param,
        value,
        callable,
        "a list of history processors ((messages, ctx) -> messages)",
        "a function (messages, ctx) -> messages",
        where,
    )


def check_transcript(messages: Any, who: str) -> list[Message]:
    """`messages` as a transcript a provider accepts, or a ConfigError naming `who`: a list of
    valid messages, JSON-safe, every tool result after its call and every call answered."""
    if not isinstance(messages, list):
        raise ConfigError(
            f"history processor {who} returned {type(messages).__name__}; it must return a "
            "list of messages"
        )
    calls: set[str] = set()
    for i, m in enumerate(messages):
        problem = _message_problem(m)
        if problem is not None:
            raise ConfigError(
                f"history processor {who} returned an invalid transcript: [{i}]{problem}"
            )
        for j, part in enumerate(m["content"]):
            if part["type"] == "tool_call":
                calls.add(part["id"])
                try:
                    check_json_safe(part["input"], f"[{i}].content[{j}].input")
                except NotJSONSafeError as exc:
                    raise ConfigError(
                        f"history processor {who} returned an invalid transcript: {exc}"
                    ) from None
            elif part["type"] == "tool_result":
                if part["id"] not in calls:
                    raise ConfigError(
                        f"history processor {who} returned an invalid transcript: [{i}] is the "
                        f"result of tool call {part['id']!r} without the call (keep a tool call "
                        "and its result together)"
                    )
                calls.discard(part["id"])
    if calls:
        raise ConfigError(
            f"history processor {who} returned an invalid transcript: tool call "
            f"{sorted(calls)[0]!r} has no result (keep a tool call and its result together)"
        )
    return messages


async def apply_history(
    processors: Sequence[HistoryProcessor], messages: list[Message], ctx: HistoryContext
) -> list[Message]:
    """Run `processors` in order on a copy of the list; each result is checked."""
    out = list(messages)
    for processor in processors:
        value = processor(out, ctx)
        if inspect.isawaitable(value):
            value = await value
        out = check_transcript(value, _name(processor))
    return out


# -- the built-ins ---------------------------------------------------------------------------


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(name, value, "an integer >= 1")
    return value


class keep_last:
    """Keep the last `turns` turns (a turn: a user message and everything up to the next)."""

    __slots__ = ("turns",)

    def __init__(self, turns: int) -> None:
        self.turns = _positive("keep_last(turns", turns)

    def __call__(self, messages: list[Message], ctx: HistoryContext) -> list[Message]:
        cut = last_turns_start(messages, self.turns)
        return messages if cut is None else messages[cut:]

    def __repr__(self) -> str:
        return f"keep_last(turns={self.turns})"


class keep_tokens:
    """Drop the oldest whole turns until the estimate fits `max_input_tokens` (the current
    turn is always kept)."""

    __slots__ = ("max_input_tokens",)

    def __init__(self, max_input_tokens: int) -> None:
        self.max_input_tokens = _positive("keep_tokens(max_input_tokens", max_input_tokens)

    def __call__(self, messages: list[Message], ctx: HistoryContext) -> list[Message]:
        return self.fit(messages, ctx, self.max_input_tokens)

    @staticmethod
    def fit(messages: list[Message], ctx: HistoryContext, limit: int) -> list[Message]:
        if ctx.estimate(messages) <= limit:
            return messages
        starts = turn_starts(messages)
        if len(starts) <= 1:
            return messages
        cpt = ctx.chars_per_token
        # Characters from each turn start to the end: drop turns oldest first until it fits.
        total = chars_of(messages) + ctx.system_chars
        budget = limit * cpt
        drop = 0
        for k, start in enumerate(starts[:-1]):
            if k == 0:
                total -= chars_of(messages[:start])
            if total <= budget:
                break
            total -= chars_of(messages[start : starts[k + 1]])
            drop = starts[k + 1]
        return messages[drop:] if drop else messages[starts[0] :]

    def __repr__(self) -> str:
        return f"keep_tokens({self.max_input_tokens})"


class clear_tool_results:
    """Replace the output of tool results older than the last `older_than_turns` turns with a
    short marker (the call and its result both stay, so the pair is whole)."""

    __slots__ = ("older_than_turns",)

    def __init__(self, older_than_turns: int) -> None:
        self.older_than_turns = _positive("clear_tool_results(older_than_turns", older_than_turns)

    def __call__(self, messages: list[Message], ctx: HistoryContext) -> list[Message]:
        cut = last_turns_start(messages, self.older_than_turns)
        if cut is None:
            return messages
        out = list(messages)
        for i in range(cut):
            m = out[i]
            if m["role"] != "tool" or all(
                p.get("output") == CLEARED for p in m["content"] if p["type"] == "tool_result"
            ):
                continue
            content: list[Any] = [
                {**p, "output": CLEARED} if p["type"] == "tool_result" else p for p in m["content"]
            ]
            out[i] = {"role": m["role"], "content": content}
        return out

    def __repr__(self) -> str:
        return f"clear_tool_results(older_than_turns={self.older_than_turns})"


def with_summary(text: str, messages: list[Message]) -> list[Message]:
    """`messages` with `text` as the summary of what came before: a text part at the head of
    the first message (a user message, where a turn begins), the list copied."""
    part: Any = {"type": "text", "text": f"{SUMMARY_OPEN}\n{text}\n{SUMMARY_CLOSE}"}
    if not messages or messages[0]["role"] != "user":
        return [{"role": "user", "content": [part]}, *messages]
    head = messages[0]
    return [{"role": "user", "content": [part, *head["content"]]}, *messages[1:]]


def render_transcript(messages: Sequence[Message]) -> str:
    """A transcript as plain text for a summarizer (tool results cut at 2,000 characters)."""
    lines: list[str] = []
    for m in messages:
        for p in m["content"]:
            if p["type"] == "text":
                lines.append(f"{m['role']}: {p['text']}")
            elif p["type"] == "tool_call":
                lines.append(f"assistant called {p['name']}({json.dumps(p['input'])[:2000]})")
            elif p["type"] == "tool_result":
                lines.append(f"tool {p['name']} returned: {p['output'][:2000]}")
    return "\n".join(lines)


class _Reply(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def usage(self) -> Usage: ...


class SummaryAgent(Protocol):
    """What `summarize(agent=)` needs of the agent writing the summary (a harness `Agent` is
    one: this module sits below the class)."""

    @property
    def client(self) -> LLMClient: ...

    async def run_turn(self, session: Session, text: str, /) -> _Reply: ...


class summarize:
    """When the estimate is over `when_tokens_over`, replace the turns before the last
    `keep_last_turns` with a summary made by `model` (a model string, config or client) or
    `agent` (a harness `Agent`), with `prompt` as its instructions. A summary is reused until the
    estimate is over again; the next covers the previous one and what followed it.

    In the lab the summary is stored in the memory scope (a `summary` record) and the next turn
    loads it instead of the turns it covers; for a harness agent it is kept in this processor,
    per session id (the caller's Session is never changed).
    """

    def __init__(
        self,
        *,
        model: Any = None,
        agent: SummaryAgent | None = None,
        when_tokens_over: int,
        keep_last_turns: int = 4,
        prompt: str | None = None,
    ) -> None:
        if (model is None) == (agent is None):
            raise ConfigError("summarize() takes one of model= or agent= (what writes the summary)")
        self.model = model
        self.agent = agent
        self.when_tokens_over = _positive("summarize(when_tokens_over", when_tokens_over)
        self.keep_last_turns = _positive("summarize(keep_last_turns", keep_last_turns)
        if prompt is not None and not isinstance(prompt, str):
            raise bad("summarize(prompt", prompt, "a string")
        self.prompt = prompt or DEFAULT_SUMMARY_PROMPT
        self._client: LLMClient | None = None
        self._cache: OrderedDict[str, tuple[int, str]] = OrderedDict()

    def __repr__(self) -> str:
        by = f"agent={self.agent!r}" if self.agent is not None else f"model={self.model!r}"
        return f"summarize({by}, when_tokens_over={self.when_tokens_over})"

    async def __call__(self, messages: list[Message], ctx: HistoryContext) -> list[Message]:
        return await self.compact(messages, ctx, force=False)

    async def compact(
        self, messages: list[Message], ctx: HistoryContext, *, force: bool
    ) -> list[Message]:
        """`messages` with a summary in place of the older turns when over the threshold (or
        `force`: a provider refused the request as too long)."""
        starts = turn_starts(messages)
        ctx._seen = messages
        known = self._known(ctx)
        if known is not None:
            covered, text = known
            if 0 < covered <= len(messages) and covered in starts:
                candidate = with_summary(text, messages[covered:])
                if not force and ctx.estimate(candidate) <= self.when_tokens_over:
                    return candidate
        elif not force and ctx.estimate(messages) <= self.when_tokens_over:
            return messages
        if len(starts) <= self.keep_last_turns:
            return messages if known is None else with_summary(known[1], messages[known[0] :])
        cut = starts[-self.keep_last_turns]
        begin = 0
        previous = None
        if known is not None and 0 < known[0] <= cut:
            begin, previous = known
        older = messages[begin:cut]
        if not older and previous is not None:
            return with_summary(previous, messages[begin:])
        text, usage, model = await self._write(previous, older, ctx)
        made = Summary(text, messages[cut], cut, model, usage)
        ctx.summaries.append(made)
        if ctx.sink is not None:
            ctx.sink(made)
        else:
            self._remember(ctx.session_id, cut, text)
        return with_summary(text, messages[cut:])

    def _known(self, ctx: HistoryContext) -> tuple[int, str] | None:
        if ctx.stores_summaries:
            # Stored summaries come in with what the episode loaded; one made earlier in this
            # turn (a previous model call) covers up to its first kept message.
            if ctx.summaries:
                last = ctx.summaries[-1]
                for i, m in enumerate(ctx._seen):
                    if m is last.first_kept:
                        return i, last.text
            return None
        return self._cache.get(ctx.session_id)

    def _remember(self, sid: str, covered: int, text: str) -> None:
        self._cache[sid] = (covered, text)
        self._cache.move_to_end(sid)
        while len(self._cache) > 256:
            self._cache.popitem(last=False)

    async def _write(
        self, previous: str | None, older: list[Message], ctx: HistoryContext
    ) -> tuple[str, Usage, str]:
        body = render_transcript(older)
        if previous is not None:
            body = f"The summary of what came before:\n{previous}\n\nWhat followed:\n{body}"
        if self.agent is not None:
            result = await self.agent.run_turn(Session(), f"{self.prompt}\n\n{body}")
            return result.text.strip(), result.usage, self.agent.client.model
        client = self._client
        if client is None:
            from .llm import client_from_config

            client = self._client = client_from_config(model_client_spec("model", self.model))
        provider = getattr(client, "provider", None)
        label = f"{provider}:{client.model}" if isinstance(provider, str) else client.model
        request: Any = {
            "model": client.model,
            "system": [{"type": "text", "text": self.prompt}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": body}]}],
        }
        text: list[str] = []
        usage: Usage = {}
        async for chunk in client.chat(request):
            if chunk["type"] == "text":
                text.append(chunk["text"])
            elif chunk["type"] == "finish":
                usage = chunk["usage"]
        return "".join(text).strip(), usage, label


class TurnHistory:
    """A turn's history policy: the processors, their context, and the one compaction a
    context-length refusal may buy (`tether.loop` holds one per turn, with a policy only)."""

    __slots__ = ("ctx", "processors", "retried", "sent")

    def __init__(self, processors: Sequence[HistoryProcessor], ctx: HistoryContext) -> None:
        self.processors = tuple(processors)
        self.ctx = ctx
        self.retried = False
        self.sent: list[Message] = []

    async def view(self, messages: list[Message]) -> list[Message]:
        """What the next model call sends of `messages`."""
        self.ctx.round += 1
        self.sent = await apply_history(self.processors, messages, self.ctx)
        return self.sent

    def counted(self, usage: Usage) -> None:
        """The call that sent `self.sent` reported `usage`."""
        tokens = usage.get("input_tokens")
        if tokens is not None:
            tokens += usage.get("cache_read_tokens", 0) + usage.get("cache_creation_tokens", 0)
        self.ctx.counted(self.sent, tokens)

    def compactor(self) -> keep_tokens | summarize | None:
        """The processor that can shorten a refused request (the last summarize or
        keep_tokens of the policy), or None."""
        for p in reversed(self.processors):
            if isinstance(p, summarize | keep_tokens):
                return p
        return None

    async def compact(
        self, messages: list[Message], tokens: int | None = None, limit: int | None = None
    ) -> list[Message] | None:
        """After a context-length refusal (with the provider's `tokens` and `limit` when it
        said them): the shortened request, once per turn (None when there is nothing to
        shorten with, or it was tried already)."""
        p = self.compactor()
        if p is None or self.retried:
            return None
        self.retried = True
        ctx = self.ctx
        estimate = ctx.estimate(messages)
        ctx.last_input_tokens = None  # what the refused call would have counted is unknown
        ctx._last_sent = None
        if isinstance(p, summarize):
            out = await p.compact(messages, ctx, force=True)
        else:
            # The request was over by the provider's count: aim below its limit by that
            # ratio (half, when it did not say), with a tenth to spare.
            ratio = limit / tokens if tokens and limit and limit < tokens else 0.5
            target = max(int(estimate * ratio * 0.9), 1)
            out = keep_tokens.fit(messages, ctx, min(target, p.max_input_tokens))
        self.sent = check_transcript(out, _name(p))
        return self.sent
