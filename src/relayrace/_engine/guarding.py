"""Guardrails at every boundary: what an agent is about to see, and what it says.

Input guardrails run on everything an agent has not yet checked whenever it takes over or
takes a turn (the user's text, other agents' messages and tool calls, tool results, transfer
reasons); their redactions shape that agent's own view only. Output guardrails run on every
text that leaves an agent as an answer: its final text, a ``Finish`` summary, a task's result.
A streamed answer passes them before any of it is shown (``GuardedStream``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..agents.guardrails import CostLimit, Guardrail, apply_guardrails, block_message
from ..agents.handoffs import FINISH_TASK
from ..agents.tools import ToolRetry, parse_arguments
from ..core.events import GuardrailTriggeredEvent
from ..core.exceptions import GuardrailTripwireTriggered, UserError
from ..core.messages import Message, ToolCall

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from .pieces import Pieces

__all__ = ["GuardedStream", "cost_block", "guard_finish", "guard_text", "input_block",
           "recheck_input"]


def input_block(pieces: Pieces, agent: Agent[Any], extra: Sequence[Message] = ()) -> str | None:
    """Run ``agent``'s input guardrails on what it is about to see and has not checked.

    That is every message since its last check: the user's, other agents' text and tool
    calls, tool results and transfer reasons, plus ``extra`` (results about to be logged).
    Returns the answer to give if one blocks; redactions apply to its view only.
    """
    if not agent.input_guardrails and not pieces.scope.team_input:
        return None
    guards = pieces.scope.team_input + agent.input_guardrails
    start = pieces.views.checked.get(agent.name, 0)
    pieces.views.checked[agent.name] = len(pieces.views.transcript) + len(extra)
    redact = pieces.views.redact.setdefault(agent.name, {})
    for m in [*pieces.views.transcript[start:], *extra]:
        current = redact.get(id(m), m)
        texts = [current.content, *(c.arguments for c in current.tool_calls)]
        checked: list[str] = []
        for text in texts:
            if not text:
                checked.append(text)
                continue
            kept, blocked = _apply(pieces, agent, guards, text, "input")
            if blocked is not None:
                return blocked
            checked.append(kept)
        if checked != texts:
            calls = tuple(ToolCall(c.id, c.name, a)
                          for c, a in zip(current.tool_calls, checked[1:], strict=True))
            redact[id(m)] = Message(m.role, checked[0], calls, m.tool_call_id, m.name)
    return None


async def recheck_input(pieces: Pieces, agent: Agent[Any]) -> str | None:
    """Run ``agent``'s input guardrails on what arrived during its own turn (tool
    results); a guardrail's answer if one blocks. A new redaction makes its view anew."""
    if not (agent.input_guardrails or pieces.scope.team_input):
        return None
    views = pieces.views
    known = len(views.redact.get(agent.name, ()))
    blocked = input_block(pieces, agent)
    if blocked is not None:
        pieces.control.block(blocked)
        return blocked
    if len(views.redact.get(agent.name, ())) != known:
        source = views.filter
        if source is None:
            views.show(agent.name)
        else:
            views.show(agent.name, await pieces.filtered_view(agent, source, views.note),
                       source)
    return None


def cost_block(pieces: Pieces, agent: Agent[Any]) -> str | None:
    """The answer ``agent`` gives instead of a model request when a ``CostLimit`` of its own
    (or of the team it speaks in) is used up: the tokens of this run, its children's included.
    """
    scope = pieces.scope
    for rail in (*agent.input_guardrails, *agent.output_guardrails, *scope.team_input,
                 *scope.team_output):
        if not isinstance(rail, CostLimit):
            continue
        used = pieces.place.local or pieces.state.budget.usage.total
        result = rail.over(used.output_tokens, used.total_tokens)
        if result is None:
            continue
        pieces.log.add(GuardrailTriggeredEvent(agent=agent.name, path=pieces.path(agent),
                                             guardrail=result.guardrail, stage="output",
                                             action="block", message=result.message))
        answer = rail.answer(result)
        pieces.control.block(answer)
        return answer
    return None


def guard_text(pieces: Pieces, agent: Agent[Any], text: str) -> str:
    """``text`` after ``agent``'s output guardrails: an answer it gives or returns."""
    if not (agent.output_guardrails or pieces.scope.team_output) or not text:
        return text
    kept, blocked = _apply(pieces, agent, pieces.scope.team_output + agent.output_guardrails, text,
                           "output")
    if blocked is not None:
        pieces.control.block(blocked)
        return blocked
    return kept


