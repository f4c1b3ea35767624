"""What the server shows of a session: its status, active agent, last message and usage."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..core.events import (
    AgentEvent,
    ApprovalDecidedEvent,
    DelegationEvent,
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
    dump_events,
)
from ..core.usage import Usage
from ..sessions import SessionInfo
from ._runs import RunRecord

__all__ = ["SummaryCache", "event_dicts", "summarize"]

TITLE_CHARS = 120
"""A session's title: its first user message, cut to this many characters."""

SUMMARIES_KEPT = 20_000
"""Session summaries the server keeps (the least recently listed go first)."""


def summarize(info: SessionInfo, events: list[AgentEvent], running: RunRecord | None,
              default_agent: str) -> dict[str, Any]:
    """A session as the API lists it."""
    return listed(info, log_summary(events, default_agent), running)


def listed(info: SessionInfo, log: dict[str, Any], running: RunRecord | None) -> dict[str, Any]:
    """A session as the API lists it, from its log's summary (`log_summary`)."""
    status = "running" if running is not None and not running.done else log["status"]
    return {"session_id": info.session_id, "agent": log["agent"],
            "active_agent": log["active_agent"], "status": status,
            "title": log["title"], "last_message": log["last_message"],
            "usage": dict(log["usage"]),
            "created_at": info.created_at, "updated_at": info.updated_at,
            "event_count": info.event_count, "parent_id": info.parent_id,
            "path": info.path, "forked_from": info.forked_from, "forked_at": info.forked_at}


def log_summary(events: list[AgentEvent], default_agent: str) -> dict[str, Any]:
    """What a session's log says of it: its first agent, the active one, the last run's status,
    its title (the first user message), the last message, the usage, and the last approval
    decided (who, when)."""
    status = "idle"
    agent = default_agent
    active = None
    last = title = ""
    decided = None
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
                title = title or (m.content if m.role == "user" else "")
                if m.role == "assistant":
                    active = m.name or active
            _count(usage, e.usage)  # type: ignore[attr-defined]
        elif kind is DelegationEvent:  # what the delegated child (and its children) used
            _count(usage, e.usage)  # type: ignore[attr-defined]
        elif kind is RunFinishedEvent and "/" not in e.path:
            status = {"completed": "finished", "failed": "failed",
                      "interrupted": "waiting"}[e.status]  # type: ignore[attr-defined]
        elif kind is ApprovalDecidedEvent:
            decided = {"tool": e.tool_name, "approved": e.approved,  # type: ignore[attr-defined]
                       "decided_by": e.decided_by, "time": e.time}  # type: ignore[attr-defined]
        elif e.kind == "handoff" and "/" not in e.path:  # type: ignore[attr-defined]
            active = e.to_agent  # type: ignore[attr-defined]
    return {"agent": agent, "active_agent": active or agent, "status": status,
            "title": " ".join(title.split())[:TITLE_CHARS], "last_message": last[:500],
            "usage": usage, "decided": decided}


class SummaryCache:
    """Log summaries by session, each valid for the event count it was made at: a listing
    reads only the logs that changed since (an append changes the count; a log is never
    rewritten in place). Bounded: the least recently used go first."""

    def __init__(self, size: int = SUMMARIES_KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[str, tuple[int, dict[str, Any]]] = OrderedDict()

    def get(self, info: SessionInfo) -> dict[str, Any] | None:
        """The summary of ``info``'s log as it is now, if kept."""
        found = self._kept.get(info.session_id)
        if found is None or found[0] != info.event_count:
            return None
        self._kept.move_to_end(info.session_id)
        return found[1]

    def put(self, info: SessionInfo, summary: dict[str, Any]) -> None:
        """Keep ``summary`` of ``info``'s log at its event count."""
        self._kept[info.session_id] = (info.event_count, summary)
        self._kept.move_to_end(info.session_id)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)


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
