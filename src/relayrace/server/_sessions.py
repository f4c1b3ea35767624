"""What the server shows of a session: its status, active agent, last message and usage."""

from __future__ import annotations

from typing import Any

from ..events import (
    AgentEvent,
    DelegationEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
    dump_events,
)
from ..sessions import SessionInfo
from ..usage import Usage
from ._runs import RunRecord

__all__ = ["event_dicts", "summarize"]


def summarize(info: SessionInfo, events: list[AgentEvent], running: RunRecord | None,
              default_agent: str) -> dict[str, Any]:
    """A session as the API lists it."""
    status = "idle"
    agent = default_agent
    active = None
    last = ""
    usage = {"requests": 0, "input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for e in events:
        kind = type(e)
        if kind is RunStartedEvent and "/" not in e.path:
            agent = agent if active is not None else e.agent
            active = e.agent
        elif kind is MessageEvent:
            m = e.message  # type: ignore[attr-defined]
            if "/" not in e.path and m.role in ("user", "assistant") and m.content:
                last = m.content
                if m.role == "assistant":
                    active = m.name or active
            _count(usage, e.usage)  # type: ignore[attr-defined]
        elif kind is DelegationEvent:  # what the delegated child (and its children) used
            _count(usage, e.usage)  # type: ignore[attr-defined]
        elif kind is RunFinishedEvent and "/" not in e.path:
            status = {"completed": "finished", "failed": "failed",
                      "interrupted": "waiting"}[e.status]  # type: ignore[attr-defined]
        elif e.kind == "handoff" and "/" not in e.path:  # type: ignore[attr-defined]
            active = e.to_agent  # type: ignore[attr-defined]
    if running is not None and not running.done:
        status = "running"
    return {"session_id": info.session_id, "agent": agent, "active_agent": active or agent,
            "status": status, "last_message": last[:500], "usage": usage,
            "created_at": info.created_at, "updated_at": info.updated_at,
            "event_count": info.event_count, "parent_id": info.parent_id,
            "path": info.path, "forked_from": info.forked_from, "forked_at": info.forked_at}


def _count(usage: dict[str, int], used: Usage | None) -> None:
    if used is not None:
        usage["requests"] += used.requests
        usage["input_tokens"] += used.input_tokens
        usage["output_tokens"] += used.output_tokens
        usage["total_tokens"] += used.input_tokens + used.output_tokens


def event_dicts(events: list[AgentEvent]) -> list[Any]:
    """The events as JSON values (relayrace's event JSON)."""
    import json

    return [json.loads(line) for line in dump_events(events)]
