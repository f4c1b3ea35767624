"""Routing rules for the hierarchical pattern: who speaks next in a `Team`, as plain data.

After each agent's turn, a `Team` evaluates its rules in priority order (lower first, ties in
list order); the first whose condition matches picks the next speaker. A tool may return a
typed `TransferTo(target, reason)` or `Finish(reason, summary)`, which takes precedence over the
rules; when several come back in one batch, the first emitted wins. Then the default target
and the turn limit apply. Before a team runs, `check_rules` rejects any cycle of the rule graph
from which no exit (a terminate target, or a conditional edge leaving the cycle) is reachable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agents.returns import Finish, TransferTo
from ..core.exceptions import ConfigError

__all__ = [
    "AgentTarget",
    "Always",
    "Condition",
    "ContextEquals",
    "Custom",
    "CustomTarget",
    "Finish",
    "FromSpeaker",
    "NestedChatTarget",
    "RevertToInitiator",
    "RoundRobin",
    "RoutingRegistry",
    "Rule",
    "Stay",
    "Target",
    "TerminateTarget",
    "ToolCalled",
    "TransferTo",
    "check_rules",
    "condition_from_dict",
    "condition_to_dict",
    "describe",
    "rule_from_dict",
    "rule_to_dict",
    "target_from_dict",
    "target_to_dict",
]


# -- conditions -------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class TurnInfo:
    """What a rule can look at: the turn that just ended."""

    speaker: str
    """The agent whose turn ended."""
    tools_called: frozenset[str]
    """The tools it called during the turn."""
    context: Any
    """The run context (a mapping for ``ContextEquals``)."""


@dataclass(slots=True, frozen=True)
class FromSpeaker:
    """Matches when ``agent`` just spoke."""

    agent: str
    """The speaker's name."""

    def matches(self, turn: TurnInfo) -> bool:
        """Whether the rule applies to ``turn``."""
        return turn.speaker == self.agent


@dataclass(slots=True, frozen=True)
class ToolCalled:
    """Matches when the speaker called the tool ``name`` during its turn."""

    name: str
    """The tool's name."""

    def matches(self, turn: TurnInfo) -> bool:
        """Whether the rule applies to ``turn``."""
        return self.name in turn.tools_called


@dataclass(slots=True, frozen=True)
class ContextEquals:
    """Matches when the run context holds ``value`` under ``key`` (a missing key is None)."""

    key: str
    """The context key."""
    value: Any
    """The value to compare with."""

    def matches(self, turn: TurnInfo) -> bool:
        """Whether the rule applies to ``turn``."""
        ctx = turn.context
        actual = ctx.get(self.key) if isinstance(ctx, Mapping) else getattr(ctx, self.key, None)
        return bool(actual == self.value)


@dataclass(slots=True, frozen=True)
class Always:
    """Always matches."""

    def matches(self, turn: TurnInfo) -> bool:
        """Whether the rule applies to ``turn``."""
        return True


@dataclass(slots=True, frozen=True)
class Custom:
    """A condition of your own: matches when ``test(turn)`` is true. It is saved by ``name``
    and found again by that name in a :class:`RoutingRegistry` when a graph is loaded."""

    name: str
    """The name it is registered and serialized under."""
    test: Callable[[TurnInfo], bool] = field(compare=False, repr=False)
    """Decides from the turn that just ended."""

    def matches(self, turn: TurnInfo) -> bool:
        """Whether the rule applies to ``turn``."""
        return bool(self.test(turn))


Condition = FromSpeaker | ToolCalled | ContextEquals | Always | Custom


# -- targets ----------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class AgentTarget:
    """The agent ``agent`` speaks next."""

    agent: str
    """The agent's name."""


@dataclass(slots=True, frozen=True)
class TerminateTarget:
    """The run ends, with ``reason``."""

    reason: str = "terminated"
    """Why, recorded in the run's last event."""


@dataclass(slots=True, frozen=True)
class RevertToInitiator:
    """The team's initial speaker speaks next."""


@dataclass(slots=True, frozen=True)
class Stay:
    """The same speaker goes on."""


@dataclass(slots=True, frozen=True)
class RoundRobin:
    """The next of ``agents`` after the speaker (cycling) speaks next."""

    agents: tuple[str, ...]
    """The rotation."""

    def __post_init__(self) -> None:
        if isinstance(self.agents, str) or not self.agents or not all(
                isinstance(a, str) for a in self.agents):
            raise ConfigError(f"RoundRobin needs a non-empty tuple of agent names, got "
                              f"{self.agents!r}.")

    def next_after(self, speaker: str) -> str:
        """Who follows ``speaker`` in the rotation."""
        if speaker in self.agents:
            return self.agents[(self.agents.index(speaker) + 1) % len(self.agents)]
        return self.agents[0]