def _apply(
    pieces: Pieces, agent: Agent[Any], guards: Sequence[Guardrail], text: str,
    stage: Literal["input", "output"],
) -> tuple[str, str | None]:
    """Run ``guards`` on ``text`` and log what they did: (kept text, the answer if blocked).

    A tripwire raises instead of blocking.
    """
    kept, results = apply_guardrails(guards, text, pieces.state.context)
    for r in results:
        pieces.log.add(GuardrailTriggeredEvent(agent=agent.name, path=pieces.path(agent),
                                         guardrail=r.guardrail, stage=stage, action=r.action,
                                         message=r.message))
    if results and results[-1].action == "block":
        if results[-1].tripwire:
            raise GuardrailTripwireTriggered(results[-1].guardrail, results[-1].message)
        return kept, block_message(results[-1], stage=stage)
    return kept, None


def guard_finish(pieces: Pieces, agent: Agent[Any], call: ToolCall) -> ToolCall:
    """A finish_task call whose result passed ``agent``'s output guardrails: the result
    leaves the agent, so the caller must never see it unguarded."""
    if call.name != FINISH_TASK:
        return call
    try:
        args = parse_arguments(call.arguments, call.name)
    except ToolRetry:
        return call
    result = args.get("result")
    if not isinstance(result, str):
        return call
    guarded = guard_text(pieces, agent, result)
    if guarded == result:
        return call
    return ToolCall(call.id, call.name, json.dumps({**args, "result": guarded}))


# Where a streamed answer is checked: a sentence end (., ! or ? before a space) or a line break.
_BOUNDARY = re.compile(r"[.!?]\s|\n")


class GuardedStream:
    """The text deltas of an answer, shown only once its output guardrails have passed them.

    When every guardrail streams (``Guardrail.streams``: it never blocks, and what it keeps of a
    text ending at a sentence end stays the start of what it keeps later), the text so far is
    checked at each sentence end or line break and what the guardrails keep of it is shown:
    redactions in their redacted form, so nothing a guardrail changes is ever shown. Any other
    guardrail may block, and a block withholds the whole answer: then the answer is shown only
    once it has passed, as one piece. A long answer is checked at growing steps (each at least
    an eighth of the text so far), so checking stays linear in its length.
    """

    __slots__ = ("_checked", "_context", "_guards", "_length", "_parts", "_tail", "live",
                 "shown")

    def __init__(self, pieces: Pieces, agent: Agent[Any]) -> None:
        self._guards = pieces.scope.team_output + agent.output_guardrails
        self._context = pieces.state.context
        self.live = all(g.streams for g in self._guards)
        """Whether text is shown as the model streams it (else when the answer is complete)."""
        self._parts: list[str] = []  # the streamed text, joined when checked
        self._length = 0
        self._tail = ""  # its last character: ". " may straddle two deltas
        self._checked = 0  # how much of the text the guardrails have passed
        self.shown = ""
        """What was shown: what the guardrails kept of the first ``_checked`` characters."""

    def feed(self, delta: str) -> str:
        """Take a streamed text delta; return the text newly passed, to show ("" if none)."""
        start = self._length - len(self._tail)
        window = self._tail + delta
        self._parts.append(delta)
        self._length += len(delta)
        self._tail = window[-1:]
        cut = 0
        for match in _BOUNDARY.finditer(window):
            cut = start + match.end()
        if cut - self._checked <= self._checked // 8:
            return ""
        self._checked = cut
        text = "".join(self._parts)
        self._parts = [text]
        kept, results = apply_guardrails(self._guards, text[:cut], self._context)
        if results and results[-1].action == "block":
            self._broken(results[-1].guardrail)
        return self._show(kept)

    def finish(self, content: str, *, guarded: bool) -> str:
        """The rest to show once the model's turn is complete: ``content`` is the answer as
        kept (``guarded``) or the text of a turn with tool calls, checked here, unlogged."""
        if not guarded:
            content, results = apply_guardrails(self._guards, content, self._context)
            if results and results[-1].action == "block":
                if self.live:
                    self._broken(results[-1].guardrail)
                return ""
        return self._show(content)

    def _show(self, kept: str) -> str:
        if not kept.startswith(self.shown):
            self._broken(", ".join(g.name for g in self._guards))
        new = kept[len(self.shown):]
        self.shown = kept
        return new

    def _broken(self, names: str) -> None:
        raise UserError(
            f"Output guardrail(s) {names} blocked or changed text of an answer already shown "
            "while it streamed. A guardrail with streams=True must never block, and must keep "
            "what it kept of a text ending at a sentence end; give it streams=False.")
