"""The typed events of a session log, which are also what ``Runner.stream`` yields.

A session is an append-only list of these. What each agent sees, who is active, the usage and
whatever is needed to resume a run are all derived from it. Every event names the agent it
belongs to (``agent``) and its delegation path (``path``, e.g. ``coordinator/researcher``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from .messages import Message
from .usage import Usage

__all__ = [
    "AgentEvent",
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "ContextCompactedEvent",
    "DelegationEvent",
    "Event",
    "GuardrailTriggeredEvent",
    "HandoffEvent",
    "HumanTakeoverEvent",
    "MemoryEvent",
    "MessageEvent",
    "OutputEvent",
    "QuestionAskedEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "StatusEvent",
    "TextDeltaEvent",
    "ToolResultEvent",
    "ToolStartedEvent",
    "dump_events",
    "load_events",
]


@dataclass(slots=True, kw_only=True)
class AgentEvent:
    """Fields shared by every event."""

    agent: str
    """The agent the event belongs to."""
    path: str = ""
    """The agent's delegation path (``coordinator/researcher``); its name at the top level."""
    time: float = field(default_factory=time.time)
    """When the event happened (seconds since the epoch)."""


@dataclass(slots=True, kw_only=True)
class RunStartedEvent(AgentEvent):
    """A run started with ``agent`` active."""

    kind: Literal["run_started"] = "run_started"
    trace_id: str = ""
    """The trace of this run."""
    run_id: str = ""
    """For a durable run (``relayrace.durable``): its id, so that another attempt of the same
    run finds where it began."""


@dataclass(slots=True, kw_only=True)
class MessageEvent(AgentEvent):
    """A user, system or assistant message became part of the conversation."""

    kind: Literal["message"] = "message"
    message: Message
    """The message as the model saw or produced it."""
    usage: Usage | None = None
    """For a model's answer: what that request cost."""
    model: str | None = None
    """For a model's answer: the model that produced it."""
    finish_reason: Literal["transfer"] | None = None
    """For a model's answer: ``"transfer"`` when the agent's turn ended by calling a transfer
    tool (the Go ADK's ``FinishReasonTransfer``), so whoever embeds the run sees the transfer
    coming as soon as the message does; the ``HandoffEvent`` that follows the call's result
    says where control went (none follows if the transfer was refused, e.g. by a hop limit).
    ``None`` for every other message: the message itself shows whether it called tools."""
    parsed_from_text: str | None = None
    """For a model's answer whose tool calls relayrace parsed from its text
    (``ModelSettings(text_tool_calls="parse")``): that text; the message holds the calls, with
    ids relayrace made, and no text."""


@dataclass(slots=True, kw_only=True)
class ToolResultEvent(AgentEvent):
    """A tool call got its result (every call gets exactly one, also when refused)."""

    kind: Literal["tool_result"] = "tool_result"
    message: Message
    """The tool message sent back to the model."""
    tool_name: str = ""
    """The tool the model called (as written, even if no such tool exists)."""
    is_error: bool = False
    """Whether the result reports a mistake or a failure instead of the tool's output."""
    traceback: str | None = None
    """For a tool that raised: the full traceback, kept here and never shown to the model."""
    full_content: str | None = None
    """When ``message`` was cut to the tool's ``max_result_tokens``: the whole result, which
    ``read_result`` reads back."""


@dataclass(slots=True, kw_only=True)
class ToolStartedEvent(AgentEvent):
    """A tool call is about to run (persistent sessions only).

    Written before the tool starts, so a resume after a crash knows the difference between a
    call that never ran and one whose outcome is unknown.
    """

    kind: Literal["tool_started"] = "tool_started"
    tool_call_id: str
    """The call that starts."""
    tool_name: str = ""
    """The tool it calls."""


@dataclass(slots=True, kw_only=True)
class HandoffEvent(AgentEvent):
    """Control moved from ``agent`` to ``to_agent`` in the same session."""

    kind: Literal["handoff"] = "handoff"
    to_agent: str
    """The agent that takes over."""
    reason: str = ""
    """Why, as the model gave it (or a short default)."""
    tool_call_id: str = ""
    """The transfer call that caused it ("" for a transfer made by routing rules)."""
    returns_to: str | None = None
    """For a target in ``task`` or ``single_turn`` mode: the agent control returns to."""
    is_return: bool = False
    """Whether this is such a target handing control back to the agent that called it."""
    input: Any = None
    """For a handoff with an ``input_type``: the validated input, as JSON data."""
    context: dict[str, Any] | None = None
    """For a handoff with a ``context_transform``: the object it made, which the target's
    instructions read as template variables while it holds the conversation."""


