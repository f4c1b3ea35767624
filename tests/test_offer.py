"""What a turn offers the model is one value, built once per turn (``_engine.offer``): the
request carries it and the turn's calls are checked against it, so every gate is asked once
per turn, and what was offered is what may be called."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from relayrace import Agent, Message, RunContext, Runner, ToolCall, handoff, tool
from relayrace._engine.loop import AgentLoop
from relayrace._engine.state import RunState
from relayrace._engine.turn import Finished
from relayrace.agents.delegation import submit_report
from relayrace.agents.tools import Tool, Toolset
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, text, tool_call
from relayrace.tracing import Trace


class Flipping:
    """A gate that says yes, then no, then yes...: it changes its mind at every question."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, ctx: RunContext[Any]) -> bool:
        self.asked += 1
        return self.asked % 2 == 1


@tool
def lookup(key: str) -> str:
    """Look something up.

    Args:
        key: What to look up.
    """
    return f"value of {key}"


async def test_a_tool_offered_by_a_gate_that_then_changes_its_mind_is_still_called() -> None:
    gate = Flipping()

    @tool
    def gated(key: str) -> str:
        """Look something up, when allowed.

        Args:
            key: What to look up.
        """
        return f"value of {key}"

    gated.is_enabled = gate
    model = ScriptedModel([tool_call("gated", {"key": "a"}), text("done")])
    agent = Agent("a", instructions="a", model=model, tools=[gated])
    result = await Runner.run(agent, "hi")
    assert model.requests[0].tools == ["gated"]  # offered in the first turn...
    told = model.requests[1].messages[-1]
    assert told.role == "tool" and told.content == "value of a"  # ...and its call ran
    assert model.requests[1].tools == []  # the second turn asked again: no
    assert gate.asked == 2  # once per turn, never again for the call
    assert result.final_output == "done"


async def test_a_handoff_gate_is_asked_once_per_turn_and_its_offer_holds_for_the_call() -> None:
    gate = Flipping()
    model = ScriptedModel([tool_call("transfer_to_vip", {"reason": "r"}), text("vip desk")])
    vip = Agent("vip", instructions="v", model=model)
    root = Agent("root", instructions="r", model=model,
                 sub_agents=[handoff(vip, is_enabled=gate)])
    result = await Runner.run(root, "hi")
    assert "transfer_to_vip" in model.requests[0].tools
    assert result.last_agent.name == "vip" and result.final_output == "vip desk"
    assert gate.asked == 1  # the root's one turn; the call was checked against its offer


class Listed(Toolset):
    """A toolset (as an MCP server's) listing the same tools every time."""

    label = "test toolset"

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = tuple(tools)

    async def list_tools(self) -> Sequence[Tool]:
        return self.tools


async def test_a_resumed_childs_submit_report_is_offered_by_construction() -> None:
    # A child with a toolset, resumed with its submit_report call still open: the call is
    # checked against the turn's offer, which holds the loop's extra tools whatever listed.
    child = Agent("child", instructions="c", model=ScriptedModel(), tools=[Listed([lookup])])
    loop = AgentLoop(RunState(None, Trace()), child, MemorySession(), depth=1,
                     path_prefix="lead/", extra_tools=(submit_report,))
    call = ToolCall("c0", "submit_report", json.dumps({
        "summary": "all found", "confidence": "high", "confidence_reason": "checked"}))
    loop.pieces.push(Message.user("task"))
    loop.pieces.push(Message("assistant", "", (call,), None, "child"))
    span = loop.pieces.state.trace.start("agent", "child", None)
    step = (await loop.take_turn(child, span, [call], False)).next
    [result] = [m for m in loop.transcript if m.role == "tool"]
    assert result.content == "Finishing the run: report submitted"
    assert type(step) is Finished and json.loads(step.text)["summary"] == "all found"
