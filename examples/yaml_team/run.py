"""Validate the YAML team in this directory, draw it, and run it offline with a scripted model.

    python examples/yaml_team/run.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from relayrace import Runner
from relayrace.config import load_team, to_mermaid
from relayrace.testing import ScriptedModel, text, tool_call

HERE = Path(__file__).parent


async def main() -> None:
    model = ScriptedModel([
        tool_call("research", {"query": "What is a handoff?", "topic": "handoffs"}),
        tool_call("search_notes", {"query": "handoff"}),
        text("A handoff moves the live conversation to another agent (note 1)."),
        tool_call("write", {"query": "Explain handoffs from the notes."}),
        text("A handoff passes the conversation on. Sources: note 1."),
        text("A handoff passes the conversation on. Sources: note 1."),
    ])
    team = load_team(HERE, model=model)  # model= replaces every agent's model
    for warning in team.warnings:
        print("warning:", warning)
    print(to_mermaid(team))
    result = await Runner.run(team["lead"], "What is a handoff?")
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
