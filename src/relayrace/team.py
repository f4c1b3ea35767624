"""`Team`: agents sharing one conversation, with routing rules deciding who speaks next."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .agent import Agent
from .exceptions import HandoffError, UserError
from .guardrails import Guardrail
from .messages import ToolCall
from .routing import (
    AgentTarget,
    Finish,
    RevertToInitiator,
    RoundRobin,
    Rule,
    Stay,
    Target,
    TerminateTarget,
    TransferTo,
    TurnInfo,
    check_rules,
    describe,
)
from .workflows import Composite, Driver

if TYPE_CHECKING:
    from .tracing import Span

__all__ = ["Team"]

_NO_RULE = TerminateTarget("no rule matched")


class Team(Composite):
    """The hierarchical pattern: after each agent's turn, ``rules`` pick the next speaker.

    Rules are evaluated in priority order (lower first, ties in list order). A tool returning
    ``TransferTo``/``Finish`` takes precedence over them (the first emitted wins); then
    ``default_target`` applies; ``max_turns`` bounds the number of speaker turns. The team's
    guardrails apply to every member, at every change of speaker. A run starts with
    ``initial``, or with the member ``Runner.run(..., start_agent=...)`` names.
    """

    def __init__(
        self,
        name: str,
        *,
        agents: Sequence[Agent[Any]],
        rules: Sequence[Rule] = (),
        initial: str | None = None,
        default_target: Target = _NO_RULE,
        max_turns: int = 20,
        description: str = "",
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
    ) -> None:
        for a in agents:
            if not isinstance(a, Agent):
                raise UserError(f"Team {name!r}: agents takes Agent objects, not "
                                f"{type(a).__name__} {a!r}.")
        rules = tuple(rules)
        initial = initial or (agents[0].name if agents else "")
        if agents:  # checked before the agents join the team, so a rejected team keeps none
            dynamic = {a.name: {t for tool in a.tools for t in getattr(tool, "routes_to", ())}
                       for a in agents}
            check_rules([a.name for a in agents], rules, initial, default_target, dynamic)
        super().__init__(name, members=agents, description=description,
                         max_turns=max(max_turns * 10, 25))
        self.rules = rules
        self.initial = initial
        self.default_target = default_target
        self.team_turns = max_turns
        self.team_input = tuple(input_guardrails)
        self.team_output = tuple(output_guardrails)

    def _member(self, name: str) -> Agent[Any]:
        found = self.find_agent(name)
        if found is None or found is self:
            raise HandoffError(f"Team {self.name!r} has no agent {name!r}; members: "
                               f"{', '.join(a.name for a in self.sub_agents)}.")
        return found

    def _select(self, turn: TurnInfo) -> tuple[Target, str]:
        ordered = sorted(enumerate(self.rules), key=lambda ir: (ir[1].priority, ir[0]))
        for _, rule in ordered:
            if rule.condition.matches(turn):
                return rule.target, f"{describe(rule.condition)} -> {describe(rule.target)}"
        return self.default_target, f"default target: {describe(self.default_target)}"

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        with driver.team_scope(self.team_input, self.team_output):
            return await self._run(driver, span, pending)

    async def _run(self, driver: Driver, span: Span,
                   pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        speaker = driver.take_start_member() or self._member(self.initial)
        if pending:  # resume with the member whose calls await (e.g. approval)
            last = next((m for m in reversed(driver.transcript) if m.role == "assistant"), None)
            if last is not None and last.name:
                speaker = self._member(last.name)
        final, last_agent = "", speaker
        called: frozenset[str] = frozenset()
        for _ in range(self.team_turns):
            reason = ""
            spoke = speaker  # for rules: the member, even when it is a workflow of agents
            signal: TransferTo | Finish | None = None
            if speaker.is_composite or speaker.pattern == "swarm":
                # A workflow or swarm member runs as a whole.
                final, last_agent, reason = await driver.drive(speaker, span, pending)
            else:
                turn = await driver.speak(speaker, span, pending)
                final, last_agent, signal, called = turn.final, turn.last, turn.signal, turn.called
                spoke = last_agent
            pending = []
            if driver.stopped:
                return final, last_agent, reason or ("guardrail" if driver.blocked else "")
            if isinstance(signal, Finish):
                driver.finish()
                return signal.summary or final, last_agent, signal.reason
            if isinstance(signal, TransferTo):
                nxt, why = self._member(signal.target), f"TransferTo({signal.target}) from a tool"
                if signal.reason:
                    why += f": {signal.reason}"
            else:
                target, why = self._select(TurnInfo(spoke.name, called, driver.context))
                if isinstance(target, TerminateTarget):
                    return final, last_agent, target.reason
                if isinstance(target, AgentTarget):
                    nxt = self._member(target.agent)
                elif isinstance(target, RevertToInitiator):
                    nxt = self._member(self.initial)
                elif isinstance(target, Stay):
                    nxt = spoke
                else:
                    assert isinstance(target, RoundRobin)
                    nxt = self._member(target.next_after(spoke.name))
            driver.route(last_agent, nxt, why)
            speaker = nxt
        return final, last_agent, "max_turns"
