"""`Team`: routing rules, typed TransferTo and Finish returns, defaults, limits, static checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import assert_valid_protocol, session_messages, speakers
from relayrace import Agent, ConfigError, HandoffEvent, RunContext, Runner, tool
from relayrace.teams.patterns import swarm, transfer_tool
from relayrace.teams.routing import (
    AgentTarget,
    Always,
    ContextEquals,
    Finish,
    FromSpeaker,
    RevertToInitiator,
    RoundRobin,
    Rule,
    Stay,
    TerminateTarget,
    ToolCalled,
    rule_from_dict,
    rule_to_dict,
)
from relayrace.teams.team import Team
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


@tool
def publish() -> str:
    """Publish the draft."""
    return "published"


@tool
def reject() -> str:
    """Reject the draft."""
    return "rejected"


@tool
def more() -> str:
    """Ask for another turn."""
    return "ok"


@tool
def stop() -> str:
    """Stop."""
    return "stopping"


@tool
def approve() -> Finish:
    """Approve and finish."""
    return Finish("approved", "APPROVED-SUMMARY")


def members(model: Any, **tools: list[Any]) -> list[Agent]:
    return [Agent(name, instructions=f"You are {name}.", model=model, tools=tools.get(name, []))
            for name in ("writer", "reviewer", "editor")]


# --------------------------------------------------------------------------- conditions


async def test_from_speaker_rules_route_and_terminate_with_a_reason() -> None:
    model = ScriptedModel(by_agent={"writer": [text("draft v1")], "reviewer": [text("looks good")]})
    team = Team("t", agents=members(model)[:2], rules=[
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), TerminateTarget("reviewed")),
    ])
    result = await Runner.run(team, "write")
    assert speakers(model) == ["writer", "reviewer"]
    assert result.reason == "reviewed"
    assert result.final_output == "looks good"
    assert result.last_agent.name == "reviewer"
    # The reviewer sees the writer's draft in the shared conversation.
    assert "draft v1" in [m.content for m in model.requests[1].messages]
    assert [(h.agent, h.to_agent) for h in result.handoffs] == [("writer", "reviewer")]
    assert_valid_protocol(await session_messages(result.session))


async def test_tool_called_rule() -> None:
    model = ScriptedModel(by_agent={"writer": [tool_call("publish"), text("published it")],
                                    "reviewer": []})
    team = Team("t", agents=members(model, writer=[publish])[:2], rules=[
        Rule(ToolCalled("publish"), TerminateTarget("published")),
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), TerminateTarget("reviewed")),
    ])
    result = await Runner.run(team, "write")
    assert speakers(model) == ["writer", "writer"]
    assert result.reason == "published"


async def test_tool_called_only_counts_the_current_turn() -> None:
    model = ScriptedModel(by_agent={"writer": [tool_call("publish"), text("w1"), text("w2")],
                                    "reviewer": [text("r1")]})
    team = Team("t", agents=members(model, writer=[publish])[:2], rules=[
        Rule(FromSpeaker("reviewer"), AgentTarget("writer")),
        Rule(ToolCalled("publish"), AgentTarget("reviewer")),
        Rule(FromSpeaker("writer"), TerminateTarget("writer done")),
    ])
    result = await Runner.run(team, "write")
    # writer published -> reviewer -> writer (no publish this turn) -> terminate.
    assert speakers(model) == ["writer", "writer", "reviewer", "writer"]
    assert result.reason == "writer done"


@pytest.mark.parametrize(("mode", "expected"), [("fast", ["writer"]),
                                                ("careful", ["writer", "reviewer"])])
async def test_context_equals_rule(mode: str, expected: list[str]) -> None:
    model = ScriptedModel(by_agent={"writer": [text("draft")], "reviewer": [text("ok")]})
    team = Team("t", agents=members(model)[:2], rules=[
        Rule(ContextEquals("mode", "fast"), TerminateTarget("fast path")),
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), TerminateTarget("reviewed")),
    ])
    result = await Runner.run(team, "write", context={"mode": mode})
    assert speakers(model) == expected
    assert result.reason == ("fast path" if mode == "fast" else "reviewed")


async def test_context_equals_sees_changes_made_by_tools() -> None:
    @tool
    def set_done(ctx: RunContext[dict[str, Any]]) -> str:
        """Mark the work done."""
        ctx.context["done"] = True
        return "marked"

    model = ScriptedModel(by_agent={"writer": [text("w1"), tool_call("set_done"), text("w2")],
                                    "reviewer": [text("r1")]})
    team = Team("t", agents=members(model, writer=[set_done])[:2], rules=[
        Rule(ContextEquals("done", True), TerminateTarget("done")),
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), AgentTarget("writer")),
    ])
    result = await Runner.run(team, "write", context={"done": False})
    assert speakers(model) == ["writer", "reviewer", "writer", "writer"]
    assert result.reason == "done"


async def test_priority_orders_rules_before_list_order() -> None:
    def build(low: int, high: int) -> tuple[Team, FunctionModel]:
        model = ScriptedModel(by_agent={"writer": [text("draft")], "reviewer": [text("ok")]})
        team = Team("t", agents=members(model)[:2], rules=[
            Rule(Always(), TerminateTarget("always"), priority=low),
            Rule(FromSpeaker("writer"), AgentTarget("reviewer"), priority=high),
            Rule(FromSpeaker("reviewer"), TerminateTarget("reviewed"), priority=high),
        ])
        return team, model

    team, model = build(low=5, high=0)
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "reviewer"] and result.reason == "reviewed"
    team, model = build(low=0, high=5)
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer"] and result.reason == "always"
    # Equal priorities keep list order.
    team, model = build(low=1, high=1)
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer"] and result.reason == "always"


# --------------------------------------------------------------------------- targets


async def test_round_robin_rotates_until_the_turn_limit() -> None:
    model = FunctionModel(lambda req: text(f"{req.agent} speaks"))
    team = Team("t", agents=members(model), max_turns=5, rules=[
        Rule(ToolCalled("stop"), TerminateTarget("stopped")),
        Rule(Always(), RoundRobin(("writer", "reviewer", "editor"))),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "reviewer", "editor", "writer", "reviewer"]
    assert result.reason == "max_turns"
    assert result.final_output == "reviewer speaks"


async def test_stay_lets_the_speaker_go_on() -> None:
    model = ScriptedModel(by_agent={"writer": [tool_call("more"), text("part 1"), text("part 2")],
                                    "reviewer": []})
    team = Team("t", agents=members(model, writer=[more])[:2], rules=[
        Rule(ToolCalled("more"), Stay()),
        Rule(FromSpeaker("writer"), TerminateTarget("written")),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "writer", "writer"]
    assert result.reason == "written" and result.final_output == "part 2"


async def test_revert_to_initiator() -> None:
    model = ScriptedModel(by_agent={
        "writer": [text("draft 1"), text("draft 2")],
        "reviewer": [tool_call("reject"), text("try again"), text("fine")],
    })
    team = Team("t", agents=members(model, reviewer=[reject])[:2], rules=[
        Rule(ToolCalled("reject"), RevertToInitiator()),
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), TerminateTarget("accepted")),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "reviewer", "reviewer", "writer", "reviewer"]
    assert result.reason == "accepted"


async def test_initial_speaker_can_be_chosen() -> None:
    model = ScriptedModel(by_agent={"reviewer": [text("r")]})
    team = Team("t", agents=members(model)[:2], initial="reviewer",
                rules=[Rule(FromSpeaker("reviewer"), TerminateTarget("done"))])
    await Runner.run(team, "go")
    assert speakers(model) == ["reviewer"]


async def test_default_target_applies_when_no_rule_matches() -> None:
    model = ScriptedModel(by_agent={"writer": [text("w")], "reviewer": [text("r")]})
    team = Team("t", agents=members(model)[:2], default_target=AgentTarget("reviewer"),
                rules=[Rule(FromSpeaker("reviewer"), TerminateTarget("reviewed"))])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "reviewer"]
    assert result.reason == "reviewed"


async def test_the_default_default_terminates() -> None:
    model = ScriptedModel(by_agent={"writer": [text("w")]})
    team = Team("t", agents=members(model)[:2])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer"]
    assert result.reason == "no rule matched"
    assert result.final_output == "w"


async def test_turn_limit_applies_last() -> None:
    model = FunctionModel(lambda req: text(f"{req.agent} speaks"))
    team = Team("t", agents=members(model)[:2], max_turns=3, rules=[
        Rule(ToolCalled("stop"), TerminateTarget("stopped")),
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), AgentTarget("writer")),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "reviewer", "writer"]
    assert result.reason == "max_turns"


# --------------------------------------------------------------------------- typed returns


async def test_typed_handoff_takes_precedence_over_rules() -> None:
    model = ScriptedModel(by_agent={
        "writer": [tool_call("transfer_to_editor", {"reason": "fix grammar"})],
        "editor": [text("edited")], "reviewer": [],
    })
    team = Team("t", agents=members(model, writer=[transfer_tool("editor")]), rules=[
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("editor"), TerminateTarget("edited")),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "editor"]
    assert result.reason == "edited"
    editor_view = "\n".join(m.content for m in model.requests[1].messages)
    assert "fix grammar" in editor_view
    assert_valid_protocol(await session_messages(result.session))


async def test_first_typed_handoff_in_a_batch_wins() -> None:
    model = ScriptedModel(by_agent={
        "writer": [[tool_call("transfer_to_reviewer", {"reason": "r"}),
                    tool_call("transfer_to_editor", {"reason": "e"})]],
        "reviewer": [text("reviewed")], "editor": [],
    })
    tools = [transfer_tool("editor"), transfer_tool("reviewer")]
    team = Team("t", agents=members(model, writer=tools), rules=[
        Rule(FromSpeaker("writer"), AgentTarget("editor")),
        Rule(FromSpeaker("reviewer"), TerminateTarget("done")),
        Rule(FromSpeaker("editor"), TerminateTarget("done")),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "reviewer"]
    losing = [r for r in result.tool_results if r.tool_name == "transfer_to_editor"]
    assert len(losing) == 1 and losing[0].is_error
    assert_valid_protocol(await session_messages(result.session))


async def test_typed_finish_ends_the_run_with_its_reason_and_summary() -> None:
    model = ScriptedModel(by_agent={"writer": [text("draft")], "reviewer": [tool_call("approve")]})
    team = Team("t", agents=members(model, reviewer=[approve])[:2], rules=[
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), AgentTarget("writer")),
        Rule(ToolCalled("approve"), TerminateTarget("rule, not the tool"), priority=-1),
    ])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["writer", "reviewer"]
    assert result.reason == "approved"
    assert result.final_output == "APPROVED-SUMMARY"


async def test_handoff_events_record_each_change_of_speaker() -> None:
    model = ScriptedModel(by_agent={
        "writer": [text("w")], "reviewer": [text("r")], "editor": [text("e")]})
    team = Team("t", agents=members(model), rules=[
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), AgentTarget("editor")),
        Rule(FromSpeaker("editor"), TerminateTarget("done")),
    ])
    result = await Runner.run(team, "go")
    assert [(h.agent, h.to_agent) for h in result.handoffs] == [("writer", "reviewer"),
                                                                ("reviewer", "editor")]
    assert all(isinstance(h, HandoffEvent) for h in result.handoffs)


# --------------------------------------------------------------------------- plain data


ALL_RULES = [
    Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
    Rule(ToolCalled("publish"), TerminateTarget("published"), priority=-2),
    Rule(ContextEquals("mode", "fast"), RevertToInitiator(), priority=3),
    Rule(ContextEquals("count", 3), Stay()),
    Rule(Always(), RoundRobin(("writer", "reviewer", "editor")), priority=10),
    Rule(Always(), TerminateTarget()),
]


@pytest.mark.parametrize("rule", ALL_RULES, ids=repr)
def test_rules_round_trip_through_plain_data(rule: Rule) -> None:
    data = rule_to_dict(rule)
    assert json.loads(json.dumps(data)) == data  # plain, JSON-ready data
    assert rule_from_dict(data) == rule
    assert rule_from_dict(json.loads(json.dumps(data))) == rule


@pytest.mark.parametrize("data", [
    {"when": {"from_speaker": "a"}},
    {"when": {"telepathy": "a"}, "then": {"agent": "b"}},
    {"when": {"always": True}, "then": {"teleport": "b"}},
    {"when": {"always": True}, "then": {"agent": "b"}, "priority": "high"},
    {"when": {"always": True}, "then": {"round_robin": []}},
])
def test_bad_rule_data_is_a_config_error(data: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        rule_from_dict(data)


# --------------------------------------------------------------------------- the static check


def names(*agents: str, model: Any = None) -> list[Agent]:
    return [Agent(a, instructions="x", model=model) for a in agents]


def test_a_cycle_without_exit_is_rejected_and_named() -> None:
    with pytest.raises(ConfigError) as info:
        Team("t", agents=names("a", "b"), rules=[
            Rule(FromSpeaker("a"), AgentTarget("b")),
            Rule(FromSpeaker("b"), AgentTarget("a")),
        ])
    message = str(info.value)
    assert "cycle" in message.lower()
    assert "a -> b" in message or "b -> a" in message


def test_an_always_round_robin_without_exit_is_rejected() -> None:
    with pytest.raises(ConfigError, match="(?i)cycle"):
        Team("t", agents=names("a", "b", "c"),
             rules=[Rule(Always(), RoundRobin(("a", "b", "c")))])


def test_a_stay_without_exit_is_rejected() -> None:
    with pytest.raises(ConfigError, match="(?i)cycle"):
        Team("t", agents=names("a", "b"), rules=[Rule(FromSpeaker("a"), Stay())])


async def test_a_cycle_with_a_conditional_exit_is_accepted_and_the_exit_is_taken() -> None:
    model = ScriptedModel(by_agent={"a": [text("a speaks")],
                                    "b": [tool_call("stop"), text("b is done")]})
    team = Team("t", agents=[Agent("a", instructions="x", model=model),
                             Agent("b", instructions="x", model=model, tools=[stop])], rules=[
        Rule(ToolCalled("stop"), TerminateTarget("stopped"), priority=-1),
        Rule(FromSpeaker("a"), AgentTarget("b")),
        Rule(FromSpeaker("b"), AgentTarget("a")),
    ])
    result = await Runner.run(team, "go")
    assert result.reason == "stopped"
    assert speakers(model) == ["a", "b", "b"]


async def test_a_cycle_left_by_a_context_value_is_accepted_and_the_exit_is_taken() -> None:
    @tool
    async def finish_up(ctx: RunContext[dict[str, Any]]) -> str:
        """Mark the work done."""
        ctx.context["done"] = True
        return "marked"

    model = ScriptedModel(by_agent={"a": [text("a1")],
                                    "b": [tool_call("finish_up"), text("b done")]})
    team = Team("t", agents=[Agent("a", instructions="x", model=model),
                             Agent("b", instructions="x", model=model, tools=[finish_up])],
                rules=[
        Rule(ContextEquals("done", True), TerminateTarget("done"), priority=-1),
        Rule(FromSpeaker("a"), AgentTarget("b")),
        Rule(FromSpeaker("b"), AgentTarget("a")),
    ])
    result = await Runner.run(team, "go", context={"done": False})
    assert result.reason == "done"
    assert speakers(model) == ["a", "b", "b"]


async def test_a_cycle_with_a_typed_route_out_is_accepted_and_the_route_is_taken() -> None:
    model = ScriptedModel(by_agent={"a": [tool_call("transfer_to_c")], "c": [text("c closes")]})
    a = Agent("a", instructions="x", model=model, tools=[transfer_tool("c")])
    team = Team("t", agents=[a, *names("b", "c", model=model)], rules=[
        Rule(FromSpeaker("a"), AgentTarget("b")),
        Rule(FromSpeaker("b"), AgentTarget("a")),
        Rule(FromSpeaker("c"), TerminateTarget("done")),
    ])
    result = await Runner.run(team, "go")
    assert result.reason == "done" and result.final_output == "c closes"
    assert speakers(model) == ["a", "c"]  # the typed TransferTo beat the a -> b rule
    model.assert_complete()


def test_a_conditional_rule_shadowed_by_an_earlier_certain_rule_is_no_exit() -> None:
    with pytest.raises(ConfigError, match="(?i)cycle"):
        Team("t", agents=names("a", "b"), rules=[
            Rule(FromSpeaker("a"), AgentTarget("b")),
            Rule(FromSpeaker("b"), AgentTarget("a")),
            Rule(ToolCalled("stop"), TerminateTarget("stopped"), priority=5),
        ])


def test_a_conditional_edge_that_stays_in_the_cycle_is_no_exit() -> None:
    with pytest.raises(ConfigError, match="(?i)cycle"):
        Team("t", agents=names("a", "b"), rules=[
            Rule(ToolCalled("swap"), AgentTarget("b"), priority=-1),
            Rule(FromSpeaker("a"), AgentTarget("b")),
            Rule(FromSpeaker("b"), AgentTarget("a")),
        ])


def test_unknown_agents_in_rules_are_rejected() -> None:
    with pytest.raises(ConfigError, match="ghost"):
        Team("t", agents=names("a", "b"), rules=[Rule(FromSpeaker("a"), AgentTarget("ghost"))])
    with pytest.raises(ConfigError, match="ghost"):
        Team("t", agents=names("a", "b"), initial="ghost")


# --------------------------------------------------------------------------- composition


async def test_a_team_as_a_tool_reports_its_final_answer() -> None:
    model = ScriptedModel(by_agent={"coordinator": [tool_call("review", {"query": "check this"}),
                                                    text("coordinated")],
                                    "writer": [text("draft")],
                                    "reviewer": [text("SUMMARY: REVIEWED-OK")]})
    team = Team("review", agents=members(model)[:2], description="Reviews drafts.", rules=[
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), TerminateTarget("reviewed")),
    ])
    coordinator = Agent("coordinator", instructions="x", model=model, tools=[team.as_tool()])
    result = await Runner.run(coordinator, "go")
    [res] = result.tool_results
    assert not res.is_error and "REVIEWED-OK" in res.message.content
    assert speakers(model) == ["coordinator", "writer", "reviewer", "coordinator"]
    assert result.final_output == "coordinated"


async def test_a_swarm_member_runs_its_own_members() -> None:
    model = ScriptedModel([text("a answers"), text("c answers")])
    desk = swarm("sw", [Agent("a", instructions="a", model=model),
                        Agent("b", instructions="b", model=model)])
    c = Agent("c", instructions="c", model=model)
    team = Team("t", agents=[desk, c], rules=[Rule(FromSpeaker("sw"), AgentTarget("c")),
                                              Rule(FromSpeaker("c"), TerminateTarget("done"))])
    result = await Runner.run(team, "go")
    assert speakers(model) == ["a", "c"]
    assert "transfer_to_b" in model.requests[0].tools
    assert "a answers" in [m.content for m in model.requests[1].messages]
    assert result.final_output == "c answers"
    assert result.reason == "done"
    assert_valid_protocol(await session_messages(result.session))


# --------------------------------------------------------------------------- construction and start


@pytest.mark.parametrize("bad", ["unknown agent", "unknown initial", "cycle"])
def test_a_rejected_team_leaves_its_agents_free_for_a_corrected_one(bad: str) -> None:
    model = ScriptedModel(by_agent={"a": [text("a done")], "b": [text("b done")]})
    a, b = names("a", "b", model=model)
    wrong: dict[str, dict[str, Any]] = {
        "unknown agent": {"rules": [Rule(FromSpeaker("a"), AgentTarget("ghost"))]},
        "unknown initial": {"initial": "ghost"},
        "cycle": {"rules": [Rule(FromSpeaker("a"), AgentTarget("b")),
                            Rule(FromSpeaker("b"), AgentTarget("a"))]},
    }
    with pytest.raises(ConfigError):
        Team("t", agents=[a, b], **wrong[bad])
    assert a.parent is None and b.parent is None
    team = Team("t", agents=[a, b], rules=[Rule(FromSpeaker("a"), AgentTarget("b")),
                                           Rule(FromSpeaker("b"), TerminateTarget("done"))])
    assert a.parent is team and b.parent is team


@pytest.mark.parametrize(("start", "spoke"), [("reviewer", ["reviewer", "editor"]),
                                              ("editor", ["editor"])])
async def test_start_agent_starts_the_team_at_that_member_under_its_rules(
        start: str, spoke: list[str]) -> None:
    model = ScriptedModel(by_agent={"writer": [], "reviewer": [text("reviewed")],
                                    "editor": [text("edited")]})
    team = Team("t", agents=members(model), rules=[
        Rule(FromSpeaker("writer"), AgentTarget("reviewer")),
        Rule(FromSpeaker("reviewer"), AgentTarget("editor")),
        Rule(FromSpeaker("editor"), TerminateTarget("edited")),
    ])
    result = await Runner.run(team, "go", start_agent=start)
    assert speakers(model) == spoke
    assert result.final_output == "edited"
    assert result.reason == "edited"
    assert result.last_agent.name == "editor"
    assert_valid_protocol(await session_messages(result.session))
