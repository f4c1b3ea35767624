"""`Team`: agents sharing one conversation, with routing rules deciding who speaks next."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..agents.agent import Agent
from ..agents.delegation import bounded_history
from ..agents.guardrails import Guardrail
from ..core.exceptions import ConfigError, HandoffError, PatternStepFailed, UserError
from ..core.messages import ToolCall
from .routing import (
    AgentTarget,
    CustomTarget,
    Finish,
    NestedChatTarget,
    RevertToInitiator,
    RoundRobin,
    RoutingRegistry,
    Rule,
    Stay,
    Target,
    TerminateTarget,
    TransferTo,
    TurnInfo,
    check_rules,
    describe,
    rule_from_dict,
    rule_to_dict,
    target_from_dict,
    target_to_dict,
)
from .shapes.driver import Composite, Driver
from .shapes.options import ChildPolicy, Shape

if TYPE_CHECKING:
    from ..tracing import Span

__all__ = ["Team"]

_NO_RULE = TerminateTarget("no rule matched")
GRAPH_FORMAT = "relayrace.teams.team/1"
"""The ``format`` of ``Team.to_dict``'s data; ``from_dict`` refuses others."""
_GRAPH_KEYS = {"format", "name", "description", "agents", "initial", "rules", "default_target",
               "max_turns", "bounded", "nested"}


