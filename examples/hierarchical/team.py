"""The hierarchical pattern: a coordinator above a researcher and a writer.

intake -> coordinator -> researcher -> coordinator -> writer. The coordinator routes with two
tools that return a typed ``TransferTo``; the researcher always returns to the coordinator
(``FromSpeaker(researcher) -> AgentTarget(coordinator)``); the writer's reply closes the run
(``FromSpeaker(writer) -> TerminateTarget("written")``), with no finish tool. When the
coordinator calls both delegate tools in one turn, the first emitted wins.
"""

from __future__ import annotations

import os

from relayrace import Agent, Model
from relayrace.teams.patterns import transfer_tool
from relayrace.teams.routing import AgentTarget, FromSpeaker, Rule, TerminateTarget
from relayrace.teams.team import Team

RULES = [
    Rule(FromSpeaker("intake"), AgentTarget("coordinator")),
    Rule(FromSpeaker("researcher"), AgentTarget("coordinator")),
    Rule(FromSpeaker("writer"), TerminateTarget("written")),
]


def build_team(model: Model | str) -> Team:
    """The four-agent team, every agent on ``model``."""
    intake = Agent("intake", model=model, description="Turns a request into a brief.",
                   instructions="Restate the user's request as a one-paragraph brief.")
    coordinator = Agent(
        "coordinator", model=model,
        tools=[transfer_tool("researcher", description="Send the researcher to gather facts."),
               transfer_tool("writer", description="Have the writer write the final text.")],
        description="Decides who works next; never writes the answer itself.",
        instructions="You own dispatch. If facts are missing, call transfer_to_researcher; once "
                     "the researcher has reported, call transfer_to_writer. Never answer yourself.")
    researcher = Agent("researcher", model=model, description="Gathers facts.",
                       instructions="List the key facts for the brief as short bullets.")
    writer = Agent("writer", model=model, description="Writes the final summary.",
                   instructions="Write a one-line summary from the researcher's facts.")
    return Team("brief", agents=[intake, coordinator, researcher, writer], rules=RULES,
                initial="intake", max_turns=10)


def configured_model() -> str | None:
    """A real model if the environment names one."""
    if os.environ.get("RELAYRACE_MODEL"):
        return os.environ["RELAYRACE_MODEL"]
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return "openai:" + os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    return None
