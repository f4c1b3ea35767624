"""A person as a handoff target: the run stops for them, their replies join the conversation
as the human agent's messages, and they hand the conversation back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_valid_protocol, of_type, requests_of, session_messages
from relayrace import (
    Agent,
    HandoffEvent,
    HumanTakeoverEvent,
    RunFinishedEvent,
    Runner,
    UserError,
    human,
)
from relayrace.agents.approvals import PendingRun
from relayrace.runner import RunOptions, run_with
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import ScriptedModel, tool_call

ESCALATE = tool_call("transfer_to_Support_desk", {"reason": "wants a person"}, id="call_esc")


def desk(model: Any) -> Agent:
    """A triage agent that can hand the conversation to a person at the support desk."""
    person = human("Support desk", description="A person at the support desk.")
    billing = Agent("billing", instructions="You handle billing.", model=model)
    return Agent("triage", instructions="Route the user.", model=model,
                 sub_agents=[billing, person])


async def test_a_transfer_to_a_person_stops_the_run_with_a_pending_takeover() -> None:
    model = ScriptedModel(by_agent={"triage": [ESCALATE]})
    team = desk(model)
    result = await Runner.run(team, "I want a person", session=MemorySession())
    assert result.pending is not None and result.reason == "awaiting a person's reply"
    takeover = result.pending.takeover
    assert takeover is not None
    assert (takeover.agent, takeover.from_agent) == ("Support desk", "triage")
    [event] = of_type(result.new_events, HumanTakeoverEvent)
    assert (event.agent, event.from_agent) == ("Support desk", "triage")
    assert of_type(result.new_events, RunFinishedEvent)[-1].status == "interrupted"
    # JSON like approvals: the takeover travels, and comes back equal.
    data = json.loads(result.pending.to_json())
    assert data["takeover"]["agent"] == "Support desk"
    again = PendingRun.from_json(result.pending.to_json(), entry=team, session=result.session)
    assert again.takeover == takeover
    assert len(model.requests) == 1  # the person's turn called no model
    assert "transfer_to_Support_desk" in model.requests[0].tools


async def test_a_person_replies_keeps_the_conversation_and_hands_it_back() -> None:
    model = ScriptedModel(by_agent={"triage": [ESCALATE],
                                    "billing": ["Your refund is on its way."]})
    team = desk(model)
    session = MemorySession()
    first = await Runner.run(team, "I want a person", session=session)
    assert first.pending is not None

    # The person's reply is the human agent's answer; the run ends with it.
    replied = await Runner.resume(first.pending, reply="Hi, this is Ana. How can I help?")
    assert replied.pending is None
    assert replied.final_output == "Hi, this is Ana. How can I help?"
    assert replied.last_agent.name == "Support desk"
    assert len(model.requests) == 1

    # The user's next message goes to the person: the run stops again, no model call.
    second = await Runner.run(team, "I was charged twice", session=session)
    assert second.pending is not None and second.pending.takeover is not None
    assert second.pending.takeover.from_agent == "triage"
    assert len(model.requests) == 1
    third = await Runner.resume(second.pending, reply="Let me look into it.")
    assert third.final_output == "Let me look into it."

    # The person hands back to billing without a reply: billing answers the user now.
    fourth = await Runner.run(team, "Any news?", session=session)
    assert fourth.pending is not None
    back = await Runner.resume(fourth.pending, hand_back="billing")
    assert back.pending is None
    assert back.final_output == "Your refund is on its way."
    assert back.last_agent.name == "billing"
    [handback] = of_type(back.new_events, HandoffEvent)
    assert (handback.agent, handback.to_agent) == ("Support desk", "billing")
    # Billing saw the person's words as that agent's messages, and the user's.
    [seen] = requests_of(model, "billing")
    said = [(m.role, m.name, m.content) for m in seen.messages]
    assert ("assistant", "Support desk", "Let me look into it.") in said
    assert any(m.role == "user" and m.content == "Any news?" for m in seen.messages)
    assert_valid_protocol(await session_messages(session))


async def test_a_reply_with_hand_back_true_returns_to_the_agent_that_transferred() -> None:
    model = ScriptedModel(by_agent={"triage": [ESCALATE, "Anything else?"]})
    team = desk(model)
    session = MemorySession()
    first = await Runner.run(team, "I want a person", session=session)
    assert first.pending is not None
    done = await Runner.resume(first.pending, reply="Fixed it for you.", hand_back=True)
    assert done.final_output == "Fixed it for you."
    assert len(model.requests) == 1  # the reply answered this turn
    # The agent that transferred takes the user's next turn.
    nxt = await Runner.run(team, "thanks", session=session)
    assert nxt.pending is None and nxt.final_output == "Anything else?"
    assert nxt.last_agent.name == "triage"


async def test_mistakes_in_a_reply_are_refused_before_anything_is_written() -> None:
    model = ScriptedModel(by_agent={"triage": [ESCALATE]})
    team = desk(model)
    session = MemorySession()
    first = await Runner.run(team, "I want a person", session=session)
    assert first.pending is not None
    size = len(await session.get_events())
    with pytest.raises(UserError, match="not an agent of the team"):
        await Runner.resume(first.pending, hand_back="nobody")
    with pytest.raises(UserError, match="non-empty text"):
        await Runner.resume(first.pending, reply="  ")
    assert len(await session.get_events()) == size
    # A reply where no person holds the conversation says what it answers.
    plain = await Runner.run(Agent("a", instructions="A.", model=ScriptedModel(["hi"])), "x")
    with pytest.raises(UserError, match="No person holds this conversation"):
        await run_with(plain.last_agent, None, plain.session, RunOptions(reply="hello"))


async def test_a_takeover_is_replied_to_from_another_process(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    model = ScriptedModel(by_agent={"triage": [ESCALATE]})
    first = await Runner.run(desk(model), "I want a person", session=SQLiteSession("s", db))
    assert first.pending is not None
    # The process that stopped is gone: another finds the takeover on disk and replies.
    done = subprocess.run([sys.executable, "-c", (
        "import asyncio, sys\n"
        "from relayrace import Agent, Runner, human\n"
        "from relayrace.agents.approvals import PendingRun\n"
        "from relayrace.sessions import SQLiteSession\n"
        "from relayrace.testing import ScriptedModel\n"
        "async def go():\n"
        "    person = human('Support desk')\n"
        "    team = Agent('triage', instructions='t', model=ScriptedModel([]),\n"
        "                 sub_agents=[Agent('billing', instructions='b',\n"
        "                                   model=ScriptedModel([])), person])\n"
        "    p = await PendingRun.from_session(SQLiteSession('s', sys.argv[1]), entry=team)\n"
        "    assert p.takeover.from_agent == 'triage'\n"
        "    r = await Runner.resume(p, reply='Ana here.')\n"
        "    print(r.final_output)\n"
        "asyncio.run(go())\n"), str(db)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Ana here."
    messages = await session_messages(SQLiteSession("s", db))
    assert (messages[-1].role, messages[-1].name, messages[-1].content) == \
        ("assistant", "Support desk", "Ana here.")


SUPPORT_YAML = """\
apiVersion: astromesh/v1
kind: Agent
metadata: {name: customer-support}
spec:
  model: {primary: {provider: openai, model: gpt-4o}}
  prompts: {system: Help the customer or hand off.}
  orchestration: {pattern: swarm, max_iterations: 10}
  tools:
    - name: billing-agent
      type: agent
      agent: billing-specialist
      description: Handle billing and payment questions
    - name: human-escalation
      type: human
      description: Escalate to a human agent