@dataclass(slots=True, frozen=True)
class CustomTarget:
    """A target of your own: ``pick(turn)`` names the agent that speaks next. Saved by
    ``name`` (see :class:`RoutingRegistry`); ``agents`` lists where it may lead, for the static
    check (empty: any member)."""

    name: str
    """The name it is registered and serialized under."""
    pick: Callable[[TurnInfo], str] = field(compare=False, repr=False)
    """Names the next speaker from the turn that just ended."""
    agents: tuple[str, ...] = ()
    """The members it may pick (empty: any)."""


@dataclass(slots=True, frozen=True)
class NestedChatTarget:
    """AG2's nested chat: the agent named ``agent`` (a team, a workflow or any agent, given
    to the team's ``nested=``) runs as a delegated child, in a child session, on the
    conversation so far; its answer comes back as one message from it. Then ``then`` picks
    the next speaker, as if the member that led here had spoken (default: it goes on)."""

    agent: str
    """The nested agent's name (in the team's ``nested``)."""
    then: Target = Stay()
    """Who speaks after the nested chat: any target but another nested chat."""

    def __post_init__(self) -> None:
        if not isinstance(self.agent, str) or not self.agent:
            raise ConfigError(f"NestedChatTarget needs the nested agent's name, got "
                              f"{self.agent!r}.")
        if isinstance(self.then, NestedChatTarget):
            raise ConfigError(f"NestedChatTarget({self.agent!r}): 'then' names who speaks "
                              "after the nested chat; it cannot be another nested chat.")


Target = (AgentTarget | TerminateTarget | RevertToInitiator | Stay | RoundRobin | CustomTarget
          | NestedChatTarget)


class RoutingRegistry:
    """Named custom conditions and targets, so a routing graph that uses them can be saved as
    data (``Team.to_dict``) and loaded again (``Team.from_dict(..., registry=...)``).

    ``@registry.condition("vip")`` turns a function of the ``TurnInfo`` into a `Custom`
    condition; ``@registry.target("least_busy", agents=[...])`` one returning an agent name
    into a `CustomTarget`. A name is registered once.
    """

    def __init__(self) -> None:
        self.conditions: dict[str, Custom] = {}
        """Custom conditions by name."""
        self.targets: dict[str, CustomTarget] = {}
        """Custom targets by name."""

    def condition(self, name: str) -> Callable[[Callable[[TurnInfo], bool]], Custom]:
        """Register a condition under ``name`` (a decorator returning the `Custom`)."""
        def register(fn: Callable[[TurnInfo], bool]) -> Custom:
            self._free(name)
            made = self.conditions[name] = Custom(name, fn)
            return made
        return register

    def target(self, name: str, *, agents: Sequence[str] = ()
               ) -> Callable[[Callable[[TurnInfo], str]], CustomTarget]:
        """Register a target under ``name`` (a decorator returning the `CustomTarget`)."""
        def register(fn: Callable[[TurnInfo], str]) -> CustomTarget:
            self._free(name)
            made = self.targets[name] = CustomTarget(name, fn, tuple(agents))
            return made
        return register

    def _free(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"A custom condition or target needs a non-empty name, got "
                              f"{name!r}.")
        if name in self.conditions or name in self.targets:
            raise ConfigError(f"The routing registry already has {name!r}; give each custom "
                              "condition and target its own name.")

    def find(self, kind: str, name: Any) -> Custom | CustomTarget:
        """The registered condition (``kind="condition"``) or target named ``name``."""
        found: Mapping[str, Custom | CustomTarget] = (
            self.conditions if kind == "condition" else self.targets)
        if not isinstance(name, str) or name not in found:
            known = ", ".join(sorted(found)) or "none"
            raise ConfigError(f"The graph names a custom {kind} {name!r} that the registry "
                              f"does not have; registered {kind}s: {known}. Register it with "
                              f"@registry.{kind}({name!r}).")
        return found[name]


@dataclass(slots=True, frozen=True)
class Rule:
    """When ``condition`` matches after a turn, ``target`` decides who speaks next."""

    condition: Condition
    """What must hold."""
    target: Target
    """Where control goes."""
    priority: int = 0
    """Lower runs first; ties keep list order."""


# -- plain-data form (YAML) -------------------------------------------------------------------

_CONDITIONS: dict[str, tuple[type[Any], str | None]] = {
    "from_speaker": (FromSpeaker, "agent"), "tool_called": (ToolCalled, "name"),
    "always": (Always, None),
}


def _one_key(data: Mapping[str, Any], what: str, valid: Sequence[str]) -> tuple[str, Any]:
    if not isinstance(data, Mapping) or len(data) != 1:
        raise ConfigError(f"A rule's {what} must be a mapping with one key, one of: "
                          f"{', '.join(valid)}; got {data!r}.")
    key, value = next(iter(data.items()))
    if key not in valid:
        raise ConfigError(f"Unknown rule {what} {key!r}; valid: {', '.join(valid)}.")
    return str(key), value


