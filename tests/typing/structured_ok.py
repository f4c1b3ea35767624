"""Checked by mypy --strict (see pyproject's [tool.mypy] files): a typed agent's run result
is its output type, used without a cast."""

from __future__ import annotations

from pydantic import BaseModel

from relayrace import Agent, Runner, RunResult
from relayrace.testing import ScriptedModel, final_output


class Plan(BaseModel):
    title: str
    steps: list[str]


async def plan() -> list[str]:
    model = ScriptedModel([final_output(Plan(title="t", steps=["a"]))])
    agent = Agent("planner", instructions="Plan.", model=model, output_type=Plan)
    result = await Runner.run(agent, "go")
    title: str = result.final_output.title
    return [title, *result.final_output.steps]


async def plain() -> str:
    agent = Agent("a", instructions="Answer.", model=ScriptedModel(["hi"]))
    result: RunResult[str] = await Runner.run(agent, "go")
    return result.final_output.upper()


def numbers() -> int:
    agent = Agent("n", instructions="Count.", model=ScriptedModel([]), output_type=int)
    return Runner.run_sync(agent, "go").final_output + 1


async def streamed() -> Plan | None:
    agent: Agent[None, Plan] = Agent("p", instructions="Plan.", output_type=Plan)
    stream = Runner.stream(agent, "go")
    async for _ in stream:
        pass
    return stream.result.final_output if stream.result is not None else None