@dataclass(slots=True, kw_only=True)
class DelegationEvent(AgentEvent):
    """A delegated child run finished (agent as tool or a meta-tool's child)."""

    kind: Literal["delegation"] = "delegation"
    child_agent: str
    """The child agent's name."""
    child_session_id: str
    """The child's own session, linked to this one."""
    tool_call_id: str = ""
    """The parent's tool call that started the child."""
    ok: bool = True
    """Whether the child finished with an answer."""
    report: dict[str, Any] | None = None
    """The child's structured delegation report, as a dict."""
    error: str | None = None
    """Why the child failed, when it did."""
    usage: Usage | None = None
    """What the child run used, its own children included."""
    output: Any = None
    """The child's validated structured output, when it has an ``output_type``: the typed
    value in the run that made it, its JSON data once loaded from a store."""


@dataclass(slots=True, kw_only=True)
class GuardrailTriggeredEvent(AgentEvent):
    """A guardrail redacted or blocked content."""

    kind: Literal["guardrail"] = "guardrail"
    guardrail: str
    """The guardrail's name."""
    stage: Literal["input", "output"] = "input"
    """Whether it checked what an agent was about to see or what it answered."""
    action: str = "block"
    """What it did: ``block`` or ``redact``."""
    message: str = ""
    """What it found, without repeating the sensitive content."""


@dataclass(slots=True, kw_only=True)
class ApprovalRequestedEvent(AgentEvent):
    """A tool call or handoff awaits a human decision."""

    kind: Literal["approval_requested"] = "approval_requested"
    tool_call_id: str
    """The call waiting for approval."""
    tool_name: str
    """The tool or handoff that was called."""
    arguments: str = ""
    """The call's raw arguments."""
    session_id: str = ""
    """The session holding the call, when it is a delegated child's ("" for this one)."""
    note: str = ""
    """What the person deciding must know, e.g. that an earlier attempt's outcome is unknown."""


@dataclass(slots=True, kw_only=True)
class ApprovalDecidedEvent(AgentEvent):
    """A person approved or rejected a pending call: who, and (``time``) when. Written by the
    server before the run it resumes; a run reads its decisions from the resume, never from
    this event."""

    kind: Literal["approval_decided"] = "approval_decided"
    tool_call_id: str
    """The call decided on."""
    tool_name: str
    """The tool or handoff that was called."""
    approved: bool
    """Whether the call may run (``False``: the model is told it was rejected)."""
    decided_by: str = ""
    """Who decided: the API key's name, the server's ``--user``, or the name a keyless
    request gave (``""``: nobody said)."""
    session_id: str = ""
    """The session holding the call, when it is a delegated child's ("" for this one)."""


@dataclass(slots=True, kw_only=True)
class QuestionAskedEvent(AgentEvent):
    """A tool call asked a person a question (``RunContext.ask_user``) and awaits the answer."""

    kind: Literal["question_asked"] = "question_asked"
    question_id: str
    """The question's id: the key of ``answers`` in ``Runner.resume``."""
    question: str
    """What was asked."""
    choices: list[str] | None = None
    """The answers allowed, if the question offers a choice."""
    answered: list[str] = field(default_factory=list)
    """The answers to the call's earlier questions, in order, given to it again when it runs
    again."""
    tool_call_id: str
    """The call that asked."""
    tool_name: str
    """The tool called."""
    arguments: str = ""
    """The call's raw arguments."""
    session_id: str = ""
    """The session holding the call, when it is a delegated child's ("" for this one)."""


@dataclass(slots=True, kw_only=True)
class HumanTakeoverEvent(AgentEvent):
    """The conversation is with a person (a ``human(...)`` agent): the run stopped until the
    person replies or hands the conversation back (``Runner.resume(pending, reply=...)``)."""

    kind: Literal["human_takeover"] = "human_takeover"
    from_agent: str = ""
    """The agent that transferred to the person (``hand_back=True`` returns to it)."""
    session_id: str = ""
    """The session holding the conversation, when it is a delegated child's ("" for this
    one)."""


