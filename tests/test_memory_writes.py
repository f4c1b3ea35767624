"""A memory session pays for no write that only a persistent log needs (issue 29, item 4).

A move's one-batch write (the transfer call's result with the ``HandoffEvent``) is there so a
crash cannot leave a persistent log with the old agent told "Transferred" and still active. A
memory log ends with the process, so it takes a run's events when a tool may read them (just
before tools run) and at the run's end: a chain of handoffs is one write, however long.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relayrace import Agent, RunContext, Runner, read_result, tool
from relayrace.core.events import (
    AgentEvent,
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    ToolResultEvent,
)
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


class CountingMemory(MemorySession):
    """A memory session that keeps each batch it is given (``persistent``: as if durable)."""

    def __init__(self, *, persistent: bool = False) -> None:
        super().__init__()
        self.persistent = persistent
        self.batches: list[list[AgentEvent]] = []

    async def append(self, events: Sequence[AgentEvent]) -> None:
        self.batches.append(list(events))
        await super().append(events)


def chain(size: int) -> Agent[Any]:
    """a0 hands over to a1, ... to a{size}, which answers."""

    def turn(req: Any) -> Any:
        i = int(req.agent[1:])
        return tool_call(f"transfer_to_a{i + 1}", {"reason": "next"}) if i < size else text("done")

    agent = Agent(f"a{size}", instructions="x", model=FunctionModel(turn))
    for i in range(size - 1, -1, -1):
        agent = Agent(f"a{i}", instructions="x", model=FunctionModel(turn), sub_agents=[agent])
    return agent


async def test_a_handoff_chain_reaches_a_memory_session_in_one_write() -> None:
    session = CountingMemory()
    result = await Runner.run(chain(5), "go", session=session)
    assert result.final_output == "done" and result.last_agent.name == "a5"
    assert len(session.batches) == 1  # the run's end; no write per move
    [batch] = session.batches
    assert [e.to_agent for e in batch if isinstance(e, HandoffEvent)] == [f"a{i}" for i in
                                                                          range(1, 6)]
    assert isinstance(batch[-1], RunFinishedEvent)
    assert session.events == batch == result.new_events


async def test_a_persistent_log_is_still_written_at_each_move() -> None:
    session = CountingMemory(persistent=True)
    await Runner.run(chain(3), "go", session=session)
    moved = [b for b in session.batches if any(isinstance(e, HandoffEvent) for e in b)]
    assert len(moved) == 3
    for batch in moved:  # the call's result and the move: one batch, the move last
        assert isinstance(batch[-1], HandoffEvent)
        assert isinstance(batch[-2], ToolResultEvent)
        assert batch[-2].message.content.startswith("Transferred from ")


async def test_a_tool_reads_in_a_memory_log_everything_before_its_call() -> None:
    """The log is written before tools run: the call itself, and what an earlier agent's
    turn logged, though the move that followed did not write it."""
    seen: list[list[str]] = []

    @tool(max_result_tokens=200)
    def server_log() -> str:
        """The server's log."""
        return "\n".join(f"12:00:{i:02d} request {i} ok" for i in range(600))

    @tool
    async def look(ctx: RunContext[Any]) -> str:
        """What the session holds."""
        events = await ctx.session.get_events()
        seen.append([e.message.tool_calls[0].name for e in events
                     if isinstance(e, MessageEvent) and e.message.tool_calls])
        return "looked"

    b = Agent("b", instructions="Read on.", tools=[read_result, look], model=ScriptedModel([
        tool_call("read_result", {"call_id": "log1", "offset": 700}, id="more"),
        tool_call("look", {}),
        text("read")]))
    a = Agent("a", instructions="Look, then pass on.", tools=[server_log], sub_agents=[b],
              model=ScriptedModel([[tool_call("server_log", {}, id="log1"),
                                    tool_call("transfer_to_b", {})]]))
    session = CountingMemory()
    result = await Runner.run(a, "Any errors?", session=session)
    assert result.final_output == "read"
    more = [r for r in result.tool_results if r.message.tool_call_id == "more"]
    assert more[0].message.content.startswith("[log1: characters 700 to ")
    assert seen == [["server_log", "read_result", "look"]]  # its own call included
    assert len(session.batches) == 4  # before each of the three tool turns, and the run's end
