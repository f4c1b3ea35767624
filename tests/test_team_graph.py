"""A team's routing graph as data (to_dict / from_dict, a registry for custom conditions and
targets), round robin bounded by max_turns, and a team that goes on after its turn limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relayrace import Agent, ConfigError, HandoffEvent, Runner
from relayrace.sessions import SQLiteSession
from relayrace.teams.routing import (
    AgentTarget,
    Always,
    ContextEquals,
    FromSpeaker,
    RevertToInitiator,
    RoundRobin,
    RoutingRegistry,
    Rule,
    Stay,
    TerminateTarget,
    ToolCalled,
    TurnInfo,
)
from relayrace.teams.team import GRAPH_FORMAT, Team
from relayrace.testing import ScriptedModel, text

NAMES = ["a", "b", "c"]


def members(model: ScriptedModel) -> list[Agent[Any]]:
    return [Agent(n, instructions=f"You are {n}.", model=model) for n in NAMES]


def test_a_graph_round_trips_through_json_with_custom_conditions_and_targets() -> None:
    registry = RoutingRegistry()

    @registry.condition("urgent")
    def urgent(turn: TurnInfo) -> bool:
        return bool(turn.context and turn.context.get("urgent"))

    @registry.target("least_busy", agents=["b", "c"])
    def least_busy(turn: TurnInfo) -> str:
        return "c"

    agents = members(ScriptedModel())
    team = Team("desk", agents=agents, description="A desk.", max_turns=7, rules=[
        Rule(urgent, AgentTarget("c"), priority=-1),
        Rule(FromSpeaker("a"), least_busy),
        Rule(ToolCalled("escalate"), RevertToInitiator()),
        Rule(ContextEquals("tier", "gold"), Stay()),
        Rule(FromSpeaker("b"), TerminateTarget("b answered")),
        Rule(FromSpeaker("c"), AgentTarget("b")),
    ])
    data = json.loads(team.to_json())
    assert data["format"] == GRAPH_FORMAT
    assert data["rules"][0] == {"when": {"custom": "urgent"}, "then": {"agent": "c"},
                                "priority": -1}
    # Loaded as a new process would: fresh member objects, found by name.
    again = Team.from_json(json.dumps(data), agents=members(ScriptedModel()), registry=registry)
    assert again.to_dict() == data
    assert again.rules == team.rules and again.rules[1].target is least_busy


async def test_a_loaded_graph_routes_like_the_original() -> None:
    registry = RoutingRegistry()

    @registry.target("to_c")
    def to_c(turn: TurnInfo) -> str:
        return "c"

    def build(model: ScriptedModel, data: dict[str, Any] | None) -> Team:
        agents = members(model)
        if data is not None:
            return Team.from_dict(data, agents=agents, registry=registry)
        return Team("t", agents=agents, rules=[Rule(FromSpeaker("a"), to_c),
                                               Rule(FromSpeaker("c"), TerminateTarget("done"))])

    original = build(ScriptedModel([text("1"), text("2")]), None)
    runs = []
    for data in (None, original.to_dict()):
        model = ScriptedModel([text("1"), text("2")])
        result = await Runner.run(build(model, data), "go")
        runs.append(([r.agent for r in model.requests], result.reason))
    assert runs[0] == runs[1] == (["a", "c"], "done")


@pytest.mark.parametrize(("change", "expected"), [
    ({"format": "relayrace.teams.team/9"}, "format 'relayrace.teams.team/9'"),
    ({"colour": "red"}, "Unknown keys in the team graph: colour"),
    ({"agents": ["a", "zed"]}, "members 'zed' not given"),
    ({"rules": [{"when": {"custom": "nope"}, "then": {"agent": "a"}}]},
     "custom condition 'nope' that the registry does not have; registered conditions: none"),
    ({"default_target": {"custom": "gone"}}, "custom target 'gone'"),
    ({"rules": [{"when": {"always": True}}]}, "A rule needs 'when' and 'then'"),
    ({"max_turns": 0}, "'max_turns' is a positive integer"),
    ({"rules": [{"when": {"from_speaker": "a"}, "then": {"agent": "b"}, "priority": True}]},
     "priority must be an integer"),
])
def test_a_malformed_graph_is_a_clear_error(change: dict[str, Any], expected: str) -> None:
    team = Team("t", agents=members(ScriptedModel()), default_target=TerminateTarget("x"))
    data = {**team.to_dict(), **change}
    with pytest.raises(ConfigError) as info:
        Team.from_dict(data, agents=members(ScriptedModel()))
    assert expected in str(info.value)


def test_a_registry_name_is_given_once() -> None:
    registry = RoutingRegistry()
    registry.condition("x")(lambda turn: True)
    with pytest.raises(ConfigError, match="already has 'x'"):
        registry.target("x")(lambda turn: "a")


_conditions = st.one_of(
    st.sampled_from(NAMES).map(FromSpeaker), st.sampled_from(["t1", "t2"]).map(ToolCalled),
    st.builds(ContextEquals, st.sampled_from(["k"]), st.integers(0, 3)), st.just(Always()))
_targets = st.one_of(
    st.sampled_from(NAMES).map(AgentTarget), st.text(min_size=1, max_size=8).map(TerminateTarget),
    st.just(RevertToInitiator()), st.just(Stay()),
    st.permutations(NAMES).map(lambda p: RoundRobin(tuple(p))))


@settings(max_examples=80, deadline=None)
@given(rules=st.lists(st.builds(Rule, _conditions, _targets, st.integers(-3, 3)), max_size=6),
       default=_targets, initial=st.sampled_from(NAMES), turns=st.integers(1, 30))
def test_any_graph_round_trips(rules: list[Rule], default: Any, initial: str,
                               turns: int) -> None:
    try:
        team = Team("t", agents=members(ScriptedModel()), rules=rules, default_target=default,
                    initial=initial, max_turns=turns)
    except ConfigError:  # a cycle with no exit: bounded graphs say so explicitly
        team = Team("t", agents=members(ScriptedModel()), rules=rules, default_target=default,
                    initial=initial, max_turns=turns, bounded=True)
    again = Team.from_dict(json.loads(team.to_json()), agents=members(ScriptedModel()))
    assert (again.rules, again.default_target, again.initial, again.team_turns,
            again.bounded) == (team.rules, team.default_target, team.initial, team.team_turns,
                               team.bounded)


# --------------------------------------------------------------------------- round robin


def test_a_cycle_with_no_exit_is_still_refused_unless_bounded() -> None:
    with pytest.raises(ConfigError, match="Routing cycle with no exit") as refused:
        Team("t", agents=members(ScriptedModel()), default_target=RoundRobin(("a", "b", "c")))
    # The error names both ways to go round on purpose.
    assert "Team.round_robin(...)" in str(refused.value)
    assert "bounded=True" in str(refused.value)


async def test_round_robin_is_bounded_by_max_turns_only() -> None:
    model = ScriptedModel([text(str(i)) for i in range(5)])
    team = Team.round_robin("circle", members(model), max_turns=5)
    result = await Runner.run(team, "go")
    assert [r.agent for r in model.requests] == ["a", "b", "c", "a", "b"]
    assert result.reason == "max_turns" and result.final_output == "4"
    assert Team.from_dict(team.to_dict(), agents=members(model)).bounded


async def test_a_team_resumed_after_its_turn_limit_goes_on_with_the_next_speaker(
        tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    model = ScriptedModel([text(str(i)) for i in range(6)])
    first = await Runner.run(Team.round_robin("circle", members(model), max_turns=4), "go",
                             session=SQLiteSession("s", db))
    assert first.reason == "max_turns"
    # A new process: a fresh team object and a fresh session object on the same file.
    again = Team.round_robin("circle", members(model), max_turns=2)
    result = await Runner.run(again, None, session=SQLiteSession("s", db))
    assert [r.agent for r in model.requests] == ["a", "b", "c", "a", "b", "c"]
    assert result.final_output == "5"
    routes = [e for e in await SQLiteSession("s", db).get_events() if isinstance(e, HandoffEvent)]
    assert [r.to_agent for r in routes][-2:] == ["c", "a"]  # the position, in the log


def test_a_bounded_round_robin_team_loads_from_yaml(tmp_path: Path) -> None:
    from relayrace.config import load_team

    agent = ("apiVersion: relayrace/v1\nkind: Agent\nmetadata: {{name: {n}}}\n"
             "spec:\n  prompts: {{system: hi}}\n")
    for n in NAMES:
        (tmp_path / f"{n}.yaml").write_text(agent.format(n=n))
    team = ("apiVersion: relayrace/v1\nkind: Team\nmetadata: {name: circle}\nspec:\n"
            "  agents: [a, b, c]\n  default_target: {round_robin: [a, b, c]}\n  max_turns: 6\n")
    (tmp_path / "team.yaml").write_text(team)
    with pytest.raises(ConfigError, match="Routing cycle with no exit"):
        load_team(tmp_path)
    (tmp_path / "team.yaml").write_text(team + "  bounded: true\n")
    loaded = load_team(tmp_path)["circle"]
    assert isinstance(loaded, Team) and loaded.bounded and loaded.team_turns == 6
