"""Property tests: whatever the model emits, the session stays valid for the chat APIs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conftest import messages_of, protocol_violations
from relayrace import (
    Agent,
    HandoffEvent,
    Message,
    MessageEvent,
    ModelProviderError,
    RelayraceError,
    RunFinishedEvent,
    Runner,
    RunStartedEvent,
    ToolCall,
    ToolResultEvent,
    TransferPolicy,
    tool,
)
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, TextPart, ToolCallPart, text, tool_call

# --- the protocol checker itself must be able to fail --------------------------------------


def _call(i: str) -> ToolCall:
    return ToolCall(i, "t", "{}")


def test_protocol_checker_accepts_a_valid_log() -> None:
    log = [
        Message.user("hi"),
        Message.assistant("", (_call("a"), _call("b"))),
        Message.tool("a", "1"),
        Message.tool("b", "2"),
        Message.assistant("done"),
    ]
    assert protocol_violations(log) == []


@pytest.mark.parametrize(
    "log",
    [
        [Message.user("hi"), Message.assistant("", (_call("a"),))],
        [Message.assistant("", (_call("a"),)), Message.user("again"), Message.tool("a", "1")],
        [Message.assistant("", (_call("a"), _call("b"))), Message.tool("b", "2"),
         Message.tool("a", "1")],
        [Message.assistant("", (_call("a"),)), Message.tool("a", "1"), Message.tool("a", "1")],
        [Message.user("hi"), Message.tool("x", "1")],
        [Message.assistant("", (_call("a"),)), Message.assistant("x"), Message.tool("a", "1")],
    ],
    ids=["dangling", "user-before-result", "out-of-order", "duplicate-result", "orphan",
         "assistant-before-result"],
)
def test_protocol_checker_rejects_invalid_logs(log: list[Message]) -> None:
    assert protocol_violations(log)


# --- the team under test ------------------------------------------------------------------


@tool
async def ok_tool(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


@tool
async def bad_tool() -> str:
    """Always fails."""
    raise RuntimeError("broken on purpose")


@tool(sequential=True)
async def seq_tool() -> str:
    """Must run alone."""
    await asyncio.sleep(0)
    return "seq"


AGENTS = ("root", "alpha", "beta", "gamma")


def build(mode: str) -> Agent:
    """root -> (alpha [to_parent], beta [to_peers] -> gamma [to_parent, to_peers])."""
    gamma = Agent("gamma", instructions="g", handoff_tools=mode,
                  transfer_policy=TransferPolicy(to_parent=True, to_peers=True))
    alpha = Agent("alpha", instructions="a", tools=[ok_tool, bad_tool], handoff_tools=mode,
                  transfer_policy=TransferPolicy(to_parent=True))
    beta = Agent("beta", instructions="b", tools=[seq_tool, ok_tool], sub_agents=[gamma],
                 handoff_tools=mode, transfer_policy=TransferPolicy(to_peers=True))
    return Agent("root", instructions="r", tools=[ok_tool, bad_tool, seq_tool],
                 sub_agents=[alpha, beta], handoff_tools=mode)


TEAMS = {mode: build(mode) for mode in ("per_agent", "single")}


def allowed_targets(agent: Agent) -> set[str]:
    """The transfers the spec allows, computed independently of the engine."""
    targets = {a.name for a in agent.sub_agents}
    parent = agent.parent
    if parent is not None:
        if agent.transfer_policy.to_parent:
            targets.add(parent.name)
        if agent.transfer_policy.to_peers:
            targets |= {a.name for a in parent.sub_agents if a is not agent}
    return targets


# --- strategies ---------------------------------------------------------------------------

names = st.sampled_from([*AGENTS, "nobody", ""])
reasons = st.one_of(st.none(), st.text(max_size=20))


@dataclass(frozen=True)
class Transfer:
    """A transfer request, written as the team's mode expects unless ``style`` says otherwise."""

    target: str
    reason: str | None = None
    style: str = "mode"  # "mode", or force "per_agent" / "single" (wrong in the other mode)

    def part(self, mode: str) -> ToolCallPart:
        style = mode if self.style == "mode" else self.style
        args: dict[str, Any] = {} if self.reason is None else {"reason": self.reason}
        if style == "single":
            return tool_call("transfer_to_agent", {"agent_name": self.target, **args})
        return tool_call(f"transfer_to_{self.target}", args)


transfers = st.builds(
    Transfer, names, reasons, st.sampled_from(["mode", "mode", "mode", "per_agent", "single"])
)
other_parts = st.one_of(
    st.builds(lambda x: tool_call("ok_tool", {"x": x}), st.integers(-100, 100)),
    st.just(tool_call("ok_tool", {"x": "not a number"})),
    st.just(tool_call("ok_tool", {})),
    st.sampled_from(["{bad", "[1]", "", "null", '{"x": 1,}']).map(
        lambda raw: tool_call("ok_tool", raw)),
    st.just(tool_call("bad_tool")),
    st.just(tool_call("seq_tool")),
    st.sampled_from(["no_such_tool", "transfer_to", "TRANSFER_TO_ROOT"]).map(tool_call),
    st.sampled_from(['{"agent_name": ', "{}", '{"agent_name": 3}', '{"reason": 5}']).map(
        lambda raw: tool_call("transfer_to_agent", raw)),
    st.sampled_from(["{bad", '"x"', "[]"]).map(lambda raw: tool_call("transfer_to_alpha", raw)),
    st.text(min_size=1, max_size=15).map(text),
)
parts = st.one_of(transfers, other_parts)
turns = st.one_of(
    transfers,  # a bare transfer
    other_parts,
    st.lists(parts, min_size=0, max_size=5),  # [] is an empty turn: ModelBehaviorError
    st.lists(transfers, min_size=2, max_size=3),  # several transfers in one turn
    st.just(ModelProviderError("boom", status_code=500)),
)
# Bare transfers between root and alpha (allowed both ways): ping-pong territory.
bounce = st.sampled_from([Transfer("alpha"), Transfer("root")])
scripts = st.one_of(
    st.lists(turns, max_size=8),
    st.lists(st.one_of(bounce, turns), min_size=3, max_size=8),
)