def condition_from_dict(data: Mapping[str, Any],
                        registry: RoutingRegistry | None = None) -> Condition:
    """``{"from_speaker": "a"}``, ``{"tool_called": "t"}``, ``{"context_equals": {k: v}}``,
    ``{"always": true}``, or ``{"custom": name}`` from ``registry``."""
    key, value = _one_key(data, "condition", [*_CONDITIONS, "context_equals", "custom"])
    if key == "custom":
        found = (registry or RoutingRegistry()).find("condition", value)
        assert isinstance(found, Custom)
        return found
    if key == "context_equals":
        if not isinstance(value, Mapping) or len(value) != 1:
            raise ConfigError("context_equals takes one {key: value} pair.")
        k, v = next(iter(value.items()))
        return ContextEquals(str(k), v)
    cls, arg = _CONDITIONS[key]
    return cls() if arg is None else cls(str(value))  # type: ignore[no-any-return]


def target_from_dict(data: Mapping[str, Any], registry: RoutingRegistry | None = None) -> Target:
    """``{"agent": "a"}``, ``{"terminate": "reason"}``, ``{"revert_to_initiator": true}``,
    ``{"stay": true}``, ``{"round_robin": ["a", "b"]}``, ``{"custom": name}`` from
    ``registry``, or ``{"nested_chat": {"agent": name, "then": <target>}}``."""
    key, value = _one_key(data, "target", ["agent", "terminate", "revert_to_initiator", "stay",
                                           "round_robin", "custom", "nested_chat"])
    if key == "nested_chat":
        if not isinstance(value, Mapping) or "agent" not in value or \
                set(value) - {"agent", "then"}:
            raise ConfigError(f"nested_chat takes {{agent: <name>, then: <target>}} (then "
                              f"optional, default stay); got {value!r}.")
        then = value.get("then")
        return NestedChatTarget(str(value["agent"]), Stay() if then is None
                                else target_from_dict(then, registry))
    if key == "custom":
        found = (registry or RoutingRegistry()).find("target", value)
        assert isinstance(found, CustomTarget)
        return found
    if key == "agent":
        return AgentTarget(str(value))
    if key == "terminate":
        return TerminateTarget(str(value or "terminated"))
    if key == "round_robin":
        if not isinstance(value, list) or not value:
            raise ConfigError("round_robin takes a non-empty list of agent names.")
        return RoundRobin(tuple(str(v) for v in value))
    return RevertToInitiator() if key == "revert_to_initiator" else Stay()


def rule_from_dict(data: Mapping[str, Any], registry: RoutingRegistry | None = None) -> Rule:
    """A rule from ``{"when": <condition>, "then": <target>, "priority": 0}``."""
    unknown = set(data) - {"when", "then", "priority"}
    if unknown or "when" not in data or "then" not in data:
        raise ConfigError(f"A rule needs 'when' and 'then' (and may have 'priority'); got keys "
                          f"{sorted(data)}.")
    priority = data.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ConfigError(f"A rule's priority must be an integer, got {priority!r}.")
    return Rule(condition_from_dict(data["when"], registry),
                target_from_dict(data["then"], registry), priority)


def describe(item: Condition | Target) -> str:
    """A short human form of a condition or target, for logs and notes."""
    if isinstance(item, FromSpeaker):
        return f"FromSpeaker({item.agent})"
    if isinstance(item, ToolCalled):
        return f"ToolCalled({item.name})"
    if isinstance(item, ContextEquals):
        return f"ContextEquals({item.key}={item.value!r})"
    if isinstance(item, AgentTarget):
        return item.agent
    if isinstance(item, TerminateTarget):
        return f"terminate ({item.reason})"
    if isinstance(item, RoundRobin):
        return f"RoundRobin({', '.join(item.agents)})"
    if isinstance(item, Custom | CustomTarget):
        return f"{type(item).__name__}({item.name})"
    if isinstance(item, NestedChatTarget):
        return f"NestedChat({item.agent}, then {describe(item.then)})"
    return type(item).__name__


def condition_to_dict(c: Condition) -> dict[str, Any]:
    """The plain-data form of a condition (inverse of :func:`condition_from_dict`)."""
    return (
        {"from_speaker": c.agent} if isinstance(c, FromSpeaker)
        else {"tool_called": c.name} if isinstance(c, ToolCalled)
        else {"context_equals": {c.key: c.value}} if isinstance(c, ContextEquals)
        else {"custom": c.name} if isinstance(c, Custom)
        else {"always": True}
    )


