"""Pending work across sessions (``GET /api/inbox``): every session whose last run stopped to
wait for people, with what it waits for, the user's message it stopped on, since when it
waits, and how each can be answered.

Items are built from the generic pending summary (`pending_summary`: kind -> items), so a new
kind of interrupt is listed without changes to the console; a kind this module knows the
answer of also carries its actions (a body for ``POST /api/sessions/{id}/pending``, where the
string ``"$input"`` stands for what the person typed).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from ..agents.approvals import PendingRun
from ..core.events import MessageEvent, RunFinishedEvent
from ._api import _agent_of, _owner
from ._runs import pending_summary
from ._sessions import SummaryCache, log_summary

__all__ = ["router"]

router = APIRouter(prefix="/api")

SCANNED = 500
"""The most recently updated sessions the inbox looks at."""

DECIDED_SHOWN = 20
"""The most recent decisions the inbox lists (each session's last: who decided, and when)."""


def _actions(kind: str, item: dict[str, Any]) -> list[dict[str, Any]]:
    """How an item of ``kind`` is answered (none for a kind not known here)."""
    if kind == "approvals":
        call = item["call_id"]
        return [{"label": "Approve", "decide": {"approvals": {call: True}}},
                {"label": "Reject", "decide": {"approvals": {call: False}}}]
    if kind == "questions":
        return [{"label": "Answer", "input": " / ".join(item.get("choices") or []) or "answer",
                 "decide": {"answers": {item["id"]: "$input"}}}]
    if kind == "takeover":
        return [{"label": "Reply", "input": "your reply, as " + item["agent"],
                 "decide": {"reply": "$input"}},
                {"label": f"Hand back to {item['from_agent'] or 'the agent'}",
                 "decide": {"hand_back": True}}]
    return []


def _title(kind: str, item: dict[str, Any]) -> str:
    if kind == "approvals":
        return f"Approve {item['tool']}({item['arguments']})"
    if kind == "questions":
        return str(item["question"])
    if kind == "takeover":
        return f"{item['agent']} (a person) holds the conversation"
    return kind.rstrip("s")


@router.get("/inbox", summary="Every session waiting for people (approvals, answers, ...), "
            "and the approvals decided last")
async def inbox(request: Request, limit: int = Query(100, ge=1, le=500)) -> dict[str, Any]:
    server = request.app.state.relayrace
    infos = await server.store.list_sessions(owner=_owner(request), limit=SCANNED)
    items: list[dict[str, Any]] = []
    decided: list[dict[str, Any]] = []
    cache: SummaryCache = server.summaries
    for info in infos:
        if info.session_id in server.runs.active:
            continue
        known = cache.get(info)  # the listing's summaries: read only logs that may wait
        if known is not None and known["decided"]:
            decided.append({"session_id": info.session_id, **known["decided"]})
        if known is not None and known["status"] != "waiting":
            continue
        session = server.store.session(info.session_id)
        events = await session.get_events()
        if known is None:
            known = log_summary(events, server.default.name)
            cache.put(info, known)
            if known["decided"]:
                decided.append({"session_id": info.session_id, **known["decided"]})
        ended = next((e for e in reversed(events) if isinstance(e, RunFinishedEvent)
                      and "/" not in e.path), None)
        if ended is None or ended.status != "interrupted":
            continue
        stopped = await PendingRun.from_session(session, entry=_agent_of(request, None, events))
        if stopped is None:
            continue
        said = next((e.message.content for e in reversed(events) if isinstance(e, MessageEvent)
                     and "/" not in e.path and e.message.role == "user"), "")
        for kind, pending in pending_summary(stopped).items():
            # a list per kind, or one item (a person's takeover) or none
            for item in pending if isinstance(pending, list) else [pending] if pending else []:
                items.append({"session_id": info.session_id, "kind": kind,
                              "agent": item.get("agent", ""), "title": _title(kind, item),
                              "fields": item, "actions": _actions(kind, item),
                              "user_message": said, "waiting_since": ended.time,
                              "updated_at": info.updated_at})
        if len(items) >= limit:
            break
    decided.sort(key=lambda d: -d["time"])
    return {"items": items[:limit], "decided": decided[:DECIDED_SHOWN], "scanned": len(infos)}
