"""Test doubles for models: deterministic, offline, and able to say what each agent saw.

``ScriptedModel`` plays a list of turns in order; ``FunctionModel`` lets a function answer.
Both count tokens as a quarter of the characters, so usage figures are stable in tests.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic_core import to_jsonable_python

from .core.messages import Message, ToolCall
from .core.usage import Usage
from .models.interface import (
    Model,
    ModelRequest,
    ModelResponse,
    OutputDelta,
    OutputMode,
    OutputSchema,
    ToolDefinition,
)

__all__ = [
    "FunctionModel",
    "OutputPart",
    "RecordedRequest",
    "ScriptExhausted",
    "ScriptedModel",
    "TextPart",
    "ToolCallPart",
    "Turn",
    "final_output",
    "text",
    "tool_call",
]


@dataclass(slots=True, frozen=True)
class TextPart:
    """Scripted assistant text."""

    text: str
    """The text."""


@dataclass(slots=True, frozen=True)
class ToolCallPart:
    """A scripted tool call."""

    name: str
    """The tool to call."""
    arguments: str
    """Raw JSON arguments (may be deliberately malformed)."""
    id: str | None = None
    """A fixed call id; by default ``call_<n>`` in call order."""


@dataclass(slots=True, frozen=True)
class OutputPart:
    """A scripted structured output, given the way the request asks for it."""

    value: Any
    """The value (a model instance, a dict, a list, ...), or raw JSON text when ``raw``."""
    raw: bool = False
    """Whether ``value`` is the exact text (or arguments) to send, e.g. malformed JSON."""


Part: TypeAlias = TextPart | ToolCallPart | OutputPart
Turn: TypeAlias = str | Part | Sequence[str | Part] | Message | BaseException
"""One model answer: text (a string, or ``text(...)``), a tool call, a structured output
(``final_output(...)``), several parts (one message), a whole message, or an exception to
raise."""

_TURN_TYPES = frozenset((str, TextPart, ToolCallPart, OutputPart))
"""The types a turn function returns most often, known not to be awaitable."""

_TURNS = ("text (a string or text(...)), tool_call(...), final_output(...), a list of these, "
          "a Message, or an exception to raise")


def text(content: str) -> TextPart:
    """A turn (or part of one) where the model answers with ``content``."""
    return TextPart(content)


_encode = json.JSONEncoder().encode
"""``json.dumps`` with its defaults, without matching its keyword arguments on each call."""


def tool_call(
    name: str, args: dict[str, Any] | str | None = None, *, id: str | None = None
) -> ToolCallPart:
    """A turn (or part of one) where the model calls ``name``.

    ``args`` is a dict (sent as JSON) or a raw string, to script malformed arguments.
    """
    raw = args if isinstance(args, str) else _encode(args) if args else "{}"
    return ToolCallPart(name, raw, id)


def final_output(value: Any, *, raw: bool = False) -> OutputPart:
    """A turn where the model gives its structured output ``value``, as the request asks for
    it: a call of the final-output tool (``"tool"`` mode) or JSON text (``"native"``,
    ``"prompted"``), wrapped as the request's schema wants. With ``raw=True`` ``value`` is the
    text or the tool arguments sent as they are, to script invalid output."""
    return OutputPart(value, raw)


def _output_part(part: OutputPart, request: ModelRequest, model: str) -> ToolCallPart | TextPart:
    """``part`` as the tool call or text that ``request``'s output mode expects."""
    output = request.output
    if output is None:
        raise TypeError(f"{model}: final_output(...) was scripted for a request of agent "
                        f"{request.agent!r} that asks for no structured output (the agent has "
                        "no output_type).")
    if part.raw:
        raw = str(part.value)
    else:
        data = to_jsonable_python(part.value)
        raw = json.dumps({output.wrapper: data} if output.wrapper else data)
    if output.mode == "tool":
        return ToolCallPart(output.tool_name, raw)
    return TextPart(raw)


class ScriptExhausted(AssertionError):
    """A scripted model was asked for more turns than it was given."""


class RecordedRequest:
    """One request a test model received."""

    __slots__ = ("_length", "_request")

    def __init__(self, request: ModelRequest, length: int) -> None:
        self._request = request
        self._length = length

    @property
    def agent(self) -> str:
        """The agent that asked."""
        return self._request.agent

    @property
    def instructions(self) -> str:
        """Its rendered system prompt."""
        return self._request.instructions

    @property
    def tools(self) -> list[str]:
        """The names of the tools offered."""
        return [t.name for t in self._request.tools]

    @property
    def definitions(self) -> list[ToolDefinition]:
        """The tools offered, as the model got them (names, descriptions, schemas)."""
        return list(self._request.tools)

    @property
    def output(self) -> OutputSchema | None:
        """The structured output asked for (schema and mode), if any."""
        return self._request.output

    @property
    def messages(self) -> list[Message]:
        """The conversation as the agent saw it at that request."""
        # The engine's message lists only grow, so a prefix is the exact snapshot.
        return list(self._request.messages[: self._length])

    def __repr__(self) -> str:
        return (f"RecordedRequest(agent={self.agent!r}, tools={self.tools!r}, "
                f"messages={len(self.messages)})")


