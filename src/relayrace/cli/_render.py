"""Rich rendering for the CLI: live events, session logs, trace trees, usage and session tables."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..core.events import (
    AgentEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    DelegationEvent,
    GuardrailTriggeredEvent,
    HandoffEvent,
    HumanTakeoverEvent,
    MessageEvent,
    QuestionAskedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StatusEvent,
    TextDeltaEvent,
    ToolResultEvent,
)
from ..core.usage import RunUsage, Usage
from ..sessions import SessionInfo
from ..tracing import Span

__all__ = [
    "EventPrinter",
    "format_time",
    "session_label",
    "session_tree",
    "sessions_table",
    "trace_tree",
    "truncate",
    "usage_table",
]

TRUNCATE = 200


def truncate(text: str, limit: int = TRUNCATE) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_time(ts: float) -> str:
    """A local timestamp, to the minute."""
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


class EventPrinter:
    """Prints events as they come: messages, tool calls, handoffs, delegations, ...

    Assistant text arrives as ``TextDeltaEvent`` pieces when streaming; the ``MessageEvent``
    that follows is then not printed again, and what output guardrails did to the text is
    said after it rather than in its middle. Events of delegated children (``path`` with a
    ``/``) are indented by their depth below ``base_depth``. Tool calls that are transfers
    (named in ``handoff_tools``, or with an id in ``handoff_call_ids``) show as the handoff
    line only. ``live`` leaves the top-level failure to the caller's error message.
    """

    def __init__(
        self,
        console: Console,
        *,
        handoff_tools: Iterable[str] = (),
        handoff_call_ids: Iterable[str] = (),
        base_depth: int = 0,
        live: bool = False,
    ) -> None:
        self.console = console
        self.live = live
        self.handoff_tools = set(handoff_tools)
        self.handoff_call_ids = set(handoff_call_ids)
        self.base_depth = base_depth
        self._streaming: str | None = None  # the path whose text is mid-line
        self._newline_due = False  # the streamed text so far ends with a line break
        self._streamed: dict[str, str] = {}  # text streamed per path, not yet confirmed
        self._guarded: list[GuardrailTriggeredEvent] = []  # said once the streamed text ends
        # Who waits for a person, by agent path: for what, and the requests already shown (a
        # child's request comes again with its parent's pause).
        self._waiting: dict[str, str] = {}
        self._asked: set[tuple[str, str]] = set()

    # -- helpers -----------------------------------------------------------------------------

    def _indent(self, event: AgentEvent) -> str:
        depth = (event.path.count("/") if event.path else 0) - self.base_depth
        return "  " * max(depth, 0)

    def _end_line(self) -> None:
        if self._streaming is not None:
            self.console.print()
            self._streaming = None
            self._newline_due = False
        held, self._guarded = self._guarded, []
        for event in held:
            self._guardrail(event)

    def _line(self, event: AgentEvent, *parts: str | tuple[str, str] | Text) -> None:
        self._end_line()
        text = Text(self._indent(event))
        text.append_text(Text.assemble(*parts))
        self.console.print(text, soft_wrap=True)

    def _is_handoff_call(self, name: str, call_id: str | None) -> bool:
        return name in self.handoff_tools or (
            call_id is not None and call_id in self.handoff_call_ids
        )

    # -- events ------------------------------------------------------------------------------

    def print_all(self, events: Iterable[AgentEvent]) -> None:
        """Print a whole log."""
        for event in events:
            self.print(event)
        self.close()

    def close(self) -> None:
        """End a line of streamed text, if one is open."""
        self._end_line()

    def print(self, event: AgentEvent) -> None:
        """Print one event."""
        if isinstance(event, TextDeltaEvent):
            self._delta(event)
        elif isinstance(event, MessageEvent):
            self._message(event)
        elif isinstance(event, ToolResultEvent):
            self._tool_result(event)
        elif isinstance(event, HandoffEvent):
            reason = f": {event.reason}" if event.reason else ""
            self._line(event, (f"↪ handoff {event.agent} → {event.to_agent}", "bold magenta"),
                       (reason, "magenta"))
        elif isinstance(event, DelegationEvent):
            self._delegation(event)
        elif isinstance(event, GuardrailTriggeredEvent):
            if event.stage == "output" and self._streaming == event.path:
                self._guarded.append(event)  # about the text streaming now: said after it
            else:
                self._guardrail(event)
        elif isinstance(event, ApprovalRequestedEvent):
            if self._waits(event, "approval", event.tool_call_id):
                self._line(event, ("⏸ approval requested: ", "bold yellow"),
                           (f"{event.tool_name}({truncate(event.arguments)})", "yellow"),
                           (f" [call {event.tool_call_id}]", "dim"))
        elif isinstance(event, ApprovalDecidedEvent):
            verdict = "approved" if event.approved else "rejected"
            self._line(event, (f"{'✔' if event.approved else '✗'} {verdict} ",
                               "bold green" if event.approved else "bold red"),
                       (event.tool_name, "green" if event.approved else "red"),
                       (f" by {event.decided_by or 'someone unnamed'}"
                        f" at {format_time(event.time)}", "dim"),
                       (f" [call {event.tool_call_id}]", "dim"))
        elif isinstance(event, QuestionAskedEvent):
            if self._waits(event, "an answer", event.question_id):
                choices = f" ({' / '.join(event.choices)})" if event.choices else ""
                self._line(event, ("⏸ question: ", "bold yellow"),
                           (f"{event.question}{choices}", "yellow"),
                           (f" [question {event.question_id}]", "dim"))
        elif isinstance(event, HumanTakeoverEvent):
            self._waits(event, "their reply", "")
            self._line(event, ("⏸ ", "bold yellow"),
                       (f"{event.agent} (a person) holds the conversation", "yellow"))
        elif isinstance(event, StatusEvent):
            self._line(event, (f"⋯ {event.agent} ({event.state}): ", "dim cyan"),
                       (truncate(event.text), "cyan"))
        elif isinstance(event, RunStartedEvent):
            if self._indent(event):
                self._line(event, (f"▸ {event.path or event.agent} started", "dim"))
        elif isinstance(event, RunFinishedEvent):
            self._finished(event)

    def _waits(self, event: AgentEvent, what: str, request: str) -> bool:
        """Note that ``event.path`` waits for ``what``; whether ``request`` is new (to show)."""
        path = event.path or event.agent
        self._waiting.setdefault(path, what)
        key = (path, request)
        new = key not in self._asked
        self._asked.add(key)
        return new

    def _paused(self, event: RunFinishedEvent) -> None:
        """A run that stopped for a person, and who in it waits (not always who it started
        with: the agent a handoff reached, or a delegated child)."""
        path = event.path or event.agent
        # Its agents (a handoff's target is a sibling path) and their delegated children.
        prefix = path.rpartition("/")[0]
        waiting = {p: what for p, what in self._waiting.items()
                   if not prefix or p.startswith(prefix + "/")}
        if not waiting:
            self._line(event, (f"⏸ {path} paused", "bold yellow"))
            return
        waits = "; ".join(f"{p} waits for {what}" for p, what in waiting.items())
        head = "" if list(waiting) == [path] else f"{path} paused: "
        self._line(event, (f"⏸ {head}{waits}", "bold yellow"))
        if not self._indent(event):  # the run itself: what it waited for is said
            self._waiting.clear()

    def _guardrail(self, event: GuardrailTriggeredEvent) -> None:
        detail = f": {event.message}" if event.message else ""
        self._line(event, (f"⛨ guardrail {event.guardrail} ({event.stage}) {event.action}",
                           "bold yellow"), (detail, "yellow"))

    def _delta(self, event: TextDeltaEvent) -> None:
        if not event.delta:
            return
        indent = self._indent(event)
        if self._streaming != event.path:
            self._end_line()
            self.console.print(Text.assemble(indent, (f"{event.agent}: ", "bold blue")),
                               end="", soft_wrap=True)
            self._streaming = event.path
        self._streamed[event.path] = self._streamed.get(event.path, "") + event.delta
        text = "\n" + event.delta if self._newline_due else event.delta
        # A trailing line break waits for more text: the end of the line prints its own.
        self._newline_due = text.endswith("\n")
        if self._newline_due:
            text = text[:-1]
        self.console.print(Text(text.replace("\n", "\n" + indent)), end="", soft_wrap=True)

    def _message(self, event: MessageEvent) -> None:
        msg = event.message
        if msg.role == "assistant":
            streamed = self._streamed.pop(event.path, None)
            if streamed:
                if self._streaming == event.path:
                    self._end_line()
                if msg.content.strip() != streamed.strip():
                    # What was kept differs from what streamed (e.g. redacted): show it.
                    self._line(event, (f"{event.agent} (as kept): ", "bold blue"), msg.content)
            elif msg.content:
                self._line(event, (f"{event.agent}: ", "bold blue"), msg.content)
            for call in msg.tool_calls:
                if self._is_handoff_call(call.name, call.id):
                    continue
                self._line(event, ("  ⚙ ", "cyan"), (call.name, "bold cyan"),
                           (f"({truncate(call.arguments)})", "cyan"))
        elif msg.role == "user" and msg.name == "relayrace":
            pass  # a routing note: the handoff line above already says it
        elif msg.role == "user":
            self._line(event, (f"user → {event.agent}: ", "bold green"), msg.content)
        else:
            self._line(event, (f"{msg.role}: ", "dim"), (truncate(msg.content), "dim"))

    def _tool_result(self, event: ToolResultEvent) -> None:
        call_id = event.message.tool_call_id
        handoff = self._is_handoff_call(event.tool_name, call_id)
        if handoff and not event.is_error:
            return  # the HandoffEvent that follows says it better
        content = truncate(event.message.content)
        if event.is_error:
            self._line(event, (f"  ✗ {event.tool_name}: ", "bold red"), (content, "red"))
        else:
            self._line(event, (f"  → {event.tool_name}: ", "green"), content)

    def _delegation(self, event: DelegationEvent) -> None:
        head = f"⇢ {event.agent} delegated to {event.child_agent}"
        if event.ok:
            report = _report_line(event.report) if event.report else ""
            self._line(event, (head, "bold cyan"), (" ok", "bold green"), report,
                       (f" [session {event.child_session_id}]", "dim"))
        else:
            self._line(event, (head, "bold cyan"), (" failed", "bold red"),
                       (f": {truncate(event.error or '')}", "red"),
                       (f" [session {event.child_session_id}]", "dim"))

    def _finished(self, event: RunFinishedEvent) -> None:
        child = bool(self._indent(event))
        if event.status == "failed":
            if self.live and not child:
                self._end_line()
                return
            self._line(event, (f"✗ {event.path or event.agent} failed: ", "bold red"),
                       (truncate(event.output), "red"))
        elif event.status == "interrupted":
            self._paused(event)
        elif child:
            self._line(event, (f"◂ {event.path or event.agent} finished", "dim"))


def _report_line(report: dict[str, Any]) -> str:
    """A delegation report on one line: its summary and what backs it, not its JSON (whose
    ``raw`` field repeats the whole answer)."""
    text = str(report.get("summary") or report.get("raw") or "")
    counts = [f"{len(report[k])} {label}{'s' if len(report[k]) > 1 else ''}"
              for k, label in (("key_findings", "finding"), ("sources", "source"), ("gaps", "gap"))
              if isinstance(report.get(k), list) and report[k]]
    confidence = report.get("confidence")
    if confidence and confidence != "unknown":
        counts.insert(0, f"confidence {confidence}")
    return f": {truncate(text)}" + (f" ({', '.join(counts)})" if counts else "")


# -- trace --------------------------------------------------------------------------------------

_KIND_STYLE = {
    "run": "bold",
    "agent": "bold blue",
    "model": "magenta",
    "tool": "cyan",
    "handoff": "bold magenta",
    "delegation": "bold cyan",
    "guardrail": "yellow",
}


def _span_label(span: Span, error_shown_below: bool) -> Text:
    text = Text.assemble((f"{span.kind} ", _KIND_STYLE.get(span.kind, "")), (span.name, "bold"))
    text.append(f"  {span.duration_ms:.1f} ms", style="dim")
    attrs = span.attributes
    if span.kind == "model" and ("input_tokens" in attrs or "output_tokens" in attrs):
        text.append(
            f"  tokens {attrs.get('input_tokens', 0)} in / {attrs.get('output_tokens', 0)} out",
            style="dim",
        )
    if span.kind == "handoff" and attrs.get("reason"):
        text.append(f"  {truncate(str(attrs['reason']), 80)}", style="dim")
    if span.error:
        # An error that a child span already shows is only marked, not repeated.
        shown = "✗" if error_shown_below else f"✗ {truncate(span.error)}"
        text.append(f"  {shown}", style="bold red")
    return text


def trace_tree(spans: Sequence[tuple[int, Span]], trace_id: str = "") -> Tree:
    """A tree of ``(depth, span)`` pairs as :meth:`InMemoryTraceProcessor.tree` returns them."""
    title = Text("trace", style="bold")
    if trace_id:
        title.append(f" {trace_id}", style="dim")
    root = Tree(title)
    child_errors = {(s.parent_id, s.error) for _, s in spans if s.error}
    stack: list[Tree] = [root]
    for depth, span in spans:
        del stack[depth + 1 :]
        below = (span.span_id, span.error) in child_errors
        node = stack[-1].add(_span_label(span, below), style="red" if span.error else "")
        stack.append(node)
    return root


# -- usage --------------------------------------------------------------------------------------


def usage_table(usage: RunUsage) -> Table:
    """Requests, tokens and tool calls per agent path (and per model under an agent served
    by more than one), with the total."""
    table = Table(title="Usage", title_justify="left")
    table.add_column("agent", overflow="fold")
    for name in ("requests", "input tokens", "output tokens", "tool calls"):
        table.add_column(name, justify="right")

    def row(u: Usage) -> list[str]:
        return [str(u.requests), str(u.input_tokens), str(u.output_tokens), str(u.tool_calls)]

    for path in sorted(usage.per_agent):
        table.add_row(path, *row(usage.per_agent[path]))
        models = usage.per_agent_model.get(path, {})
        if len(models) > 1:  # which model served how much, when more than one did
            for name in sorted(models):
                table.add_row(Text(f"  {name}", style="dim"), *row(models[name]), style="dim")
    table.add_section()
    table.add_row(Text("total", style="bold"), *row(usage.total), style="bold")
    return table


# -- sessions -----------------------------------------------------------------------------------


def sessions_table(rows: Sequence[tuple[SessionInfo, int]], db: str) -> Table:
    """Top-level sessions with their child-session counts."""
    table = Table(title=f"Sessions in {db}", title_justify="left")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("events", justify="right", no_wrap=True)
    table.add_column("children", justify="right", no_wrap=True)
    for info, children in rows:
        table.add_row(
            info.session_id,
            format_time(info.created_at),
            format_time(info.updated_at),
            str(info.event_count),
            str(children),
        )
    return table


def session_label(info: SessionInfo) -> Text:
    """One line about a session: its id, agent path, parent tool call and size."""
    text = Text(info.session_id, style="bold")
    if info.path:
        text.append(f"  {info.path}", style="cyan")
    if info.parent_tool_call_id:
        text.append(f"  (tool call {info.parent_tool_call_id})", style="dim")
    text.append(f"  {info.event_count} events", style="dim")
    return text


def session_tree(info: SessionInfo, children: dict[str, list[SessionInfo]]) -> Tree:
    """``info`` and its child sessions, recursively; ``children`` maps a parent id to them."""
    root = Tree(session_label(info))

    def add(node: Tree, parent_id: str, seen: set[str]) -> None:
        for child in children.get(parent_id, []):
            if child.session_id in seen:  # a corrupt store must not loop forever
                continue
            add(node.add(session_label(child)), child.session_id, seen | {child.session_id})

    add(root, info.session_id, {info.session_id})
    return root
