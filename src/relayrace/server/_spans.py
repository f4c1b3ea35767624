"""A run's trace derived from its session log: spans for the run, each agent's turn at the
conversation, model calls, tool calls, handoffs and delegated children (read from their own
logs, nested), with each span's detail; and the usage they add up to, per agent and model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..core.events import (
    AgentEvent,
    DelegationEvent,
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    ToolResultEvent,
    ToolStartedEvent,
)
from ..core.messages import Message

__all__ = ["run_spans", "usage_of"]

ReadLog = Callable[[str], Awaitable[list[AgentEvent]]]
"""Reads a delegated child's log by its session id."""
ToolsOf = Callable[[str], list[dict[str, Any]]]
"""The tools an agent (by name) is offered, for its model calls' detail."""

_KEPT_MESSAGES = 40  # of a model call's request, the most recent messages shown


def _message(m: Message) -> dict[str, Any]:
    return {"role": m.role, "name": m.name, "content": m.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in m.tool_calls or ()]}


def _usage(used: Any) -> dict[str, int]:
    return {"requests": used.requests, "input_tokens": used.input_tokens,
            "output_tokens": used.output_tokens, "cached_tokens": used.cache_read_tokens,
            "reasoning_tokens": used.reasoning_tokens} if used is not None else {}


class _Builder:
    """Spans in depth-first order, each with its parent's id and times in ms from ``zero``."""

    def __init__(self, zero: float, read: ReadLog, tools: ToolsOf) -> None:
        self.zero, self.read, self.tools = zero, read, tools
        self.spans: list[dict[str, Any]] = []

    def add(self, kind: str, name: str, start: float, end: float, parent: str | None,
            detail: dict[str, Any], *, agent: str = "", error: str | None = None) -> str:
        span_id = f"s{len(self.spans) + 1}"
        self.spans.append({"span_id": span_id, "parent_id": parent, "kind": kind, "name": name,
                           "agent": agent, "start_ms": round((start - self.zero) * 1000, 3),
                           "duration_ms": round(max(0.0, end - start) * 1000, 3),
                           "error": error, "detail": detail})
        return span_id

    async def log(self, events: list[AgentEvent], history: list[Message], parent: str | None,
                  depth: int) -> None:
        """The spans of ``events`` (one run's part of a log) under ``parent``; ``history``:
        the conversation before them."""
        if not events:
            return
        start, end = events[0].time, events[-1].time
        agent = events[0].agent
        agent_span = self.add("agent", agent, start, end, parent, {}, agent=agent)
        agent_spans = [self.spans[-1]]
        calls: dict[str, tuple[float, dict[str, Any]]] = {}
        opened: dict[str, dict[str, Any]] = {}  # tool spans opened early: a child under them
        previous = start
        for e in events:
            if isinstance(e, MessageEvent):
                if e.message.role == "assistant":
                    self.add("model", e.model or "model", previous, e.time, agent_span,
                             {"model": e.model, "request": [_message(m) for m in
                                                            history[-_KEPT_MESSAGES:]],
                              "response": _message(e.message), "usage": _usage(e.usage),
                              "tools": self.tools(e.agent)}, agent=e.agent)
                    for c in e.message.tool_calls or ():
                        calls[c.id] = (e.time, {"name": c.name, "arguments": c.arguments})
                history.append(e.message)
            elif isinstance(e, ToolStartedEvent) and e.tool_call_id in calls:
                calls[e.tool_call_id] = (e.time, calls[e.tool_call_id][1])
            elif isinstance(e, ToolResultEvent):
                history.append(e.message)
                call_id = e.message.tool_call_id or ""
                began, call = calls.pop(call_id, (e.time, {}))
                span = opened.pop(call_id, None) or self._find(self.open_tool(
                    e.tool_name or call.get("name", "tool"), began, agent_span, call, e.agent))
                span["duration_ms"] = round(max(0.0, e.time - began) * 1000, 3)
                span["detail"]["result"] = e.full_content or e.message.content
                span["error"] = e.message.content if e.is_error else None
            elif isinstance(e, DelegationEvent):
                began, call = calls.get(e.tool_call_id, (previous, {}))
                under = agent_span
                if e.tool_call_id in calls:  # the delegation happens inside its tool call
                    tool = opened.get(e.tool_call_id)
                    if tool is None:
                        tool = opened[e.tool_call_id] = self._find(self.open_tool(
                            call.get("name", "tool"), began, agent_span, call, e.agent))
                    under = tool["span_id"]
                child = self.add("delegation", f"{e.agent} → {e.child_agent}", began, e.time,
                                 under, {"report": e.report, "output": e.output,
                                         "child_session_id": e.child_session_id,
                                         "usage": _usage(e.usage)},
                                 agent=e.agent, error=None if e.ok else (e.error or "failed"))
                if depth < 8:  # deeper nesting is read when that child's own trace is opened
                    await self.log(await self.read(e.child_session_id), [], child, depth + 1)
            elif isinstance(e, HandoffEvent):
                self.add("handoff", f"{e.agent} → {e.to_agent}", e.time, e.time, agent_span,
                         {"reason": e.reason, "returns": e.is_return}, agent=e.agent)
                agent_spans[-1]["duration_ms"] = round((e.time - self.zero) * 1000, 3) - \
                    agent_spans[-1]["start_ms"]
                agent = e.to_agent
                agent_span = self.add("agent", agent, e.time, end, parent, {}, agent=agent)
                agent_spans.append(self.spans[-1])
            elif isinstance(e, RunFinishedEvent) and e.status == "failed":
                agent_spans[-1]["error"] = e.output or e.reason or "failed"
            previous = e.time

    def open_tool(self, name: str, began: float, parent: str, call: dict[str, Any],
                  agent: str) -> str:
        """A tool call's span, its end set when its result comes."""
        return self.add("tool", name, began, began, parent,
                        {"arguments": call.get("arguments"), "result": None}, agent=agent)

    def _find(self, span_id: str) -> dict[str, Any]:
        return self.spans[int(span_id[1:]) - 1]