@dataclass(slots=True, kw_only=True)
class RunFinishedEvent(AgentEvent):
    """A run ended: with a final answer, an error, or waiting for a person (approvals,
    questions, a human takeover)."""

    kind: Literal["run_finished"] = "run_finished"
    status: Literal["completed", "failed", "interrupted"] = "completed"
    """How it ended."""
    output: str = ""
    """The final answer, or the error message."""
    reason: str = ""
    """Why the run ended, when a rule or tool ended it (e.g. a terminate target's reason)."""


@dataclass(slots=True, kw_only=True)
class ContextCompactedEvent(AgentEvent):
    """The oldest part of what ``agent`` sees was summarized (compression, or a memory's
    ``summary`` strategy); the messages themselves stay in the log, archived.

    From now on ``agent`` sees ``summary`` in place of messages ``start`` to ``end`` of the
    conversation (of the memory's turns, in a memory log); ``read_result(archive_id)`` reads
    them back.
    """

    kind: Literal["context_compacted"] = "context_compacted"
    archive_id: str
    """The archive's name, e.g. ``archive-1``."""
    start: int = 0
    """The first message (or memory turn) the archive holds."""
    end: int
    """One past the last: everything before ``end`` is summarized."""
    summary: str = ""
    """What the model sees in their place (the earlier summary folded in)."""
    error: str = ""
    """Why there is no new summary, when the summary model failed."""


@dataclass(slots=True, kw_only=True)
class MemoryEvent(AgentEvent):
    """A turn an agent with ``memory=`` remembers (in its memory log, not the conversation's)."""

    kind: Literal["memory"] = "memory"
    session_id: str
    """The session the turn happened in (its own turns are not shown again from memory)."""
    messages: list[Message]
    """What is remembered: the request and the answer (or the request alone)."""


@dataclass(slots=True, kw_only=True)
class TextDeltaEvent(AgentEvent):
    """A piece of streamed model text; only in ``Runner.stream``, never stored."""

    kind: Literal["text_delta"] = "text_delta"
    delta: str
    """The new text."""


@dataclass(slots=True, kw_only=True)
class StatusEvent(AgentEvent):
    """Progress reported by an agent running elsewhere (a remote A2A agent's task updates);
    only in ``Runner.stream``, never stored."""

    kind: Literal["status"] = "status"
    state: str
    """The remote task's state: ``working``, ``input-required``, ``completed``, ..."""
    text: str
    """What the remote agent said about it."""


@dataclass(slots=True, kw_only=True)
class OutputEvent(AgentEvent):
    """A structured output in ``Runner.stream``, never stored: the object validated so far
    while the model writes it (``partial``), then the final, complete one."""

    kind: Literal["output"] = "output"
    output: Any
    """The value: an instance of the agent's ``output_type`` (partial: what is known yet)."""
    partial: bool = True
    """Whether the model is still writing it."""


Event = Annotated[
    RunStartedEvent
    | MessageEvent
    | ToolResultEvent
    | ToolStartedEvent
    | HandoffEvent
    | DelegationEvent
    | GuardrailTriggeredEvent
    | ApprovalRequestedEvent
    | ApprovalDecidedEvent
    | QuestionAskedEvent
    | HumanTakeoverEvent
    | RunFinishedEvent
    | ContextCompactedEvent
    | MemoryEvent
    | TextDeltaEvent
    | StatusEvent
    | OutputEvent,
    Field(discriminator="kind"),
]
"""Any event of a session log or a stream."""



@cache
def _adapter() -> TypeAdapter[Event]:
    """The events' adapter, built when a session first writes or reads its log: building it
    is most of what importing this module would otherwise cost."""
    return TypeAdapter(Event)


def dump_events(events: Iterable[AgentEvent]) -> list[str]:
    """Each event as one line of JSON."""
    # The adapter's serializer itself, with its defaults: what ``dump_json`` calls, without
    # the keyword arguments it passes on for each event (every batch of every run is here).
    dump = _adapter().serializer.to_json
    return [dump(e).decode() for e in events]


def load_events(lines: Sequence[str | bytes]) -> list[AgentEvent]:
    """Events back from JSON lines written by :func:`dump_events`."""
    load = _adapter().validator.validate_json  # as above: what ``validate_json`` calls
    return [load(line) for line in lines]
