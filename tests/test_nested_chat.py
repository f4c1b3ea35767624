"""AG2's NestedChatTarget: a team rule sends control to a nested team or chain of agents that
runs on the conversation so far, in a child session; its result comes back as one message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import assert_valid_protocol, session_messages
from relayrace import Agent, ConfigError, Runner
from relayrace.sessions import MemorySession
from relayrace.teams.routing import (
    AgentTarget,
    FromSpeaker,
    NestedChatTarget,
    Rule,
    TerminateTarget,
)
from relayrace.teams.team import Team
from relayrace.teams.workflows import SequentialAgent
from relayrace.testing import ScriptedModel, text


def script() -> ScriptedModel:
    return ScriptedModel(by_agent={
        "writer": [text("DRAFT: cats sleep a lot")],
        "fact_checker": [text("facts ok")], "style": [text("REVIEW: tighten the wording")],
        "editor": [text("Final: cats sleep 15 hours a day.")]})


def members(model: ScriptedModel) -> tuple[list[Agent[Any]], SequentialAgent]:
    writer, editor = (Agent(n, instructions=n, model=model) for n in ("writer", "editor"))
    reviewers = SequentialAgent("reviewers", steps=[
        Agent("fact_checker", instructions="Check facts.", model=model),
        Agent("style", instructions="Check style.", model=model)])
    return [writer, editor], reviewers


def team(model: ScriptedModel) -> Team:
    agents, reviewers = members(model)
    return Team("desk", agents=agents, nested=[reviewers], rules=[
        Rule(FromSpeaker("writer"), NestedChatTarget("reviewers", then=AgentTarget("editor"))),
        Rule(FromSpeaker("editor"), TerminateTarget("published"))])


async def test_a_nested_chat_runs_in_a_child_session_and_comes_back_as_one_message() -> None:
    model = script()
    session = MemorySession()
    result = await Runner.run(team(model), "write about cats", session=session)
    assert result.final_output == "Final: cats sleep 15 hours a day."
    assert [r.agent for r in model.requests] == ["writer", "fact_checker", "style", "editor"]
    # The nested chain saw the conversation so far.
    assert any("DRAFT: cats" in m.content for m in model.requests[1].messages)
    # In the team's session: one message from the target; the steps stayed in the child.
    said = [(m.name, m.content) for m in await session_messages(session)
            if m.role == "assistant"]
    assert said == [("writer", "DRAFT: cats sleep a lot"),
                    ("reviewers", "REVIEW: tighten the wording"),
                    ("editor", "Final: cats sleep 15 hours a day.")]
    assert any("REVIEW: tighten" in m.content for m in model.requests[3].messages)
    assert_valid_protocol(await session_messages(session))


async def test_then_terminate_ends_the_run_with_the_nested_answer() -> None:
    model = script()
    agents, reviewers = members(model)
    desk = Team("desk", agents=agents, nested=[reviewers], rules=[
        Rule(FromSpeaker("writer"), NestedChatTarget("reviewers", then=TerminateTarget("ok")))])
    result = await Runner.run(desk, "write", session=MemorySession())
    assert result.final_output == "REVIEW: tighten the wording" and result.reason == "ok"


def test_the_graph_saves_and_loads_with_the_nested_chat() -> None:
    model = script()
    data = team(model).to_dict()
    assert data["rules"][0]["then"] == {"nested_chat": {"agent": "reviewers",
                                                        "then": {"agent": "editor"}}}
    agents, reviewers = members(model)
    again = Team.from_dict(data, agents=[*agents, reviewers])
    assert again.to_dict() == data


def test_a_nested_chat_the_team_was_not_given_is_refused() -> None:
    agents, _ = members(script())
    with pytest.raises(ConfigError, match="not in nested"):
        Team("desk", agents=agents, rules=[Rule(FromSpeaker("writer"),
                                                NestedChatTarget("reviewers"))])


YAML = """\
apiVersion: relayrace/v1
kind: Agent
metadata: {{name: {name}}}
spec:
  prompts: {{system: {name}}}
"""


async def test_a_nested_chat_in_yaml(tmp_path: Path) -> None:
    from relayrace.config import load_team

    for n in ("writer", "editor", "fact_checker", "style"):
        (tmp_path / f"{n}.yaml").write_text(YAML.format(name=n))
    (tmp_path / "reviewers.yaml").write_text(
        "apiVersion: relayrace/v1\nkind: Workflow\nmetadata: {name: reviewers}\n"
        "spec:\n  type: sequential\n  steps: [fact_checker, style]\n")
    (tmp_path / "desk.yaml").write_text(
        "apiVersion: relayrace/v1\nkind: Team\nmetadata: {name: desk}\nspec:\n"
        "  agents: [writer, editor]\n  rules:\n"
        "    - when: {from_speaker: writer}\n"
        "      then: {nested_chat: {agent: reviewers, then: {agent: editor}}}\n"
        "    - when: {from_speaker: editor}\n      then: {terminate: published}\n")
    desk = load_team(tmp_path)["desk"]
    assert isinstance(desk, Team) and list(desk.nested) == ["reviewers"]
    model = script()
    for a in [*desk.walk(), *desk.nested["reviewers"].walk()]:
        if not a.is_composite:
            a.model = model
    result = await Runner.run(desk, "write", session=MemorySession())
    assert result.final_output == "Final: cats sleep 15 hours a day."
    assert [r.agent for r in model.requests] == ["writer", "fact_checker", "style", "editor"]