def target_to_dict(t: Target) -> dict[str, Any]:
    """The plain-data form of a target (inverse of :func:`target_from_dict`)."""
    return (
        {"agent": t.agent} if isinstance(t, AgentTarget)
        else {"terminate": t.reason} if isinstance(t, TerminateTarget)
        else {"round_robin": list(t.agents)} if isinstance(t, RoundRobin)
        else {"custom": t.name} if isinstance(t, CustomTarget)
        else {"nested_chat": {"agent": t.agent, "then": target_to_dict(t.then)}}
        if isinstance(t, NestedChatTarget)
        else {"revert_to_initiator": True} if isinstance(t, RevertToInitiator)
        else {"stay": True}
    )


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    """The plain-data form of ``rule`` (inverse of :func:`rule_from_dict`)."""
    return {"when": condition_to_dict(rule.condition), "then": target_to_dict(rule.target),
            "priority": rule.priority}


# -- the static check -------------------------------------------------------------------------

_EXIT = "<terminate>"


@dataclass(slots=True)
class RuleGraph:
    """Possible next speakers of each agent: certain edges and conditional ones."""

    certain: dict[str, set[str]] = field(default_factory=dict)
    conditional: dict[str, set[str]] = field(default_factory=dict)


def _targets(target: Target, speaker: str, initial: str, agents: Sequence[str]) -> set[str]:
    if isinstance(target, NestedChatTarget):  # its agent is no member: who speaks after it
        return _targets(target.then, speaker, initial, agents)
    if isinstance(target, AgentTarget):
        return {target.agent}
    if isinstance(target, TerminateTarget):
        return {_EXIT}
    if isinstance(target, RevertToInitiator):
        return {initial}
    if isinstance(target, Stay):
        return {speaker}
    if isinstance(target, CustomTarget):
        return set(target.agents or agents)
    return {target.next_after(speaker)}


def rule_graph(agents: Sequence[str], rules: Sequence[Rule], initial: str,
               default: Target, dynamic: Mapping[str, set[str]]) -> RuleGraph:
    """Where control can go after each agent's turn; ``dynamic`` adds typed-return edges."""
    ordered = sorted(enumerate(rules), key=lambda ir: (ir[1].priority, ir[0]))
    graph = RuleGraph()
    for a in agents:
        certain: set[str] = set()
        conditional = set(dynamic.get(a, ()))
        for _, rule in ordered:
            cond = rule.condition
            if isinstance(cond, FromSpeaker) and cond.agent != a:
                continue
            nxt = _targets(rule.target, a, initial, agents)
            if isinstance(cond, FromSpeaker | Always):
                certain = nxt
                break
            conditional |= nxt
        else:
            certain = _targets(default, a, initial, agents)
        graph.certain[a] = certain
        graph.conditional[a] = conditional
    return graph


def check_rules(agents: Sequence[str], rules: Sequence[Rule], initial: str, default: Target,
                dynamic: Mapping[str, set[str]] | None = None, *, bounded: bool = False) -> None:
    """Reject unknown agent names and rule cycles with no reachable exit (unless ``bounded``:
    a graph only ``max_turns`` ends, such as a round robin)."""
    known = set(agents)
    names = [initial]
    for r in rules:
        if isinstance(r.condition, FromSpeaker):
            names.append(r.condition.agent)
    for t in [default, *(r.target for r in rules)]:
        if isinstance(t, NestedChatTarget):
            t = t.then
        if isinstance(t, AgentTarget):
            names.append(t.agent)
        elif isinstance(t, RoundRobin | CustomTarget):
            names.extend(t.agents)
    for n in names:
        if n not in known:
            raise ConfigError(f"Routing names an unknown agent {n!r}; team agents: "
                              f"{', '.join(agents)}.")
    if bounded:
        return
    graph = rule_graph(agents, rules, initial, default, dynamic or {})
    # Walk the graph backwards from the exit: every agent must be able to reach it.
    edges = {a: graph.certain[a] | graph.conditional[a] for a in agents}
    escapes = {_EXIT}
    changed = True
    while changed:
        changed = False
        for a in agents:
            if a not in escapes and edges[a] & escapes:
                escapes.add(a)
                changed = True
    stuck = [a for a in agents if a not in escapes]
    if stuck:
        cycle = _cycle_from(stuck[0], edges)
        raise ConfigError(
            "Routing cycle with no exit: " + " -> ".join(cycle) + ". Add a TerminateTarget, "
            "or a conditional rule (ToolCalled, ContextEquals) that leads out of the cycle. "
            "To go round on purpose until the team's max_turns ends the run, build it with "
            "Team.round_robin(...) or pass bounded=True (bounded: true in YAML)."
        )


def _cycle_from(start: str, edges: Mapping[str, set[str]]) -> list[str]:
    """A cycle reached from ``start``, where no agent can reach the exit."""
    path = [start]
    while True:
        nxt = sorted(edges[path[-1]])[0]
        if nxt in path:
            return path[path.index(nxt):] + [nxt]
        path.append(nxt)

