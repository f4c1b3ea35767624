"""Shared helpers for the relayrace core tests: the tool-call protocol check and tracing setup."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from relayrace import Message, MessageEvent, ToolResultEvent
from relayrace.events import AgentEvent
from relayrace.sessions import Session
from relayrace.tracing import (
    InMemoryTraceProcessor,
    get_trace_processors,
    set_trace_processors,
)


def protocol_violations(messages: Sequence[Message]) -> list[str]:
    """Why ``messages`` would be rejected by the OpenAI or Anthropic chat APIs ([] if valid).

    Each assistant message with tool calls must be followed by exactly one tool message per
    call id, in the order of the calls, before any other message; a tool message must answer
    an open call.
    """
    problems: list[str] = []
    pending: list[str] = []
    for i, m in enumerate(messages):
        if m.role == "tool":
            if not pending:
                problems.append(f"message {i}: tool result {m.tool_call_id!r} answers no open call")
            elif m.tool_call_id != pending[0]:
                problems.append(
                    f"message {i}: tool result {m.tool_call_id!r} where {pending[0]!r} was due"
                )
                if m.tool_call_id in pending:
                    pending.remove(m.tool_call_id)
            else:
                pending.pop(0)
            continue
        if pending:
            problems.append(f"message {i} ({m.role}) comes while calls {pending} are unanswered")
            pending = []
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate call ids {ids}")
            pending = list(ids)
    if pending:
        problems.append(f"the log ends with calls {pending} unanswered")
    return problems


def assert_valid_protocol(messages: Sequence[Message]) -> None:
    """Fail with the list of problems if ``messages`` break the tool-call protocol."""
    problems = protocol_violations(messages)
    assert not problems, "\n".join(problems)


def messages_of(events: Sequence[AgentEvent]) -> list[Message]:
    """The conversation recorded in a list of session events."""
    return [e.message for e in events if isinstance(e, MessageEvent | ToolResultEvent)]


async def session_messages(session: Session) -> list[Message]:
    """The conversation a session holds."""
    return messages_of(await session.get_events())


def of_type(events: Sequence[Any], cls: type[Any]) -> list[Any]:
    """The events of one type."""
    return [e for e in events if isinstance(e, cls)]


@pytest.fixture
def traces() -> Iterator[InMemoryTraceProcessor]:
    """An in-memory trace processor, the only one registered for the test."""
    saved = get_trace_processors()
    processor = InMemoryTraceProcessor()
    set_trace_processors([processor])
    try:
        yield processor
    finally:
        set_trace_processors(saved)