class Team(Composite):
    """The hierarchical pattern: after each agent's turn, ``rules`` pick the next speaker.

    Rules are evaluated in priority order (lower first, ties in list order). A tool returning
    ``TransferTo``/``Finish`` takes precedence over them (the first emitted wins); then
    ``default_target`` applies; ``max_turns`` bounds the number of speaker turns. The team's
    guardrails apply to every member, at every change of speaker. A run starts with
    ``initial``, or with the member ``Runner.run(..., start_agent=...)`` names;
    ``Runner.run(team, None, session=...)`` after the team stopped at ``max_turns`` goes on
    with the member that was to speak next. Rule cycles with no way out are refused, unless
    ``bounded=True`` says ``max_turns`` is meant to end the run (see ``round_robin``). The
    graph saves as data with ``to_dict`` and loads with ``from_dict``. ``nested`` are the
    agents a ``NestedChatTarget`` runs as a nested chat (no members: they run in child
    sessions).
    """

    shape = Shape(kind="routing", sessions="shared", on_error="stop", failure="error",
                  reports=False)
    """The routing graph: members speak in the run's own session; a nested chat is a child."""

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
        bounded: bool = False,
        nested: Sequence[Agent[Any]] = (),
    ) -> None:
        for a in [*agents, *nested]:
            if not isinstance(a, Agent):
                raise UserError(f"Team {name!r}: agents takes Agent objects, not "
                                f"{type(a).__name__} {a!r}.")
        rules = tuple(rules)
        chats = {a.name: a for a in nested}
        for t in [default_target, *(r.target for r in rules)]:
            if isinstance(t, NestedChatTarget) and t.agent not in chats:
                raise ConfigError(f"Team {name!r}: a NestedChatTarget runs {t.agent!r}, which "
                                  f"is not in nested=[...] (nested: "
                                  f"{', '.join(chats) or 'none'}); pass that agent there.")
        initial = initial or (agents[0].name if agents else "")
        if agents:  # checked before the agents join the team, so a rejected team keeps none
            dynamic = {a.name: {t for tool in a.tools for t in getattr(tool, "routes_to", ())}
                       for a in agents}
            check_rules([a.name for a in agents], rules, initial, default_target, dynamic,
                        bounded=bounded)
        super().__init__(name, members=agents, description=description,
                         max_turns=max(max_turns * 10, 25))
        self.rules = rules
        self.initial = initial
        self.default_target = default_target
        self.team_turns = max_turns
        self.team_input = tuple(input_guardrails)
        self.team_output = tuple(output_guardrails)
        self.bounded = bounded
        self.nested = chats
        """The agents nested chats run, by name."""

    @classmethod
    def round_robin(cls, name: str, agents: Sequence[Agent[Any]], *, max_turns: int,
                    **options: Any) -> Team:
        """Members speak in turn, in ``agents`` order, until ``max_turns`` (AG2's round robin);
        a tool's ``Finish`` or ``TransferTo`` still wins."""
        names = tuple(a.name for a in agents)
        return cls(name, agents=agents, default_target=RoundRobin(names), max_turns=max_turns,
                   bounded=True, **options)

    def to_dict(self) -> dict[str, Any]:
        """The routing graph as JSON-ready data: members by name, rules, targets and limits
        (custom conditions and targets by their registered names; guardrails are not data)."""
        return {"format": GRAPH_FORMAT, "name": self.name, "description": self.description,
                "agents": [a.name for a in self.sub_agents], "initial": self.initial,
                "rules": [rule_to_dict(r) for r in self.rules],
                "default_target": target_to_dict(self.default_target),
                "max_turns": self.team_turns, "bounded": self.bounded,
                "nested": list(self.nested)}

    def to_json(self) -> str:
        """``to_dict`` as JSON text."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *,
                  agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
                  registry: RoutingRegistry | None = None, **options: Any) -> Team:
        """Rebuild a team from ``to_dict`` data, its members found by name in ``agents`` and
        its custom conditions and targets in ``registry``. ``options`` (guardrails) are
        passed to the constructor. A malformed graph raises ``ConfigError`` saying where."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"A team graph is a mapping, got {type(data).__name__}.")
        if data.get("format") != GRAPH_FORMAT:
            raise ConfigError(f"A team graph of format {data.get('format')!r}; this relayrace "
                              f"reads {GRAPH_FORMAT!r}.")
        unknown = sorted(set(data) - _GRAPH_KEYS)
        if unknown:
            raise ConfigError(f"Unknown keys in the team graph: {', '.join(unknown)}; valid: "
                              f"{', '.join(sorted(_GRAPH_KEYS))}.")
        by_name = dict(agents) if isinstance(agents, Mapping) else {a.name: a for a in agents}
        names = data.get("agents")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError("The team graph's 'agents' is a list of member names.")
        missing = [n for n in names if n not in by_name]
        if missing:
            raise ConfigError(f"The team graph names members {', '.join(map(repr, missing))} "
                              f"not given in agents=...; given: {', '.join(by_name) or 'none'}.")
        rules = data.get("rules", [])
        if not isinstance(rules, list):
            raise ConfigError("The team graph's 'rules' is a list.")
        max_turns = data.get("max_turns", 20)
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            raise ConfigError(f"The team graph's 'max_turns' is a positive integer, got "
                              f"{max_turns!r}.")
        default = data.get("default_target")
        nested = data.get("nested", [])
        if not isinstance(nested, list) or any(n not in by_name for n in nested):
            raise ConfigError(f"The team graph's 'nested' lists agents given in agents=...; "
                              f"got {nested!r}, given: {', '.join(by_name) or 'none'}.")
        return cls(str(data.get("name") or ""), agents=[by_name[n] for n in names],
                   rules=[rule_from_dict(r, registry) for r in rules],
                   initial=data.get("initial"), max_turns=max_turns,
                   default_target=_NO_RULE if default is None
                   else target_from_dict(default, registry),
                   description=str(data.get("description", "")),
                   bounded=bool(data.get("bounded", False)),
                   nested=[by_name[n] for n in nested], **options)

    @classmethod
    def from_json(cls, text: str, **options: Any) -> Team:
        """``from_dict`` of JSON text."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"The team graph is not valid JSON: {exc}.") from None
        return cls.from_dict(data, **options)

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
                if isinstance(target, NestedChatTarget):
                    final = await self._nested_chat(driver, span, self.nested[target.agent])
                    target = target.then
                if isinstance(target, TerminateTarget):
                    return final, last_agent, target.reason
                if isinstance(target, AgentTarget):
                    nxt = self._member(target.agent)
                elif isinstance(target, RevertToInitiator):
                    nxt = self._member(self.initial)
                elif isinstance(target, Stay):
                    nxt = spoke
                elif isinstance(target, CustomTarget):
                    nxt = self._member(target.pick(TurnInfo(spoke.name, called,
                                                            driver.context)))
                else:
                    assert isinstance(target, RoundRobin)
                    nxt = self._member(target.next_after(spoke.name))
            driver.route(last_agent, nxt, why)
            speaker = nxt
        return final, last_agent, "max_turns"

    async def _nested_chat(self, driver: Driver, span: Span, agent: Agent[Any]) -> str:
        """Run ``agent`` as a delegated child on the conversation so far; its answer joins
        the conversation as one message from it."""
        transcript = driver.transcript
        said = [m for m in transcript if m.role in ("user", "assistant") and m.content]
        task = said[-1].content if said else ""
        result = await ChildPolicy().run(driver.context_for(self, span=span), agent, task,
                                       history=bounded_history(transcript[:-1]))
        if not result.ok:
            raise PatternStepFailed(self.name, f"nested chat {agent.name!r}",
                                    result.error or "no answer")
        driver.say(agent, result.output)
        return result.output
