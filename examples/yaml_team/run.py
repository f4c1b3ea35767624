"""Validate the YAML team in this directory, draw it, and run it offline with a scripted model.

    python examples/yaml_team/run.py

The model plays scripts/handoff.yaml, the answers `relayrace run examples/yaml_team ...
--model scripted:examples/yaml_team/scripts/handoff.yaml` plays too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from relayrace import Runner
from relayrace.config import load_script, load_team, to_mermaid

HERE = Path(__file__).parent


async def main() -> None:
    model = load_script(HERE / "scripts" / "handoff.yaml")
    team = load_team(HERE, model=model)  # model= replaces every agent's model
    for warning in team.warnings:
        print("warning:", warning)
    print(to_mermaid(team))
    result = await Runner.run(team["lead"], "What is a handoff?")
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