async def run_spans(events: list[AgentEvent], first: int, last: int, read: ReadLog,
                    tools: ToolsOf) -> list[dict[str, Any]]:
    """The spans of the run whose events are ``events[first - 1:last]`` (seqs from 1):
    the run, then its agents' spans with their model calls (and the tools ``tools`` says
    each agent is offered), tool calls, handoffs and delegated children nested under them
    (a delegation under the tool call that made it)."""
    part = events[first - 1:last]
    if not part:
        return []
    builder = _Builder(part[0].time, read, tools)
    history = [e.message for e in events[:first - 1]
               if isinstance(e, MessageEvent | ToolResultEvent)]
    finished = next((e for e in part if isinstance(e, RunFinishedEvent)), None)
    root = builder.add("run", part[0].agent, part[0].time, part[-1].time, None,
                       {"status": finished.status if finished else "incomplete"},
                       agent=part[0].agent)
    await builder.log(part, history, root, 0)
    return builder.spans


def usage_of(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """What the model calls among ``spans`` used: in all, per agent and per model (requests,
    tokens, and ``model_ms``: the time spent waiting for the model)."""
    keys = ("requests", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")
    total: dict[str, float] = dict.fromkeys((*keys, "model_ms"), 0)
    by_agent: dict[str, dict[str, float]] = {}
    by_model: dict[str, dict[str, float]] = {}
    for span in spans:
        used = span["detail"].get("usage") if span["kind"] == "model" else None
        if not used:
            continue
        for bucket in (total, by_agent.setdefault(span["agent"], dict.fromkeys(total, 0)),
                       by_model.setdefault(span["name"], dict.fromkeys(total, 0))):
            for key in keys:
                bucket[key] += used[key]
            bucket["model_ms"] = round(bucket["model_ms"] + span["duration_ms"], 3)
    return {"total": total, "by_agent": by_agent, "by_model": by_model}