def realize(turn: Any, mode: str) -> Any:
    """The scripted turn for ``mode``: transfers become that mode's tool calls."""
    if isinstance(turn, Transfer):
        return turn.part(mode)
    if isinstance(turn, list):
        return [p.part(mode) if isinstance(p, Transfer) else p for p in turn]
    return turn


def calls_in(turn: Any) -> int:
    if isinstance(turn, BaseException):
        return 0
    seq = [turn] if isinstance(turn, TextPart | ToolCallPart) else list(turn)
    return sum(1 for p in seq if isinstance(p, ToolCallPart))


async def _run(
    mode: str, script: list[Any], **options: Any
) -> tuple[Any, Any, list[Any]]:
    agent = TEAMS[mode]
    queue = [realize(t, mode) for t in script]
    played: list[Any] = []

    def fn(req: Any) -> Any:
        turn = queue.pop(0) if queue else text("done")
        played.append(turn)
        return turn

    session = MemorySession()
    error: BaseException | None = None
    try:
        await Runner.run(agent, "hello", session=session, model=FunctionModel(fn), **options)
    except RelayraceError as exc:
        error = exc
    return session, error, played


@settings(max_examples=150, deadline=None)
@given(
    mode=st.sampled_from(["per_agent", "single"]),
    script=scripts,
    max_turns=st.sampled_from([10, 6, 3, 2, 1]),
    max_handoffs=st.one_of(st.none(), st.integers(0, 3)),
)
def test_session_stays_valid_whatever_the_model_does(
    mode: str, script: list[Any], max_turns: int, max_handoffs: int | None
) -> None:
    root = TEAMS[mode]
    session, error, played = asyncio.run(
        _run(mode, script, max_turns=max_turns, max_handoffs=max_handoffs)
    )
    events = asyncio.run(session.get_events())
    messages = messages_of(events)

    # Every tool call has exactly one result, in order, before anything else.
    assert protocol_violations(messages) == []

    # As many results as calls the model emitted.
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    emitted = sum(calls_in(t) for t in played)
    assert len(results) == emitted
    recorded = sum(len(m.tool_calls) for m in messages if m.role == "assistant")
    assert recorded == emitted

    # The log is framed by a start and a matching finish.
    assert isinstance(events[0], RunStartedEvent)
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.status == ("completed" if error is None else "failed")
    assert sum(isinstance(e, RunFinishedEvent) for e in events) == 1

    # Control moves only by allowed handoffs, at most one per model turn, within the limit.
    active = "root"
    handoffs = 0
    since_turn = 0
    for e in events:
        if isinstance(e, HandoffEvent):
            assert e.agent == active
            source = root.find_agent(e.agent)
            assert source is not None
            assert e.to_agent in allowed_targets(source), (e.agent, e.to_agent)
            active = e.to_agent
            handoffs += 1
            since_turn += 1
            assert since_turn == 1, "two handoffs in one model turn"
        elif isinstance(e, MessageEvent) and e.message.role == "assistant":
            assert e.agent == active
            since_turn = 0
        elif isinstance(e, ToolResultEvent):
            assert e.agent == active
    if max_handoffs is not None:
        assert handoffs <= max_handoffs
    event(f"outcome: {type(error).__name__ if error else 'completed'}")
    event(f"handoffs: {min(handoffs, 3)}")
    event(f"mode: {mode}")
    assert len(played) <= max_turns


@settings(max_examples=40, deadline=None)
@given(script=st.lists(turns, max_size=6), more=st.lists(turns, max_size=6))
def test_a_second_run_on_the_same_session_keeps_it_valid(
    script: list[Any], more: list[Any]
) -> None:
    """Whatever state a failed or finished run leaves, the next run continues validly."""
    root = TEAMS["per_agent"]

    async def go() -> tuple[list[Any], list[Any]]:
        session = MemorySession()
        played: list[Any] = []
        for part in (script, more):
            queue = [realize(t, "per_agent") for t in part]

            def fn(req: Any, queue: list[Any] = queue) -> Any:
                turn = queue.pop(0) if queue else text("done")
                played.append(turn)
                return turn

            try:
                await Runner.run(root, "again", session=session, model=FunctionModel(fn),
                                 max_turns=5)
            except RelayraceError:
                pass
        return await session.get_events(), played

    events, played = asyncio.run(go())
    messages = messages_of(events)
    assert protocol_violations(messages) == []
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(results) == sum(calls_in(t) for t in played)