# Where the last character count stopped: (the messages, their number, the last of them, their
# characters). The conversation grows by appending, and the agents of a run (each with its own
# test model) send the same list, so a request counts only what was added since the last one,
# whichever test model served that. One tuple, read and replaced whole: safe across threads.
_counted: tuple[Sequence[Message] | None, int, Message | None, int] = (None, 0, None, 0)


class _TestModelBase(Model):
    """Request recording, token counting and turn conversion shared by the test models."""

    def __init__(self, name: str, record: bool, output_mode: OutputMode,
                 supports_tools: bool) -> None:
        self.name = name
        self.output_mode = output_mode
        self.supports_tools = supports_tools
        self.record = record
        """Whether every request is kept in ``requests``."""
        self.requests: list[RecordedRequest] = []
        self._calls = 0

    def _record(self, request: ModelRequest) -> int:
        msgs = request.messages
        n = len(msgs)
        if self.record:
            self.requests.append(RecordedRequest(request, n))
        global _counted
        counted, length, last, chars = _counted
        if msgs is counted and 0 < length <= n and msgs[length - 1] is last:
            new = msgs[length:]
        else:
            chars, new = 0, msgs
        for m in new:
            chars += len(m.content)
            if m.tool_calls:
                for c in m.tool_calls:
                    chars += len(c.name) + len(c.arguments)
        _counted = (msgs, n, msgs[n - 1] if n else None, chars)
        return chars + len(request.instructions)

    def _response(self, turn: Turn, request: ModelRequest, input_chars: int) -> ModelResponse:
        agent = request.agent
        kind = type(turn)
        out_chars = 0
        if kind is OutputPart:
            turn = _output_part(turn, request, self.name)  # type: ignore[arg-type]
            kind = type(turn)
        if kind is ToolCallPart:  # the common cases first: this double runs in benchmarks
            part: ToolCallPart = turn  # type: ignore[assignment]
            self._calls += 1
            out_chars = len(part.arguments)
            call = ToolCall(part.id or f"call_{self._calls}", part.name, part.arguments)
            message = Message("assistant", "", (call,), None, agent)
        elif kind is TextPart or kind is str:
            content: str = turn if kind is str else turn.text  # type: ignore[assignment,union-attr]
            out_chars = len(content)
            message = Message("assistant", content, (), None, agent)
        elif isinstance(turn, BaseException):
            raise turn
        elif isinstance(turn, Message):
            message = turn
            out_chars = len(turn.content) + sum(len(c.arguments) for c in turn.tool_calls)
        elif isinstance(turn, str | Sequence):  # a str subclass is one text, not its letters
            texts: list[str] = []
            calls: list[ToolCall] = []
            for p in (turn,) if isinstance(turn, str) else turn:
                if isinstance(p, OutputPart):
                    p = _output_part(p, request, self.name)
                if isinstance(p, str):
                    texts.append(p)
                elif isinstance(p, TextPart):
                    texts.append(p.text)
                elif not isinstance(p, ToolCallPart):
                    raise TypeError(f"{self.name}: a part of a turn is text or tool_call(...), "
                                    f"not {type(p).__name__} {p!r}.")
                else:
                    self._calls += 1
                    calls.append(ToolCall(p.id or f"call_{self._calls}", p.name, p.arguments))
                    out_chars += len(p.arguments)
            message = Message("assistant", "".join(texts), tuple(calls), None, agent)
            out_chars += len(message.content)
        else:
            raise TypeError(f"{self.name}: a turn is {_TURNS}; got {type(turn).__name__} "
                            f"{turn!r}.")
        usage = Usage(1, (input_chars + 3) // 4, (out_chars + 3) // 4)
        return ModelResponse(message, usage, self.name)


@dataclass(slots=True)
class _Cursor:
    """Where a conversation is in a `ScriptedModel`'s turns."""

    next: int
    agent_next: dict[str, int]


class ScriptedModel(_TestModelBase):
    """Plays ``turns`` in call order; several agents may share one instance.

    With ``by_agent``, each agent plays its own list instead, so concurrent children (a war
    room, parallel branches) need no care about the order they call in. ``requests`` records
    every request (what each agent saw and which tools it was offered) unless ``record`` is
    off, for load runs where the list would only grow; ``assert_complete()`` fails if turns
    are left over. ``output_mode`` is how it takes structured output when an agent does not
    say (``"native"`` plays an OpenAI-compatible server, ``"tool"`` Anthropic);
    ``supports_tools=False`` plays a model without tool calls (a delegated child then reports
    in text).

    A served script (``relayrace serve``) meets many sessions: with ``per_conversation``, each
    conversation (``ModelRequest.conversation``: the session, its delegated children
    included) plays the turns from the first, so sessions never take each other's turns; and
    ``then`` is the turn played whenever a conversation's turns are spent, instead of raising
    `ScriptExhausted`, so any number of inputs is answered.
    """

    def __init__(self, turns: Sequence[Turn] = (), *, name: str = "scripted",
                 by_agent: Mapping[str, Sequence[Turn]] | None = None,
                 record: bool = True, output_mode: OutputMode = "tool",
                 supports_tools: bool = True, per_conversation: bool = False,
                 then: Turn | None = None) -> None:
        super().__init__(name, record, output_mode, supports_tools)
        self.turns: list[Turn] = list(turns)
        self.by_agent: dict[str, list[Turn]] = {a: list(t) for a, t in (by_agent or {}).items()}
        self.per_conversation = per_conversation
        self.then = then
        # Where each conversation is in the turns ("" for all, without per_conversation): the
        # next turn of the shared list, and of each agent's own.
        self._cursors: dict[str, _Cursor] = {}

    def _cursor(self, conversation: str) -> _Cursor:
        key = conversation if self.per_conversation else ""
        cursor = self._cursors.get(key)
        if cursor is None:
            cursor = self._cursors[key] = _Cursor(0, dict.fromkeys(self.by_agent, 0))
        return cursor

    def extend(self, turns: Sequence[Turn]) -> None:
        """Queue more turns."""
        self.turns.extend(turns)

    @property
    def remaining(self) -> int:
        """Turns not yet played (by the conversation that has played fewest)."""
        cursors = list(self._cursors.values()) or [_Cursor(0, dict.fromkeys(self.by_agent, 0))]
        return max(len(self.turns) - c.next + sum(len(t) - c.agent_next[a]
                                                  for a, t in self.by_agent.items())
                   for c in cursors)

    def assert_complete(self) -> None:
        """Fail if some scripted turns were never requested (by any conversation)."""
        for cursor in list(self._cursors.values()) or [self._cursor("")]:
            if cursor.next < len(self.turns):
                left = self.turns[cursor.next :]
                raise AssertionError(
                    f"ScriptedModel has {len(left)} unused turn(s) after {cursor.next} "
                    f"request(s); next unused: {left[0]!r}")
            for agent, turns in self.by_agent.items():
                if cursor.agent_next[agent] < len(turns):
                    raise AssertionError(
                        f"ScriptedModel has {len(turns) - cursor.agent_next[agent]} unused "
                        f"turn(s) for agent {agent!r}; next unused: "
                        f"{turns[cursor.agent_next[agent]]!r}")

    async def request(self, request: ModelRequest) -> ModelResponse:
        chars = self._record(request)
        cursor = self._cursor(request.conversation)
        own = self.by_agent.get(request.agent)
        if own is not None:
            n = cursor.agent_next[request.agent]
            if n < len(own):
                cursor.agent_next[request.agent] = n + 1
                return self._response(own[n], request, chars)
            if self.then is None:
                raise ScriptExhausted(f"ScriptedModel ran out of turns for agent "
                                      f"{request.agent!r} after {len(own)} request(s).")
        elif cursor.next < len(self.turns):
            turn = self.turns[cursor.next]
            cursor.next += 1
            return self._response(turn, request, chars)
        elif self.then is None:
            raise ScriptExhausted(
                f"ScriptedModel ran out of turns: request {cursor.next + 1} from agent "
                f"{request.agent!r} but only {len(self.turns)} turn(s) were scripted."
            )
        assert self.then is not None
        return self._response(self.then, request, chars)

    async def stream(self, request: ModelRequest) -> Any:
        response = await self.request(request)
        # Word-sized deltas, so stream consumers see text arrive in pieces.
        words = response.message.content.split(" ")
        for i, word in enumerate(words):
            if word or i:
                yield word if i == 0 else " " + word
        output = request.output
        if output is not None and output.mode == "tool":
            # A structured output's arguments in pieces, as providers stream tool input.
            for call in response.message.tool_calls:
                if call.name == output.tool_name:
                    for start in range(0, len(call.arguments), 8):
                        yield OutputDelta(call.arguments[start:start + 8])
        yield response


FunctionModelFn: TypeAlias = Callable[[ModelRequest], "Turn | Awaitable[Turn]"]


class FunctionModel(_TestModelBase):
    """A model played by ``fn(request)``, which returns a turn (sync or async).

    ``requests`` records every request unless ``record`` is off (for long load runs);
    ``output_mode`` and ``supports_tools`` are as for `ScriptedModel`.
    """

    def __init__(self, fn: FunctionModelFn, *, name: str = "function", delay: float = 0.0,
                 record: bool = True, output_mode: OutputMode = "tool",
                 supports_tools: bool = True) -> None:
        super().__init__(name, record, output_mode, supports_tools)
        self.fn = fn
        self.delay = delay
        """Seconds to sleep per request, to stand in for a model's latency."""

    async def request(self, request: ModelRequest) -> ModelResponse:
        chars = self._record(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        result = self.fn(request)
        # A coroutine or any other awaitable, such as a future (a turn's own types are not).
        if type(result) not in _TURN_TYPES and inspect.isawaitable(result):
            result = await result
        return self._response(result, request, chars)  # type: ignore[arg-type]  # awaited
