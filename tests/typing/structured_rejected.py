"""Must FAIL mypy --strict (tests/test_typing.py checks that it does): these uses contradict
the agents' output types."""

from __future__ import annotations

from pydantic import BaseModel

from relayrace import Agent, Runner


class Plan(BaseModel):
    title: str


async def wrong() -> None:
    agent = Agent("planner", instructions="Plan.", output_type=Plan)
    result = await Runner.run(agent, "go")
    result.final_output.summary  # noqa: B018 - no such field
    text: str = result.final_output  # noqa: F841 - a Plan is not a str
    plain = Agent("a", instructions="Answer.")
    (await Runner.run(plain, "go")).final_output.steps  # noqa: B018 - a str has none