---
apiVersion: astromesh/v1
kind: Agent
metadata: {name: billing-specialist}
spec:
  model: {primary: {provider: openai, model: gpt-4o}}
  prompts: {system: You handle billing.}
---
apiVersion: relayrace/v1
kind: Agent
metadata: {name: frontdesk}
spec:
  model: {primary: {provider: openai, model: gpt-4o}}
  prompts: {system: Greet and route.}
  tools:
    - {type: human, name: support-desk, description: A person at the support desk.}
"""


async def test_type_human_in_yaml_is_a_person_to_transfer_to(tmp_path: Path) -> None:
    from relayrace import HumanAgent
    from relayrace.config import load_team

    (tmp_path / "support.agent.yaml").write_text(SUPPORT_YAML)
    model = ScriptedModel(by_agent={
        "customer-support": [tool_call("transfer_to_human-escalation", {"reason": "angry"})],
        "frontdesk": [tool_call("transfer_to_support-desk", {"reason": "asks for a person"}),
                      "Welcome back!"]})
    team = load_team(tmp_path, model=model)
    # A swarm member (the Astromesh docs' human-escalation member).
    swarm_run = await Runner.run(team["customer-support"], "I want a human")
    assert swarm_run.pending is not None and swarm_run.pending.takeover is not None
    assert swarm_run.pending.takeover.agent == "human-escalation"
    assert isinstance(team["customer-support"].find_agent("human-escalation"), HumanAgent)
    answered = await Runner.resume(swarm_run.pending, reply="A person here.")
    assert answered.final_output == "A person here."
    # A plain agent's transfer target; the person hands back to it.
    session = MemorySession()
    first = await Runner.run(team["frontdesk"], "a person please", session=session)
    assert first.pending is not None and first.pending.takeover is not None
    assert first.pending.takeover.from_agent == "frontdesk"
    back = await Runner.resume(first.pending, hand_back=True)
    assert back.final_output == "Welcome back!" and back.last_agent.name == "frontdesk"


async def test_a_durable_run_waits_for_the_person_and_goes_on_with_the_reply(
        tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    from relayrace.durable import DurableRunner

    model = ScriptedModel(by_agent={"triage": [ESCALATE],
                                    "billing": ["Your refund is on its way."]})
    async with DurableRunner(desk(model), db=tmp_path / "s.db", heartbeat=0.2,
                             dead_after=1.0) as durable:
        run = await durable.submit("I want a person")
        stopped = await durable.result(run.run_id, wait=30)
        assert stopped.status == "interrupted" and stopped.pending is not None
        assert stopped.pending.takeover is not None
        assert stopped.pending.takeover.from_agent == "triage"
        with pytest.raises(UserError, match="not an agent of the team"):
            await durable.resume(run.session_id, hand_back="nobody")
        replied = await durable.resume(run.session_id, reply="Ana here.")
        done = await durable.result(replied.run_id, wait=30)
        assert done.status == "completed" and done.output == "Ana here."
        nxt = await durable.submit("still there?", session_id=run.session_id)
        waiting = await durable.result(nxt.run_id, wait=30)
        assert waiting.status == "interrupted" and waiting.pending is not None
        back = await durable.resume(run.session_id, hand_back="billing")
        answered = await durable.result(back.run_id, wait=30)
    assert answered.status == "completed" and answered.output == "Your refund is on its way."
    assert len(requests_of(model, "billing")) == 1


def test_the_cli_says_a_person_holds_the_conversation(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from relayrace.cli import EXIT_APPROVAL, app

    (tmp_path / "desk_team.py").write_text(
        "from relayrace import Agent, human\n"
        "from relayrace.testing import ScriptedModel, tool_call\n"
        "model = ScriptedModel([tool_call('transfer_to_desk', {'reason': 'a person'})])\n"
        "triage = Agent('triage', instructions='Route.', model=model,\n"
        "               sub_agents=[human('desk')])\n")
    stopped = CliRunner(env={"COLUMNS": "200", "RELAYRACE_DB": None}).invoke(
        app, ["run", f"{tmp_path}/desk_team.py:triage", "a person please", "--db",
              str(tmp_path / "s.db")])
    assert stopped.exit_code == EXIT_APPROVAL, stopped.output
    assert "desk (a person) holds the conversation" in stopped.stdout
    assert "relayrace resume" not in stopped.stdout  # nothing the CLI could decide


async def test_a_team_routes_to_a_person_and_its_rules_take_the_reply() -> None:
    from relayrace.teams.routing import rule_from_dict
    from relayrace.teams.team import Team

    model = ScriptedModel(by_agent={"front": ["I'll get you a person."]})
    team = Team("t", agents=[Agent("front", instructions="f", model=model), human("desk")],
                rules=[rule_from_dict({"when": {"from_speaker": "front"},
                                       "then": {"agent": "desk"}}),
                       rule_from_dict({"when": {"from_speaker": "desk"},
                                       "then": {"terminate": "the person answered"}})])
    first = await Runner.run(team, "hello", session=MemorySession())
    assert first.pending is not None and first.pending.takeover is not None
    assert first.pending.takeover.from_agent == "front"  # routed in this very run
    done = await Runner.resume(first.pending, reply="A person here.")
    assert (done.final_output, done.reason) == ("A person here.", "the person answered")
    assert len(model.requests) == 1


async def test_a_person_reached_inside_a_delegated_child_answers_for_it() -> None:
    model = ScriptedModel(by_agent={
        "inner": [tool_call("transfer_to_desk", {"reason": "needs a person"})],
        "outer": [tool_call("inner", {"query": "help"}), "The desk says hi."]})
    inner = Agent("inner", instructions="i", model=model, sub_agents=[human("desk")])
    outer = Agent("outer", instructions="o", model=model, tools=[inner.as_tool(report=False)])
    first = await Runner.run(outer, "go", session=MemorySession())
    assert first.pending is not None and first.pending.takeover is not None
    assert (first.pending.takeover.path, first.pending.takeover.from_agent) == \
        ("outer/desk", "inner")
    done = await Runner.resume(first.pending, reply="hi from the desk")
    assert done.final_output == "The desk says hi."
    [result] = [r for r in done.tool_results if r.tool_name == "inner"]
    assert "hi from the desk" in result.message.content
